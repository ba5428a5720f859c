"""The connectors' exception tree, split by what the executor does about it::

    ConnectorError                 root
    ├── TransientVendorError       not performed: retry with the same vendor key (503, 409 in
    │   │                          flight, refused connection, SMTP 4xx)
    │   └── RateLimited            not performed, the vendor's limit (429, or 503 with Retry-After):
    │                              every call to that vendor waits (connectors/executor/throttle.py), then retries
    ├── PermanentVendorError       not performed: record as failed, never retry (other 4xx, SMTP 5xx)
    └── OutcomeUnknown             the request may have had its effect (500/502/504, timeout, dropped
                                   response, SMTP connection lost): reconcile (same key / state
                                   check) or mark in_doubt, never "failed", never a blind retry

The only place HTTP/SMTP library exceptions are translated into these is ``connectors/toolkit/transport.py``.
"""

from __future__ import annotations

from runonce.errors import RunonceError


class ConnectorError(RunonceError):
    pass


class TransientVendorError(ConnectorError):
    pass


class RateLimited(TransientVendorError):
    """The vendor refused the call for its rate limit; ``retry_after_s`` is what it asked for
    (None when it did not say)."""

    def __init__(self, message: str, retry_after_s: float | None = None) -> None:
        super().__init__(message)
        self.retry_after_s = retry_after_s


class PermanentVendorError(ConnectorError):
    pass


class OutcomeUnknown(ConnectorError):
    pass
