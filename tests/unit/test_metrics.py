"""The stream worker's Prometheus metrics count what the job decided."""

from __future__ import annotations

from prometheus_client import generate_latest

from tests.support.memory import MemoryPipeline

T0 = 1_800_000_000_000


def test_decisions_unkeyed_dead_letters_and_latency_are_exposed() -> None:
    def go() -> MemoryPipeline:
        pipe = MemoryPipeline()
        pipe.feed("send_email", {"to": "a", "b": 1}, timestamp_ms=T0)           # unkeyed, approved
        pipe.feed("send_email", {"to": "a", "b": 1}, timestamp_ms=T0 + 1)       # unkeyed repeat
        pipe.feed("execute_database_write", {"sql": "x"}, key="k", timestamp_ms=T0)
        pipe.feed_raw(b"junk", key=b"j", timestamp_ms=T0)
        return pipe

    pipe = go()
    text = generate_latest(pipe.key_stage.metrics.registry).decode()
    assert 'runonce_decisions_total{outcome="APPROVED",reason="unique",tool="send_email"} 1.0' in text
    assert 'runonce_decisions_total{outcome="DROPPED",reason="duplicate_key",tool="send_email"} 1.0' in text
    assert 'runonce_decisions_total{outcome="DROPPED",reason="tool_denied",tool="execute_database_write"} 1.0' in text
    assert 'runonce_unkeyed_actions_total{tool="send_email"} 2.0' in text
    assert 'runonce_dead_letters_total{kind="decode_error"} 1.0' in text
    assert 'runonce_decision_seconds_count{stage="keys"}' in text
