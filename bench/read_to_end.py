"""What reading a topic to its end costs: ``read_all`` of an idle topic, the oracle
(``verify``: five topics), and the same with a consumer that waits out the broker's default
fetch wait (``fetch.wait.max.ms`` 500, what every read-to-end consumer did before
``clients.reader(to_end=True)``). Medians of N rounds on a fresh local broker with
runonce's topics and ``--records`` requests on ``actions.requested``.

    .venv/bin/python bench/read_to_end.py [--rounds 5] [--records 0]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.local_broker import local_broker  # noqa: E402
from runonce.audit.oracle import verify  # noqa: E402
from runonce.kafka import clients, topics  # noqa: E402
from runonce.kafka.reader import read_all  # noqa: E402
from runonce.sdk.submit import Submitter  # noqa: E402


def _median_s(fn: object, rounds: int) -> float:
    times = []
    for _ in range(rounds):
        started = time.monotonic()
        fn()  # type: ignore[operator]
        times.append(time.monotonic() - started)
    return round(statistics.median(times), 3)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--records", type=int, default=0, help="requests to put on actions.requested first")
    args = ap.parse_args()
    with local_broker("read-to-end", lambda m: print(m, file=sys.stderr)) as settings:
        bootstrap = settings.bootstrap_servers()
        with Submitter(bootstrap, agent_id="bench") as sub:
            for i in range(args.records):
                sub.submit("update_salesforce_field", {"record_id": f"r{i}", "field": "f", "value": i})
        figures = {
            "read_all(actions.dropped), idle": _median_s(lambda: list(read_all(bootstrap, topics.DROPPED)), args.rounds),
            "read_all(actions.requested)": _median_s(lambda: list(read_all(bootstrap, topics.REQUESTED)), args.rounds),
            "verify (5 topics)": _median_s(lambda: verify(bootstrap), args.rounds),
        }
        waited = dict(clients.TO_END)
        clients.TO_END.clear()  # as before: the default fetch wait
        try:
            figures["read_all(actions.dropped), idle, default fetch wait"] = _median_s(
                lambda: list(read_all(bootstrap, topics.DROPPED)), args.rounds)
            figures["verify (5 topics), default fetch wait"] = _median_s(lambda: verify(bootstrap), args.rounds)
        finally:
            clients.TO_END.update(waited)
    print(json.dumps({"records": args.records, "rounds": args.rounds, "median_s": figures}, indent=2))


if __name__ == "__main__":
    main()
