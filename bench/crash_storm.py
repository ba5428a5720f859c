"""A crash storm: N actions produced faster than one worker decides, three stream workers of
one runtime under a supervisor, a worker SIGKILLed every 2-6 s (some kills delete its RocksDB
folder), then the oracle: lost, decided two ways, re-emitted decisions, dead letters written
twice, and how long the storm took to decide. The transactional runtime signs receipts (a key
made for the run): every decision then has exactly one, and their chains verify.

    .venv/bin/python bench/crash_storm.py --runtime transactional --actions 20000 --rate 4000
    .venv/bin/python bench/crash_storm.py --runtime faust --actions 20000 --rate 4000

Prints one JSON object; bench/README.md keeps the figures."""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.receipts_check import receipts_held, receipts_key  # noqa: E402
from runonce.audit.oracle import verify  # noqa: E402
from runonce.audit.receipts import decision_hashes  # noqa: E402
from runonce.devbroker.broker import Broker  # noqa: E402
from runonce.kafka import topics  # noqa: E402
from runonce.kafka.reader import read_all  # noqa: E402
from runonce.kafka.topics import create_topics  # noqa: E402
from runonce.ops import child
from runonce.receipts.receipt import Kind  # noqa: E402
from runonce.sdk.submit import Submitter  # noqa: E402
from runonce.settings import Settings  # noqa: E402
from runonce.testkit.workload import check_families, generate, in_order, late_unkeyed_retries, send_paced  # noqa: E402
from runonce.wire.codec import Codec  # noqa: E402


def say(msg: str) -> None:
    print(f"storm: {msg}", file=sys.stderr, flush=True)


class Worker:
    def __init__(self, name: str, runtime: str, env: dict[str, str], log_dir: Path) -> None:
        self.name, self.runtime, self.env, self.log_dir = name, runtime, env, log_dir
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        self.proc = child.start(["worker", "--name", self.name, "--runtime", self.runtime], self.env,
                                self.log_dir / f"{self.name}.log")

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def kill(self) -> None:
        if self.alive():
            assert self.proc is not None
            os.killpg(self.proc.pid, 9)
            self.proc.wait()

    def stop(self) -> None:
        if self.alive():
            assert self.proc is not None
            os.killpg(self.proc.pid, 15)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.kill()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runtime", default="transactional", choices=["transactional", "faust"])
    ap.add_argument("--actions", type=int, default=20_000)
    ap.add_argument("--rate", type=float, default=4000.0, help="actions/s offered")
    ap.add_argument("--workers", type=int, default=3)
    ap.add_argument("--delete-share", type=float, default=0.15, help="share of kills that delete the RocksDB folder")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--min-kills", type=int, default=0, help="go on killing until this many, even once all is decided")
    ap.add_argument("--late-retries", type=int, default=0,
                    help="families of unkeyed retries arriving 2-30 s after their original (a lost claim approves one)")
    args = ap.parse_args()

    out_dir = ROOT / "bench" / "out"
    home = out_dir / f"storm-{uuid.uuid4().hex[:6]}"
    settings = Settings.from_env({"RUNONCE_HOME": str(home)})
    broker = Broker(settings, progress=say)
    bootstrap = str(broker.start().bootstrap)
    settings = settings.with_(bootstrap=bootstrap)
    rnd = random.Random(args.seed)
    workers: list[Worker] = []
    stop = threading.Event()
    try:
        create_topics(bootstrap, settings.partitions)
        env = {**os.environ, "RUNONCE_HOME": str(home), "RUNONCE_BOOTSTRAP": bootstrap}
        (home / "logs").mkdir(parents=True, exist_ok=True)
        key = receipts_key(home) if args.runtime == "transactional" else None
        if key is not None:
            env["RUNONCE_RECEIPTS_KEY"] = str(key)
        workers = [Worker(f"storm-{i}", args.runtime, env, home / "logs") for i in range(args.workers)]
        for w in workers:
            w.start()

        def supervise() -> None:
            while not stop.wait(0.5):
                for w in workers:
                    if not w.alive():
                        w.start()

        threading.Thread(target=supervise, daemon=True).start()
        time.sleep(8)
        run_id = uuid.uuid4().hex[:6]
        families = generate(args.actions, repeat_ratio=0.15, seed=args.seed, run_id=run_id)
        families += late_unkeyed_retries(args.late_retries, seed=args.seed, run_id=run_id)
        random.Random(args.seed).shuffle(families)
        records = [m for f in families for m, _ in f.members]
        wanted = {r["action_id"] for r in records}
        started = time.monotonic()

        def agent() -> None:
            with Submitter(bootstrap, agent_id="storm", timeout_s=300) as sub:
                send_paced(sub.send, in_order(families), args.rate)

        producer = threading.Thread(target=agent, daemon=True)
        producer.start()
        kills = deletions = 0
        decided = 0
        while True:
            time.sleep(rnd.uniform(2, 6))
            report = verify(bootstrap)
            decided = len(wanted & report.outcome_by_action.keys())
            say(f"t={time.monotonic() - started:5.0f}s decided {decided}/{len(wanted)}, kills {kills} "
                f"({deletions} with state deleted)")
            if decided == len(wanted) and not producer.is_alive() and kills >= args.min_kills:
                break
            if time.monotonic() - started > 1800:
                raise SystemExit("the storm was not decided within 30 minutes")
            victim = rnd.choice(workers)
            victim.kill()
            kills += 1
            if rnd.random() < args.delete_share:
                shutil.rmtree(home / "state" / victim.name, ignore_errors=True)
                deletions += 1
        took = time.monotonic() - started
        time.sleep(10)  # the last victim restarts and restores; anything it wrote again would show now
        report = verify(bootstrap)
        ours_reemitted = sum(n for a, n in report.re_emitted_by_action.items() if a in wanted)
        ours_conflicts = [pos for pos in report.conflicts]
        against_plan = check_families(families, report.outcome_by_action)
        receipts = None
        if key is not None:
            decided_records: dict[str, str] = {}
            for topic in (topics.APPROVED, topics.DROPPED, topics.HELD):
                decided_records.update({d: a for d, a in decision_hashes(read_all(bootstrap, topic), Codec()).items()
                                        if a in wanted})
            receipts = receipts_held(bootstrap, 0, Kind.DECISION, decided_records, wanted, key)
        print(json.dumps({
            "runtime": args.runtime, "actions": len(records), "offered_per_s": args.rate, "workers": args.workers,
            "kills": kills, "kills_deleting_state": deletions, "seconds_to_decide_all": round(took, 1),
            "lost": len(report.lost), "decided_two_ways": len(ours_conflicts),
            "re_emitted_decisions": ours_reemitted, "dead_letters_written_twice": report.dead_letters_repeated,
            "doubled_keys": len(report.doubled_keys), "families_against_plan": len(against_plan),
            "late_retry_families_against_plan": sum(p.startswith("late_unkeyed_retry") for p in against_plan),
            "first_against_plan": against_plan[:3], "receipts": receipts}, indent=2))
        if report.decided_two_ways:
            say(report.summary())
    finally:
        stop.set()
        for w in workers:
            w.stop()
        broker.stop()
        shutil.rmtree(home, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
