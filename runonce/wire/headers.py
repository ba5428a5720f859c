"""Header names on runonce's records, and the dead letter's headers.

A dead letter (``actions.dlq``) carries what went wrong and where the record came from, so
someone can find the original and fix it. A stage-1 hand-off (re-key, scoped) carries the
request's origin, so stage 2 decides on the request's own partition, offset and event time.
A budget drop carries an alert, for whoever pages on it."""

from __future__ import annotations

from runonce.errors import InvalidInput

H_ERROR_TYPE = "runonce.error.type"
H_ERROR_MESSAGE = "runonce.error.message"
H_ORIGIN_TOPIC = "runonce.origin.topic"
H_ORIGIN_PARTITION = "runonce.origin.partition"
H_ORIGIN_OFFSET = "runonce.origin.offset"
H_ORIGIN_TIMESTAMP = "runonce.origin.timestamp_ms"
H_ALERT = "runonce.alert"
#: on each decision: the digest of the policies that decided it (core/policy.py ``PolicyBook.digest``)
H_POLICIES = "runonce.policies"

#: a dead letter's message is cut here: it explains, it does not carry the payload
MAX_ERROR_MESSAGE_CHARS = 4000


def dead_letter_headers(error: InvalidInput, topic: str, partition: int, offset: int,
                        timestamp_ms: int) -> list[tuple[str, bytes]]:
    return [
        (H_ERROR_TYPE, error.kind.encode()),
        (H_ERROR_MESSAGE, str(error)[:MAX_ERROR_MESSAGE_CHARS].encode("utf-8", "replace")),
        (H_ORIGIN_TOPIC, topic.encode()),
        (H_ORIGIN_PARTITION, str(partition).encode()),
        (H_ORIGIN_OFFSET, str(offset).encode()),
        (H_ORIGIN_TIMESTAMP, str(timestamp_ms).encode()),
    ]
#: on actions.receipts: ``receipt`` or ``checkpoint`` (runonce/receipts)
H_RECEIPT_TYPE = "runonce.receipt.type"
#: on an executor's final result, with receipts on: its receipt's proof (runonce.receipts.verify.Proof as a
#: JSON line): the agent's own copy, verified with the public keys alone (`runonce audit verify`)
H_RECEIPT = "runonce.receipt"
