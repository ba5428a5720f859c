"""What a connector is made of: the one room a plugin imports (docs/connectors.md), and every
name it needs, from here. It imports nothing of the executor or the vendors."""

from runonce.connectors.toolkit.base import (
    ActionCall,
    Capability,
    CommitHook,
    Connector,
    Probe,
    Pruner,
    StateCheck,
    VendorResponse,
)
from runonce.connectors.toolkit.config import VendorFields
from runonce.connectors.toolkit.errors import (
    ConnectorError,
    OutcomeUnknown,
    PermanentVendorError,
    RateLimited,
    TransientVendorError,
)
from runonce.connectors.toolkit.fields import Field, FieldType, Spec
from runonce.connectors.toolkit.kind import Kind
from runonce.connectors.toolkit.secrets import Secret
from runonce.connectors.toolkit.transport import HttpResult, SmtpSessions, VendorHttp, raise_for_status, smtp_send

__all__ = [
    "ActionCall", "Capability", "CommitHook", "Connector", "ConnectorError", "Field", "FieldType", "HttpResult",
    "Kind", "OutcomeUnknown", "PermanentVendorError", "Probe", "Pruner", "RateLimited", "Secret", "SmtpSessions", "Spec",
    "StateCheck", "TransientVendorError", "VendorFields", "VendorHttp", "VendorResponse", "raise_for_status",
    "smtp_send",
]
