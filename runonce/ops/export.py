"""``runonce export``: a topic's records for a time range, as Parquet (for DuckDB, pandas,
Spark) or JSON lines, with the same filters as ``runonce tail`` and progress on stderr.

One flat row per record (the ``tail --json`` view with its nested parts flattened), one
column schema per topic, so files from different ranges concatenate. Rows that could not be
decoded keep their place and say why (``kind = unreadable``, ``error``): nothing is skipped."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any, Callable, Iterator

from runonce.errors import ConfigError
from runonce.kafka.access import KafkaTarget
from runonce.kafka.reader import read_all
from runonce.ops.tail import TOPIC_BY_NAME, Filter, view
from runonce.wire.codec import Codec

_COMMON = [("topic", "string"), ("partition", "int32"), ("offset", "int64"), ("broker_time", "timestamp"),
           ("kind", "string"), ("error", "string")]
#: the columns of each topic's rows, after the common ones
COLUMNS: dict[str, list[tuple[str, str]]] = {
    "decision": [("decision", "string"), ("reason", "string"), ("tool", "string"), ("agent", "string"),
                 ("tenant", "string"),
                 ("action_id", "string"), ("idempotency_key", "string"), ("key", "string"), ("matched", "string"),
                 ("window_ms", "int64"), ("unkeyed", "bool"), ("repeats_action_id", "string"),
                 ("repeats_partition", "int32"), ("repeats_offset", "int64"), ("hold_why", "string"),
                 ("hold_expires_at_ms", "int64"), ("verdict_by", "string")],
    "verdict": [("action_id", "string"), ("verdict_id", "string"), ("verdict", "string"), ("approver", "string"),
                ("change", "string"), ("status", "string"), ("decided_by", "string"), ("note", "string"),
                ("reason", "string")],
    "result": [("status", "string"), ("tool", "string"), ("action_id", "string"), ("idempotency_key", "string"),
               ("vendor_ref", "string"), ("attempts", "int32")],
    "dead_letter": [("error_type", "string"), ("origin_topic", "string"), ("origin_partition", "int32"),
                    ("origin_offset", "int64")],
    "request": [("tool", "string"), ("agent", "string"), ("tenant", "string"), ("action_id", "string"),
                ("idempotency_key", "string"),
                ("natural_id", "string"), ("params", "string")],
}
KIND_OF_TOPIC = {"dropped": "decision", "approved": "decision", "results": "result", "dlq": "dead_letter",
                 "requested": "request", "held": "decision", "verdicts": "verdict"}
BATCH_ROWS = 50_000


def row(v: dict[str, Any], timestamp_ms: int) -> dict[str, Any]:
    """A ``tail`` view flattened into one row (broker time as epoch milliseconds)."""
    out = {k: val for k, val in v.items() if not isinstance(val, dict)}
    out["broker_time"] = timestamp_ms
    for prefix in ("repeats", "origin"):
        for k, val in (v.get(prefix) or {}).items():
            out[f"{prefix}_{k}"] = val
    if "params" in v:
        out["params"] = json.dumps(v["params"], sort_keys=True)
    return out


def rows(target: KafkaTarget, which: str, *, keep: Filter = Filter(), since_ms: int | None = None,
         until_ms: int | None = None, topic: str | None = None) -> Iterator[dict[str, Any]]:
    codec = Codec()
    for record in read_all(target, topic or TOPIC_BY_NAME[which], since_ms=since_ms, until_ms=until_ms):
        v = view(codec, record, dead_letters=which == "dlq")
        if keep.keeps(v):
            yield row(v, record.timestamp_ms)


def export(target: KafkaTarget, which: str, path: Path, *, fmt: str | None = None, keep: Filter = Filter(),
           since_ms: int | None = None, until_ms: int | None = None, topic: str | None = None,
           progress: Callable[[str], None] = lambda _msg: None, every_s: float = 2.0) -> int:
    """Write the records to ``path`` (Parquet or JSON lines, by ``fmt`` or the file's suffix);
    returns how many. ``topic`` reads another topic holding records of that kind (a mirror)."""
    fmt = fmt or ("parquet" if path.suffix == ".parquet" else "jsonl")
    if fmt not in ("parquet", "jsonl"):
        raise ConfigError(f"export format must be parquet or jsonl, got {fmt!r}")
    started = said = time.monotonic()
    count = 0

    def counted(source: Iterator[dict[str, Any]]) -> Iterator[dict[str, Any]]:
        nonlocal count, said
        for r in source:
            count += 1
            if time.monotonic() - said >= every_s:
                progress(f"exported {count} records ({count / (time.monotonic() - started):.0f}/s)")
                said = time.monotonic()
            yield r

    source = counted(rows(target, which, keep=keep, since_ms=since_ms, until_ms=until_ms, topic=topic))
    if fmt == "parquet":
        _write_parquet(source, path, KIND_OF_TOPIC[which])
    else:
        with path.open("w", encoding="utf-8") as f:
            for r in source:
                f.write(json.dumps(r) + "\n")
    progress(f"exported {count} records to {path} in {time.monotonic() - started:.1f} s")
    return count


def _write_parquet(source: Iterator[dict[str, Any]], path: Path, kind: str) -> None:
    try:
        import pyarrow as pa
        import pyarrow.parquet as pq
    except ImportError as exc:
        raise ConfigError(f"Parquet export needs pyarrow: pip install 'runonce[export]' ({exc})") from exc
    types = {"string": pa.string(), "int32": pa.int32(), "int64": pa.int64(), "bool": pa.bool_(),
             "timestamp": pa.timestamp("ms", tz="UTC")}
    schema = pa.schema([(name, types[t]) for name, t in _COMMON + COLUMNS[kind]])
    with pq.ParquetWriter(str(path), schema, compression="zstd") as writer:
        batch: list[dict[str, Any]] = []
        for r in source:
            batch.append(r)
            if len(batch) >= BATCH_ROWS:
                writer.write_table(pa.Table.from_pylist(batch, schema=schema))
                batch = []
        writer.write_table(pa.Table.from_pylist(batch, schema=schema))
