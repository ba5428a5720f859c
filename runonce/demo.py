"""``runonce demo``: the seed's incidents replayed through runonce, counted from the topics.

Each incident's requests are published as the agents sent them; the table shows how many
actions runonce approved and why it dropped the rest.
"""

from __future__ import annotations

import sys
import time
from collections import Counter
from typing import Callable

from runonce.scenarios import Incident, incidents
from runonce.submit import Submitter
from runonce.watch import DecisionWatcher


def run_decisions_demo(bootstrap: str, progress: Callable[[str], None] = lambda m: print(m, file=sys.stderr)) -> str:
    rows = []
    items = incidents()
    with DecisionWatcher(bootstrap) as watcher, Submitter(bootstrap, agent_id="demo") as sub:
        for incident in items:
            started = time.monotonic()
            ids = [sub.submit(r.tool, r.params, idempotency_key=r.idempotency_key) for r in incident.requests]
            sub.flush()
            decisions = watcher.wait(ids, timeout_s=120)
            reasons = Counter(d["reason"] if d["outcome"] == "DROPPED" else f"approved as {d['reason']}"
                              for d in decisions.values() if d["outcome"] == "DROPPED" or d["reason"] != "unique")
            approved = sum(1 for d in decisions.values() if d["outcome"] == "APPROVED")
            progress(f"  {incident.name}: {len(ids)} requests decided in {time.monotonic() - started:.1f} s")
            rows.append((incident, len(ids), approved, reasons))
    return format_table(rows)


def format_table(rows: list[tuple[Incident, int, int, Counter[str]]]) -> str:
    out = [f"{'incident':<58}{'sent':>6}{'approved':>10}  dropped (reason) / flagged", "-" * 100]
    for incident, sent, approved, reasons in rows:
        dropped = ", ".join(f"{n} {r}" for r, n in reasons.most_common()) or "-"
        out.append(f"{incident.story:<58}{sent:>6}{approved:>10}  {dropped}")
        if approved != incident.expected_approved:
            out.append(f"  !! expected {incident.expected_approved} approved")
    return "\n".join(out)
