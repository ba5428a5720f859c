"""docs/vendors.md's field table of each shipped kind is its declaration (connectors/toolkit/
fields.py), as ``runonce connectors fields`` prints it: a field added, renamed or given another
default in the code and not in the docs fails here.

Catches: a kind's spec that drifts from its page (run: jira's ``search_lag_s`` default 10 -> 5
in its spec alone fails the jira case); a kind shipped with no table; a factory reading a
field its spec does not declare (the getter refuses it: the last test; every shipped kind is
built from the sandbox's connectors file in tests/connectors, so such a read fails there)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from runonce.connectors.executor import registry
from runonce.connectors.toolkit.config import VendorFields
from runonce.connectors.toolkit.fields import FieldType, Spec
from runonce.errors import ConfigError

DOC = Path(__file__).parents[2] / "docs" / "vendors.md"


def tables() -> dict[str, str]:
    return {m[1]: m[2].strip() for m in re.finditer(r"<!-- fields:([a-z-]+) -->\n(.*?)<!-- /fields -->",
                                                    DOC.read_text(), flags=re.S)}


@pytest.mark.parametrize("kind", sorted(registry.SHIPPED))
def test_the_page_shows_each_kinds_declared_fields(kind: str) -> None:
    written = tables()
    assert kind in written, f"docs/vendors.md has no field table for {kind}: add `runonce connectors fields --kind {kind}`"
    assert written[kind] == registry.SHIPPED[kind].spec.markdown(), (
        f"docs/vendors.md's {kind} table differs from its declaration; it should read:\n"
        f"{registry.SHIPPED[kind].spec.markdown()}")


def test_the_page_shows_no_kind_that_is_not_shipped() -> None:
    assert set(tables()) == set(registry.SHIPPED)


def test_a_factory_may_read_only_what_its_kind_declares() -> None:
    spec = Spec("tiny", ())
    fields = VendorFields("f.toml", "v", {"kind": "tiny", "base_url": "https://x"}, {})
    with pytest.raises(ConfigError, match="base_url: unknown field for kind 'tiny'"):
        fields.declare(spec)
    fields = VendorFields("f.toml", "v", {"kind": "tiny"}, {})
    fields.declare(spec)
    with pytest.raises(ConfigError, match="reads 'base_url' as https URL, which its field spec does not declare"):
        fields.url("base_url")
    assert FieldType.URL.value == "https URL"
