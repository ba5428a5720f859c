"""The one exception tree of runonce.

A duplicate action is *not* an exception: it is a ``Decision`` with a drop reason.
Exceptions mean broken input or a broken invariant, and they are split by what the
caller should do about them::

    RunonceError                      root: catch this to catch everything of ours
    ├── RetryableError                transient; the same call may succeed later
    │   ├── BrokerUnavailable         Kafka could not be reached in time
    │   └── ResultTimeout             no outcome yet; awaiting again (or resubmitting) is safe
    ├── InvalidInput                  dead-letter the record; never retry it
    │   ├── DecodeError               bytes are not an action (not Avro, bad header)
    │   │   └── UnknownSchema         single-object header names a fingerprint we lack
    │   ├── InvalidAction             decodes, but breaks a rule (empty tool, bad params)
    │   ├── Unprocessable             deciding it raised something unforeseen (its type named):
    │   │                             that record's dead letter, never the worker's crash
    │   └── NotHeld                   a verdict names an action that was never held
    └── FatalError                    stop the process; a human must look
        ├── ConfigError               settings or policy file are wrong (names the field)
        ├── BrokerSetupError          Java/Maven missing, jars unresolvable, broker won't start
        ├── ObserveSetupError         Prometheus could not be fetched (Debian's package) or started
        ├── AccessDenied              the broker refused this principal (authentication or ACL)
        ├── HandshakeFailed           TLS or SASL settings that do not fit the broker's listener
        ├── ConsumerStuck             a consumer stopped fetching after a failover; a restart clears it
        ├── ProducerStuck             faust's producer buffer stopped draining; a restart clears it
        └── InvariantViolation        state contradicts itself; continuing could double an action

Foreign exceptions (confluent_kafka.KafkaException, fastavro errors, OSError from
subprocesses) are translated at the module that talks to them, ``raise ... from exc``.
"""

from __future__ import annotations


class RunonceError(Exception):
    """Root of every error runonce raises on purpose."""


class RetryableError(RunonceError):
    """Transient: back off and try the same thing again."""


class BrokerUnavailable(RetryableError):
    """The Kafka bootstrap address did not answer within the timeout."""


class ResultTimeout(RetryableError, TimeoutError):
    """An action was submitted but its outcome did not arrive in time. It is recorded: waiting
    again, or submitting the same call again, never performs it twice. (Also a TimeoutError.)"""


class InvalidInput(RunonceError):
    """The record is bad; send it to the dead-letter topic with this message."""

    #: short machine-readable reason, written to the DLQ ``error.type`` header
    kind: str = "invalid_input"


class DecodeError(InvalidInput):
    kind = "decode_error"


class UnknownSchema(DecodeError):
    kind = "unknown_schema"


class InvalidAction(InvalidInput):
    kind = "invalid_action"


class Unprocessable(InvalidInput):
    kind = "unprocessable"


class NotHeld(InvalidInput):
    """An approver's verdict names an action runonce never held (a typo, or one not yet decided)."""

    kind = "not_held"


class FatalError(RunonceError):
    """Stop: continuing could lose or double an action."""


class ConfigError(FatalError):
    """Settings or the policy file are wrong; the message names the field."""


class BrokerSetupError(FatalError):
    """The local broker could not be fetched, formatted or started."""


class ObserveSetupError(FatalError):
    """Prometheus could not be fetched from Debian's packages, or did not start."""


class AccessDenied(FatalError):
    """The broker refused this component's principal: wrong credentials, or an ACL it lacks.
    Retrying cannot help; fix RUNONCE_SASL_* or the ACL file (``runonce acl apply``)."""


class HandshakeFailed(FatalError):
    """The broker's listener and this client's security settings do not fit: a TLS handshake
    with a plaintext listener (or an untrusted certificate), a SASL mechanism it does not offer.
    Retrying cannot help; fix ``security.protocol`` and its TLS/SASL keys (RUNONCE_KAFKA_CONFIG)."""


class InvariantViolation(FatalError):
    """State contradicts itself."""


class ConsumerStuck(FatalError):
    """A consumer has records to read and a fetch position that does not move (a client that lost
    a partition's fetcher when its leader moved): exit, and let the supervisor restart the process."""


class ProducerStuck(FatalError):
    """faust's producer buffer handed on no record for too long while records waited: its offsets
    must not be committed, so the worker exits and its restart resumes from the last commit."""
