"""Read a time range's decisions, results and dead letters (through the broker's time index)
and write the report page."""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any, Callable, Iterator

from runonce.kafka.access import KafkaTarget
from runonce.ops.export import rows
from runonce.ops.report.page import render
from runonce.ops.report.summary import Summary, summarize


def build(target: KafkaTarget, since_ms: int, until_ms: int) -> Summary:
    def read(which: str) -> Iterator[dict[str, Any]]:
        return rows(target, which, since_ms=since_ms, until_ms=until_ms)

    return summarize(itertools.chain(read("dropped"), read("approved"), read("held")), read("results"),
                     read("dlq"), since_ms, until_ms)


def write_report(target: KafkaTarget, path: Path, since_ms: int, until_ms: int, source: str,
                 progress: Callable[[str], None] = lambda _m: None) -> Summary:
    progress("reading decisions, results and dead letters ...")
    summary = build(target, since_ms, until_ms)
    path.write_text(render(summary, source), encoding="utf-8")
    progress(f"{summary.decided:,} decisions ({summary.dropped:,} dropped), {len(summary.in_doubt)} in doubt, "
             f"{sum(summary.dead_letters_by_type.values())} dead letters: {path}")
    return summary
