"""Tenants in the core and on the wire: a key is its tenant's own, one-to-one; the default
tenant's keys are what they were (a single-tenant deployment and its state notice nothing); a
record written before tenants reads as the default tenant's."""

from __future__ import annotations

import io
import struct

import fastavro
import pytest
from fastavro.schema import to_parsing_canonical_form
from hypothesis import example, given
from hypothesis import strategies as st

import runonce.schemas as schemas
from runonce.core.action import Action
from runonce.core.decide import dedup_key, scope_of
from runonce.core.policy import PolicyBook
from runonce.core.tenant import DEFAULT_TENANT, PREFIX, scoped
from runonce.errors import InvalidAction
from runonce.sdk.submit import build_request
from runonce.wire.codec import MAGIC, Codec, crc64_avro
from runonce.wire.keys import request_key

tenants = st.one_of(st.just(DEFAULT_TENANT),
                    st.text(st.characters(blacklist_characters="/", blacklist_categories=("Cc", "Cs", "Zs", "Zl", "Zp")),
                            min_size=1, max_size=20))
keys = st.one_of(st.text(max_size=30), st.text(max_size=20).map(lambda k: PREFIX + k))


@given(tenants, keys, tenants, keys)
@example(DEFAULT_TENANT, "tenant/acme/order-1", "acme", "order-1")  # a default key that looks scoped
def test_no_two_tenant_key_pairs_share_a_scoped_key(t1: str, k1: str, t2: str, k2: str) -> None:
    if (t1, k1) != (t2, k2):
        assert scoped(t1, k1) != scoped(t2, k2)


@given(st.text(max_size=30).filter(lambda k: not k.startswith(PREFIX)))
def test_the_default_tenants_keys_are_what_they_were(key: str) -> None:
    assert scoped(DEFAULT_TENANT, key) == key


def _action(tenant: str | None, key: str | None = "order-1") -> Action:
    record = build_request("send_email", {"to": "john@example.com", "subject": "s"}, agent_id="a",
                           idempotency_key=key, **({"tenant": tenant} if tenant else {}))
    return Action.from_record(record, PolicyBook.load())


def test_every_dedup_scope_and_the_vendor_key_are_the_tenants_own() -> None:
    policy = PolicyBook.load().for_tool("send_email")
    a, b, plain = _action("acme"), _action("globex"), _action(None)
    assert len({dedup_key(a, policy), dedup_key(b, policy), dedup_key(plain, policy)}) == 3
    assert dedup_key(plain, policy) == "order-1"  # single tenant: unchanged
    unkeyed = [_action(t, None) for t in ("acme", "globex")]
    assert dedup_key(unkeyed[0], policy) != dedup_key(unkeyed[1], policy)  # content windows too
    assert scope_of(a, policy)[0] != scope_of(b, policy)[0]  # natural ids, windows, budgets
    vendor_keys = {request_key(build_request("t", {}, agent_id="x", idempotency_key="order-1", tenant=t))
                   for t in ("acme", "globex", DEFAULT_TENANT)}
    assert vendor_keys == {"tenant/acme/order-1", "tenant/globex/order-1", "order-1"}


@pytest.mark.parametrize("tenant", ["", "a/b", "two words", "x" * 129, "tab\there"])
def test_a_tenant_name_that_could_break_the_mapping_is_refused(tenant: str) -> None:
    record = build_request("send_email", {"to": "j@example.com"}, agent_id="a", tenant=tenant)
    if tenant == "":
        assert Action.from_record(record).tenant == DEFAULT_TENANT  # absent is the default
        return
    with pytest.raises(InvalidAction, match="tenant must be"):
        Action.from_record(record)


def test_a_request_written_before_tenants_reads_as_the_default_tenants() -> None:
    raw = schemas.load_raw("action_requested.v1.avsc", "history")
    parsed = fastavro.parse_schema(raw)
    fingerprint = struct.pack("<Q", crc64_avro(to_parsing_canonical_form(parsed).encode()))
    old = {k: v for k, v in build_request("send_email", {"to": "j@example.com"}, agent_id="a",
                                          idempotency_key="k").items() if k != "tenant"}
    buf = io.BytesIO()
    buf.write(MAGIC + fingerprint)
    fastavro.schemaless_writer(buf, parsed, old)
    _, record = Codec().decode(buf.getvalue(), expect="ActionRequested")
    assert record["tenant"] == DEFAULT_TENANT and Action.from_record(record).tenant == DEFAULT_TENANT
