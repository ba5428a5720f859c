"""A kind: its fields, declared (fields.py), and the factory that builds its connector from a
vendor's table. The connectors file names it by ``kind``; a plugin registers one as an entry
point of the group ``runonce.connectors`` (a bare factory still loads: its fields are then
checked only after it read them)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from runonce.connectors.toolkit.base import Connector
from runonce.connectors.toolkit.config import VendorFields
from runonce.connectors.toolkit.fields import Spec


@dataclass(frozen=True, slots=True)
class Kind:
    spec: Spec
    build: Callable[[VendorFields], Connector]

    def __call__(self, fields: VendorFields) -> Connector:
        fields.declare(self.spec)
        return self.build(fields)
