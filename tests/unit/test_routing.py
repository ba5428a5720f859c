"""The stream job's routing rules, as the pure functions the stages call."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from runonce.core.decision import Outcome
from runonce.kafka import topics
from runonce.kafka.partitioner import partition_for
from runonce.streams.routing import needs_rekey, next_topic, owner_partition, trusts_origin_headers


@given(st.text(min_size=1, max_size=60), st.integers(1, 64))
def test_exactly_one_partition_decides_a_key_and_it_is_kafkas(key: str, partitions: int) -> None:
    owner = owner_partition(key, partitions)
    assert owner == partition_for(key, partitions)  # where Kafka's producers put the key
    assert [p for p in range(partitions) if not needs_rekey(key, p, partitions)] == [owner]


def test_a_pass_goes_to_stage_2_and_only_approve_and_drop_are_final() -> None:
    assert next_topic(Outcome.PASS) == topics.SCOPED
    assert next_topic(Outcome.APPROVE) == topics.APPROVED
    assert next_topic(Outcome.DROP) == topics.DROPPED


def test_origin_headers_are_trusted_only_on_the_topic_only_the_job_writes() -> None:
    assert trusts_origin_headers(topics.REKEY)
    assert not any(trusts_origin_headers(t) for t in (topics.REQUESTED, topics.SCOPED, topics.APPROVED))
