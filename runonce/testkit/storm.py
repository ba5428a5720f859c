"""What a storm counts at its end (scripts/pods.py on podman, scripts/cluster.py on the real
Kubernetes): the oracle on every record, each approved action's final result, the vendors'
ledgers on every effect; one judgement, so both storms pass and fail on the same terms."""

from __future__ import annotations

import threading
import time
from collections import Counter
from dataclasses import dataclass
from typing import Any, Callable, Mapping, Sequence

from runonce.audit.oracle import Report, verify
from runonce.kafka import topics
from runonce.kafka.access import KafkaTarget
from runonce.kafka.reader import read_all
from runonce.sdk.submit import Submitter
from runonce.testkit.workload import Family, check_families, generate, in_order, send_paced
from runonce.wire.codec import Codec
from runonce.wire.results import Status


class Burst:
    """The workload's actions (families of repeats, natural ids, retries) published at ``rate``
    a second from a thread of its own, while the storm does its steps."""

    def __init__(self, target: KafkaTarget, actions: int, rate: float, run_id: str, agent_id: str) -> None:
        self.families = generate(actions, seed=11, run_id=run_id)
        self.items = in_order(self.families)
        self.seconds = len(self.items) / rate
        self._target, self._rate, self._agent_id = target, rate, agent_id
        self._sent = threading.Event()
        self._error: list[BaseException] = []

    def start(self) -> Burst:
        threading.Thread(target=self._send, name="burst", daemon=True).start()
        return self

    def wait(self, timeout_s: float) -> None:
        """Until every action is sent; the burst's own error raised here."""
        if not self._sent.wait(timeout_s):
            raise TimeoutError(f"the burst had not sent its {len(self.items)} actions within {timeout_s:.0f} s")
        if self._error:
            raise self._error[0]

    def _send(self) -> None:
        try:
            with Submitter(self._target, agent_id=self._agent_id) as submitter:
                send_paced(submitter.send, self.items, self._rate)
        except BaseException as exc:  # noqa: BLE001 (raised by wait)
            self._error.append(exc)
        finally:
            self._sent.set()


def settled(bootstrap: KafkaTarget, requested: int, timeout_s: float) -> Report:
    """The oracle's report once every one of ``requested`` records is decided (or at the timeout)."""
    deadline = time.monotonic() + timeout_s
    while True:
        report = verify(bootstrap)
        if report.requested >= requested and not report.lost or time.monotonic() > deadline:
            return report
        time.sleep(3)


def last_statuses(bootstrap: KafkaTarget, action_ids: set[str]) -> dict[str, str]:
    """Each of ``action_ids``' last status on actions.results (attempting included)."""
    codec, found = Codec(), {}
    for record in read_all(bootstrap, topics.RESULTS):
        _, result = codec.decode(record.value or b"", expect="ActionResult")
        if result["action_id"] in action_ids:
            found[result["action_id"]] = f"{result['status']} (results[{record.partition}]@{record.offset})"
    return found


def final_results(bootstrap: KafkaTarget, action_ids: set[str], timeout_s: float) -> dict[str, str]:
    """Each action's final status on actions.results, waiting up to ``timeout_s`` for all."""
    codec, found, deadline = Codec(), {}, time.monotonic() + timeout_s
    while True:
        for record in read_all(bootstrap, topics.RESULTS):
            _, result = codec.decode(record.value or b"", expect="ActionResult")
            if result["action_id"] in action_ids and Status(result["status"]).final:
                found[result["action_id"]] = result["status"]
        if len(found) >= len(action_ids) or time.monotonic() > deadline:
            return found
        time.sleep(2)


@dataclass(frozen=True, slots=True)
class Judgement:
    #: what was counted, in the order a person reads it
    rows: dict[str, str]
    #: what is wrong, empty when the storm lost nothing and did nothing twice
    wrong: str

    @property
    def ok(self) -> bool:
        return not self.wrong


def judge(bootstrap: KafkaTarget, families: list[Family], items: Sequence[tuple[dict[str, Any], float]],
          vendors: Mapping[str, str], count_effects: Callable[[], Counter[tuple[str, str]]],
          explained: Callable[[str, str], bool], *, timeout_s: float = 300) -> Judgement:
    """``vendors``: vendor -> the tool its executor performs; ``count_effects()``: (vendor, key)
    -> how many times the vendor's ledger has it, asked once every result is in; ``explained(action_id, tool)``: whether a lost vendor
    answer explains that action's ``in_doubt`` (an executor killed mid-call, of a vendor that
    can neither deduplicate nor be asked). Waits for every decision and every final result."""
    report = settled(bootstrap, len(items), timeout_s)
    tool_of = {record["action_id"]: record["tool"] for record, _ in items}
    approved = {a for a, (outcome, _) in report.outcome_by_action.items()
                if outcome == "APPROVED" and tool_of.get(a) in vendors.values()}
    results = final_results(bootstrap, approved, timeout_s)
    by_status = Counter(results.values())
    effects = count_effects()
    twice = {k: n for k, n in effects.items() if n > 1}
    unexplained = sorted(a for a, status in results.items() if status == "in_doubt" and not explained(a, tool_of[a]))
    problems = check_families(families, report.outcome_by_action)
    made = sum(effects.values())
    rows = {
        "actions": str(len(items)), "decided": str(report.approved + report.dropped),
        "lost": str(len(report.lost)), "decided two ways": str(len(report.conflicts)),
        "re-emitted decisions": f"{report.re_emitted} {sorted(report.re_emitted_by_action)[:5]}",
        "families wrong": str(len(problems)),
        f"approved (for the {len(vendors)} vendors)": str(len(approved)),
        "results: succeeded / failed / in doubt / none": f"{by_status['succeeded']} / {by_status['failed']} / "
                                                         f"{by_status['in_doubt']} / {len(approved) - len(results)}",
        "effects at the vendors": str(made), "performed twice": str(len(twice)),
        "in doubt, no lost vendor answer explains it": str(len(unexplained)),
    }
    # the chart runs the transactional runtime: exactly once, so no decision is written twice;
    # every success is one effect, an in_doubt at most one
    ok = (not report.lost and not report.conflicts and not report.re_emitted and not twice and not problems
          and by_status["succeeded"] <= made <= by_status["succeeded"] + by_status["in_doubt"]
          and len(results) == len(approved) and not unexplained)
    unresulted = sorted(approved - results.keys())
    # which executor, and how far each got: a stuck partition and a lost intent read differently
    seen = last_statuses(bootstrap, set(unresulted)) if unresulted else {}
    wrong = "" if ok else (
        f"lost {report.lost[:5]}, two ways {report.conflicts[:5]}, re-emitted {sorted(report.re_emitted_by_action)[:5]}, "
        f"twice {list(twice)[:5]}, families {problems[:3]}, in doubt unexplained {unexplained[:5]}, "
        f"results {len(results)} of {len(approved)} (none for {dict(Counter(tool_of[a] for a in unresulted))}: "
        f"{[(a, seen.get(a, 'no result record')) for a in unresulted[:5]]}), "
        f"effects {made} for {by_status['succeeded']} succeeded")
    return Judgement(rows, wrong)
