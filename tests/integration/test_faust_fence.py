"""Records faust acknowledges without handing them to the pipeline are decided all the same
(streams/faust_runtime/fence.py).

faust's stream acknowledges events it skips (an older generation, a stopped flow), and its
commit follows what is acknowledged: on 2026-12-02 the crash test's group committed 1,292
records of actions.requested[0] that no worker ever decided. The failpoint ``pass_over``
does the same on purpose to ten of this test's records, all on one partition, then lets faust
commit before the next one is decided. The fence must keep the commit below the hole and
stop the worker at the next record (exit 70); its restart must decide every record.
"""

from __future__ import annotations

import itertools
import subprocess
import uuid

import pytest

from runonce.core.decision import Outcome
from runonce.kafka.partitioner import partition_for
from runonce.ops.watch import DecisionWatcher
from runonce.sdk.submit import Submitter, build_request
from runonce.settings import Settings
from runonce.streams.faust_runtime.stop import EXIT_STOPPED_BEFORE_ACK
from tests.support.worker import WorkerProcess

pytestmark = pytest.mark.broker

SKIPPED = 10


def test_records_faust_acknowledges_undecided_are_decided_after_a_restart(
        broker: Settings, decision_log: DecisionWatcher, tmp_path) -> None:
    tag = f"fence-{uuid.uuid4().hex[:8]}"
    on_zero = (k for k in (f"{tag}-{i}" for i in itertools.count()) if partition_for(k.encode(), broker.partitions) == 0)
    keys = list(itertools.islice(on_zero, 3 * SKIPPED))
    requests = [build_request("update_salesforce_field", {"record_id": key, "field": "owner", "value": tag},
                              agent_id=tag, idempotency_key=key) for key in keys]
    worker = WorkerProcess(broker, f"fence-{tag}", tmp_path, runtime="faust", loglevel="info",
                           extra_env={"RUNONCE_STREAM_FAILPOINT": f"pass_over:{SKIPPED}:{tag}"})
    worker.start()
    try:
        with Submitter(broker.bootstrap_servers(), agent_id=tag) as sub:
            for request in requests:
                sub.send(request)
        try:
            code: int | None = worker.wait_exit(60)
        except subprocess.TimeoutExpired:
            code = None
    finally:
        worker.kill()
    log = worker.log_tail(60)
    assert log.count("failpoint pass_over") == SKIPPED, f"the fault did not apply:\n{log}"
    assert code == EXIT_STOPPED_BEFORE_ACK and "faust skipped actions.requested[0]" in log, (
        f"the worker went on past records it never decided (exit {code}):\n{log}")

    again = WorkerProcess(broker, f"fence-{tag}", tmp_path, runtime="faust")
    again.start()
    try:
        decided = decision_log.wait([r["action_id"] for r in requests], timeout_s=90)
    except TimeoutError as exc:
        raise AssertionError(f"{exc}\nthe commit passed records no worker decided:\n{again.log_tail()}") from None
    finally:
        again.stop()
    assert {d["outcome"] for d in decided.values()} == {Outcome.APPROVE.value}
