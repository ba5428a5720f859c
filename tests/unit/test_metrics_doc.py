"""docs/operating.md's metrics table is the list of every metric runonce serves: each metric the
worker's, the executor's and the gateway's registries hold has its row, with its exposed name
(a counter's ``_total``), type and labels, and the table has no row for a metric that is gone."""

from __future__ import annotations

from pathlib import Path

from prometheus_client import CollectorRegistry

from runonce.connectors.executor.metrics import ExecutorMetrics
from runonce.gateway.metrics import GatewayMetrics
from runonce.streams.metrics import StreamMetrics

OPERATING = Path(__file__).parents[2] / "docs" / "operating.md"

Row = tuple[str, str, tuple[str, ...]]


def served(registry: CollectorRegistry) -> set[Row]:
    """(exposed name, type, labels) of each metric on ``registry``."""
    rows = set()
    # prometheus_client keeps a registry's collectors (the metric objects) here; describe() gives
    # names and types but not label names
    for metric in registry._collector_to_names:  # noqa: SLF001  # no public way to the label names
        for family in metric.describe():
            name = f"{family.name}_total" if family.type == "counter" else family.name
            rows.add((name, family.type, tuple(metric._labelnames)))  # noqa: SLF001
    return rows


def documented() -> set[Row]:
    """The rows of the table whose header starts ``| metric | type | labels |``."""
    lines = OPERATING.read_text().splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("| metric | type | labels |"))
    rows = set()
    for line in lines[start + 2:]:
        if not line.startswith("|"):
            break
        name, kind, labels = (cell.strip() for cell in line.strip("|").split("|")[:3])
        rows.add((name.strip("`"), kind, tuple(label.strip() for label in labels.split(",") if label.strip())))
    return rows


def test_the_operating_guide_lists_every_metric_with_its_type_and_labels() -> None:
    code = served(StreamMetrics().registry) | served(ExecutorMetrics().registry) | served(GatewayMetrics().registry)
    docs = documented()
    assert len(code) >= 20, f"the registries were not read: {sorted(code)}"
    assert not code - docs, f"served but not in docs/operating.md's table (or with other labels): {sorted(code - docs)}"
    assert not docs - code, f"in docs/operating.md's table but not served (or with other labels): {sorted(docs - code)}"
