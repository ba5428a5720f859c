"""The connectors' exception tree, split by what the executor does about it::

    ConnectorError                 root
    ├── TransientVendorError       retry with the same vendor key (5xx, 409 in flight, refused connection)
    ├── PermanentVendorError       record as failed, never retry (4xx)
    └── OutcomeUnknown             the request may have had its effect (timeout, dropped response):
                                   reconcile (same key / state check) or mark in_doubt, never "failed"

The only place HTTP/SMTP library exceptions are translated into these is ``connectors/transport.py``.
"""

from __future__ import annotations

from runonce.errors import RunonceError


class ConnectorError(RunonceError):
    pass


class TransientVendorError(ConnectorError):
    pass


class PermanentVendorError(ConnectorError):
    pass


class OutcomeUnknown(ConnectorError):
    pass
