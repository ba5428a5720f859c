"""A factory reads only the fields its kind declares (the page's tables are written from the
same declarations: tests/unit/test_generated.py).

Catches a factory reading a field its spec does not declare (the getter refuses it; every
shipped kind is built from the sandbox's connectors file in tests/connectors, so such a read
fails there)."""

from __future__ import annotations

import pytest

from runonce.connectors.toolkit.config import VendorFields
from runonce.connectors.toolkit.fields import FieldType, Spec
from runonce.errors import ConfigError


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
