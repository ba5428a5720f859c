"""`runonce demo`'s figures, read from the sandbox ledgers: every incident cut to one side
effect (the restart loop to its budget of 5), against the real broker and stream worker.
The demo runs the default runtime, so this does too; faust's decisions over the same
incidents are the stream-job, crash and poison tests' work."""

from __future__ import annotations

import pytest

from runonce.ops.demo import format_table, run_demo
from runonce.settings import Settings

from tests.support.worker import WorkerProcess

pytestmark = [pytest.mark.broker, pytest.mark.slow,
              pytest.mark.parametrize("stream_worker", ["transactional"], indirect=True, scope="module")]


def test_the_demo_table(broker: Settings, stream_worker: WorkerProcess) -> None:
    rows = run_demo(broker, progress=lambda _m: None)
    table = format_table(rows)
    by_name = {r.incident.name: r for r in rows}
    for row in rows:
        assert row.without == len(row.incident.requests), table  # every straight call was a side effect
        assert row.with_runonce == row.incident.expected_approved, table
    seed_rows = [r for r in rows if "footnote" not in r.incident.tags]
    assert len(seed_rows) == 7
    assert all(r.with_runonce == 1 for r in seed_rows if r.incident.name != "restart_loop"), table
    assert by_name["restart_loop"].with_runonce == 5
    assert by_name["restart_loop"].reasons["budget_exhausted"] == 42
    assert "18 Slack reposts of one alert, without a key" in table
