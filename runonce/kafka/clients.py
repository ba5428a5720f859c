"""confluent-kafka client configs shared by the SDK, executors, CLI and tests."""

from __future__ import annotations

import contextlib
import logging
import time
from typing import Any, Callable, Iterator, Protocol

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer
from confluent_kafka.admin import AdminClient, ClusterMetadata

from runonce.errors import AccessDenied, BrokerUnavailable, HandshakeFailed, RunonceError
from runonce.kafka.access import KafkaTarget, as_access

#: librdkafka logs every refused connection; route its log through Python logging, quiet
#: by default (failures surface as exceptions and timeouts; -v shows them).
LIBRDKAFKA_LOG = logging.getLogger("runonce.librdkafka")
LIBRDKAFKA_LOG.addHandler(logging.NullHandler())  # no stderr fallback; root handlers still get it under -v


log = logging.getLogger("runonce.kafka")

#: handshake failures within ``HANDSHAKE_WINDOW_S`` that stop a client. A broker that is down
#: refuses the connection or resets it before any handshake, never mid-handshake; one failure
#: could be a broker dying during one, three in a row (librdkafka reconnects after 100 ms to
#: 1 s) are settings that do not fit the listener: measured against a plaintext listener,
#: SSL and SASL_SSL fail the handshake within 30 ms of each connect, SASL_PLAINTEXT at once.
HANDSHAKE_FAILURES_FATAL = 3
HANDSHAKE_WINDOW_S = 30.0
#: what librdkafka's error events say of a failed handshake (it reports a TLS client meeting a
#: plaintext listener as _TRANSPORT, "... in state SSL_HANDSHAKE"; a refused mechanism as
#: _AUTHENTICATION, "... in state AUTH_HANDSHAKE")
_HANDSHAKE_CODES = frozenset({KafkaError._SSL, KafkaError._AUTHENTICATION, KafkaError.SASL_AUTHENTICATION_FAILED})
_HANDSHAKE_WORDS = ("SSL handshake failed", "in state SSL_HANDSHAKE", "in state AUTH_")


def is_handshake_failure(err: KafkaError) -> bool:
    return err.code() in _HANDSHAKE_CODES or any(word in err.str() for word in _HANDSHAKE_WORDS)


class ConnectionWatch:
    """A client's ``error_cb``: librdkafka's error events, which it otherwise keeps to itself.

    Without it a client whose ``security.protocol`` does not fit the listener (TLS against a
    plaintext broker) looks like one whose broker is down: it retries in silence until a
    timeout (30 s for a submit, 180 s for a transactional init). A handshake failure is logged
    at once, and the third within ``HANDSHAKE_WINDOW_S`` raises ``HandshakeFailed`` out of the
    poll, consume or flush that served it. Any other error event goes to librdkafka's logger."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._failures: list[float] = []

    def __call__(self, err: KafkaError) -> None:
        if not is_handshake_failure(err):
            LIBRDKAFKA_LOG.info("%s: %s", err.name(), err.str())
            return
        now = self._clock()
        self._failures = [t for t in self._failures if now - t < HANDSHAKE_WINDOW_S] + [now]
        if len(self._failures) == 1:
            log.error("Kafka handshake failed (%s): %s", err.name(), err.str())
        if len(self._failures) >= HANDSHAKE_FAILURES_FATAL:
            if _CREDENTIALS_REFUSED in err.str():
                raise AccessDenied(f"the broker refused this principal's credentials (sasl.username and its "
                                   f"password); librdkafka: {err.str()}")
            raise HandshakeFailed(describe_handshake(err))


#: librdkafka's words for a SASL exchange the broker ended on the credentials themselves
_CREDENTIALS_REFUSED = "Authentication failed"


def describe_handshake(err: KafkaError) -> str:
    text = err.str()
    if "SSL" in text or err.code() == KafkaError._SSL:
        what = ("the TLS handshake with the broker failed: is the listener TLS? (security.protocol SSL or "
                "SASL_SSL needs a TLS listener; ssl.ca.location must hold its CA)")
    else:
        what = ("the SASL handshake with the broker failed: is the listener SASL, with this mechanism? "
                "(security.protocol, sasl.mechanism)")
    return f"{what}; librdkafka: {text}"


def metadata(client: AdminClient | Producer | Consumer, timeout_s: float, topic: str | None = None) -> ClusterMetadata:
    """``list_topics`` in slices of a second, serving the client's error events between them: a
    blocking metadata call serves none, so a handshake that cannot succeed would wait out the
    whole timeout and end as "Broker transport failure". Raises KafkaException on time-out.
    A consumer only before it is assigned: its poll would take a record."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            return client.list_topics(topic, timeout=max(0.1, min(1.0, deadline - time.monotonic())))
        except KafkaException:
            client.poll(0)  # ConnectionWatch raises HandshakeFailed here
            if time.monotonic() >= deadline:
                raise


def check_connects(target: KafkaTarget, timeout_s: float) -> None:
    """Connects with these settings and asks for the cluster's metadata, under the handshake
    watch: settings that do not fit the listener raise ``HandshakeFailed`` (or ``AccessDenied``)
    within seconds; a broker that does not answer within ``timeout_s`` raises
    ``BrokerUnavailable``. For a process whose own clients have no such watch (faust's aiokafka)."""
    admin = AdminClient(base_config(target))
    try:
        metadata(admin, timeout_s)
    except KafkaException as exc:
        raise translate(exc, f"Kafka at {as_access(target).bootstrap} did not answer within {timeout_s:.0f} s") from exc


def base_config(bootstrap: KafkaTarget) -> dict[str, Any]:
    return {**as_access(bootstrap).librdkafka(), "logger": LIBRDKAFKA_LOG, "error_cb": ConnectionWatch()}


def producer_config(bootstrap: KafkaTarget, **extra: Any) -> dict[str, Any]:
    return {
        **base_config(bootstrap),
        "enable.idempotence": True,
        "acks": "all",
        # Same partition for a key as Java, aiokafka and faust: the stream job relies on it.
        "partitioner": "murmur2_random",
        "linger.ms": 5,
        **extra,
    }


def producer(bootstrap: KafkaTarget, **extra: Any) -> Producer:
    return Producer(producer_config(bootstrap, **extra))


def transactional_consumer_config(bootstrap: KafkaTarget, group: str, *, session_timeout_ms: int | None,
                                  **extra: Any) -> dict[str, Any]:
    """The consumer of a process that commits its offsets in its transactions (stream workers,
    executors): read_committed, and the client never picks a position (a missing or
    out-of-range offset is an error the process sees, runonce/kafka/positions.py).
    ``session_timeout_ms`` None: the broker's (KIP-848)."""
    session = {} if session_timeout_ms is None else {
        "session.timeout.ms": session_timeout_ms, "heartbeat.interval.ms": 1000}
    return {
        **base_config(bootstrap), "group.id": group, "enable.auto.commit": False,
        "auto.offset.reset": "error", "isolation.level": "read_committed",
        **session, **extra,
    }


def batched_fetch(wait_ms: int) -> dict[str, Any]:
    """Fetches the broker holds up to ``wait_ms`` for more records (0: librdkafka's default, an
    answer as soon as one record is there). A consumer of records produced one at a time
    otherwise sends a fetch per record: at 2,000 records/s that cost this machine's broker
    0.33-0.81 of a core on top of the 0.37 that taking the records cost (bench/fetch_cost.py).
    The wait is added to a record's latency only when the fetch was already waiting when it
    arrived; an idle consumer pays a fetch per wait (0.10-0.16 of a core here)."""
    if wait_ms == 0:
        return {}
    return {"fetch.wait.max.ms": wait_ms, "fetch.min.bytes": 1024 * 1024}


#: a reader that reads to the end and stops: the broker answers a fetch at once when it has
#: nothing more, so each partition's end is known in one round trip instead of after the
#: default 500 ms wait (twice: 1 s per read of an idle topic, measured). A reader that tails
#: keeps the default, which spares the broker a request every few ms while it is idle.
TO_END = {"fetch.wait.max.ms": 10}


def reader(bootstrap: KafkaTarget, group: str | None = None, *, to_end: bool = False, **extra: Any) -> Consumer:
    """A read_committed consumer; without a group it is for assign()-style reads that commit
    nothing. ``to_end``: it reads to each partition's end and stops (``TO_END``)."""
    return Consumer({
        **base_config(bootstrap),
        "group.id": group or "runonce-reader",
        "enable.auto.commit": False,
        "auto.offset.reset": "earliest",
        "isolation.level": "read_committed",
        "enable.partition.eof": True,
        **(TO_END if to_end else {}),
        **extra,
    })


class Closes(Protocol):
    def close(self) -> None: ...


@contextlib.contextmanager
def closed_if_raised(*consumers: Closes) -> Iterator[None]:
    """Close these consumers if the block raises (a process whose commit path could not start).

    A consumer left to the garbage collector closes itself in its deallocator, which serves
    its queued callbacks (``stats_cb`` every few seconds, ``error_cb``) into an interpreter that
    may be shutting down: a SIGSEGV instead of the exit code that names the error
    (confluent-kafka-python #265, #358; seen once as an executor's -11 after it had named a
    failed TLS handshake)."""
    try:
        yield
    except BaseException:
        for consumer in consumers:
            with contextlib.suppress(Exception):  # the error that brought us here is the one to tell
                consumer.close()
        raise


def written_view(bootstrap: KafkaTarget, group: str) -> Consumer:
    """A read_uncommitted consumer only asked where records are (ends, offsets by time), never
    read from: its answers count the records of transactions still open, where a
    read_committed consumer's stop at the first of them (and find nothing by time beyond it)."""
    return Consumer({**base_config(bootstrap), "group.id": group, "enable.auto.commit": False,
                     "isolation.level": "read_uncommitted"})


#: broker answers that mean "not this principal": never retried
AUTH_ERRORS = frozenset({
    KafkaError.TOPIC_AUTHORIZATION_FAILED, KafkaError.GROUP_AUTHORIZATION_FAILED,
    KafkaError.CLUSTER_AUTHORIZATION_FAILED, KafkaError.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
    KafkaError.SASL_AUTHENTICATION_FAILED, KafkaError._AUTHENTICATION,
})


def translate(failure: KafkaException | KafkaError, what: str) -> RunonceError:
    """The runonce error for a confluent-kafka failure (an exception, or the error a record or
    metadata entry carries): refused principal, else unavailable."""
    err = failure if isinstance(failure, KafkaError) else (
        failure.args[0] if failure.args and isinstance(failure.args[0], KafkaError) else None)
    if err is not None and err.code() in AUTH_ERRORS:
        return AccessDenied(f"{what}: {err.str()} ({err.name()})")
    return BrokerUnavailable(f"{what}: {failure}")
