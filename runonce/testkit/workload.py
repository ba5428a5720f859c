"""A reproducible mixed workload with planted repeats, for the crash test and benchmarks.

Actions come in *families*: an original and its planted repeats. Each family is produced
in order by one agent, and the oracle checks per family: exactly one approved, every
other member dropped with the planted reason. (Which member wins is fixed for same-key
families; for content and natural-id families the first to reach stage 2 wins.)
"""

from __future__ import annotations

import heapq
import random
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

from runonce.core.decision import Outcome, Reason
from runonce.sdk.submit import build_request


@dataclass
class Family:
    kind: str
    #: (request record, planted reason) in production order; the first is planted Reason.UNIQUE.value
    members: list[tuple[dict[str, Any], str]] = field(default_factory=list)
    #: the repeats are produced this long after the original (a retry after a timeout), so
    #: the original's claim must survive whatever happens to the stream job in between
    retry_after_s: float = 0.0


KINDS = ("key_retry", "key_reuse", "natural_id_repeat", "content_repeat")


#: what a family without repeats is; weight a kind by naming it more than once
UNIQUE_KINDS = ("unique_email", "unique_update", "unique_charge")


def generate(n_actions: int, repeat_ratio: float = 0.15, seed: int = 7, run_id: str = "w",
             unique_kinds: Sequence[str] = UNIQUE_KINDS) -> list[Family]:
    rnd = random.Random(seed)
    # repeats / actions = p * 1.25 / (1 + p * 1.25), with 1.25 repeats per repeating family on average
    p_repeating = repeat_ratio / (1 - repeat_ratio) / 1.25
    families: list[Family] = []
    total = 0
    i = 0
    while total < n_actions:
        i += 1
        repeats = 0
        if rnd.random() < p_repeating:
            repeats = rnd.choice((1, 1, 1, 2))
        kind = rnd.choice(KINDS) if repeats else rnd.choice(unique_kinds)
        fam = Family(kind)
        key = f"{run_id}-k{i}"
        if kind in ("key_retry", "unique_update"):
            params: dict[str, Any] = {"record_id": f"{run_id}-{i}", "field": "stage", "value": "won"}
            fam.members.append((build_request("update_salesforce_field", params, agent_id="gen", idempotency_key=key), Reason.UNIQUE.value))
            for _ in range(repeats):
                fam.members.append((build_request("update_salesforce_field", params, agent_id="gen",
                                                  idempotency_key=key), Reason.DUPLICATE_KEY.value))
        elif kind == "key_reuse":
            params = {"card": f"{run_id}-card{i}", "amount_cents": 1000 + i}
            fam.members.append((build_request("charge_payment", params, agent_id="gen", idempotency_key=key), Reason.UNIQUE.value))
            for r in range(repeats):
                fam.members.append((build_request("charge_payment", {**params, "amount_cents": 1 + r}, agent_id="gen",
                                                  idempotency_key=key), Reason.KEY_PAYLOAD_MISMATCH.value))
        elif kind == "unique_charge":
            params = {"card": f"{run_id}-card{i}", "amount_cents": 500}
            fam.members.append((build_request("charge_payment", params, agent_id="gen", idempotency_key=key), Reason.UNIQUE.value))
        elif kind == "natural_id_repeat":
            params = {"project": "SUP", "customer_id": f"{run_id}-c{i}", "description": f"issue {i}"}
            for r in range(repeats + 1):
                fam.members.append((build_request("create_jira_ticket", {**params, "attempt": r}, agent_id="gen",
                                                  idempotency_key=f"{key}-{r}"), Reason.NATURAL_ID_TAKEN.value if r else Reason.UNIQUE.value))
        else:  # content_repeat, unique_email
            params = {"to": f"{run_id}-{i}@example.com", "subject": "hi", "body": f"message {i}"}
            for r in range(repeats + 1):
                fam.members.append((build_request("send_email", params, agent_id="gen", idempotency_key=f"{key}-{r}"),
                                    Reason.CONTENT_WINDOW.value if r else Reason.UNIQUE.value))
        families.append(fam)
        total += len(fam.members)
    return families


def late_unkeyed_retries(n_families: int, seed: int = 13, run_id: str = "w", delay_s: tuple[float, float] = (2.0, 30.0)
                         ) -> list[Family]:
    """Unkeyed retries of an action without scope rules, arriving seconds later: the stream job
    keys them by content (``key = "derive"``) and only stage 1's claim on that content key
    stops them. A claim lost after a crash approves the retry: the family shows two approvals."""
    rnd = random.Random(seed)
    families = []
    for i in range(n_families):
        params = {"record_id": f"{run_id}-late{i}", "field": "owner", "value": f"agent-{i}"}
        fam = Family("late_unkeyed_retry", retry_after_s=rnd.uniform(*delay_s))
        fam.members.append((build_request("update_salesforce_field", params, agent_id="gen"), Reason.UNIQUE.value))
        for _ in range(rnd.choice((1, 1, 2))):
            fam.members.append((build_request("update_salesforce_field", params, agent_id="gen"), Reason.DUPLICATE_KEY.value))
        families.append(fam)
    return families


def in_order(families: Sequence[Family]) -> list[tuple[dict[str, Any], float]]:
    """(record, delay_s) in production order; a repeat of a late family carries its delay."""
    return [(m, fam.retry_after_s if i else 0.0) for fam in families for i, (m, _) in enumerate(fam.members)]


def send_paced(send: Callable[[dict[str, Any]], None], items: Sequence[tuple[dict[str, Any], float]],
               rate_per_s: float) -> None:
    """Send records in order at the rate; one with a delay goes that long after the record
    before it (the rest do not wait for it)."""
    started = time.monotonic()
    later: list[tuple[float, int, dict[str, Any]]] = []
    for i, (record, delay_s) in enumerate(items):
        while later and later[0][0] <= time.monotonic():
            send(heapq.heappop(later)[2])
        if delay_s:
            heapq.heappush(later, (time.monotonic() + delay_s, i, record))
        else:
            send(record)
        ahead = i / rate_per_s - (time.monotonic() - started)
        if ahead > 0:
            time.sleep(ahead)
    while later:
        time.sleep(max(0.0, later[0][0] - time.monotonic()))
        send(heapq.heappop(later)[2])


def check_families(families: list[Family], outcome_by_action: dict[str, tuple[str, str]]) -> list[str]:
    """Problems found: a family without exactly one approval, or a drop with an unplanted reason."""
    problems = []
    for fam in families:
        found = [outcome_by_action.get(rec["action_id"], ("MISSING", "missing")) for rec, _ in fam.members]
        approved = [f for f in found if f[0] == Outcome.APPROVE.value]
        if len(approved) != 1:
            problems.append(f"{fam.kind}: {len(approved)} approved of {len(found)}: {found}")
            continue
        planted = sorted(reason for _, reason in fam.members[1:])
        dropped = sorted(reason for outcome, reason in found if outcome == Outcome.DROP.value)
        if planted != dropped:
            problems.append(f"{fam.kind}: planted {planted}, found {dropped}")
    return problems
