"""The benchmarks' broker: a fresh local Kafka with runonce's topics, in a home of its own
under bench/out, stopped however the run ends."""

from __future__ import annotations

import os
import subprocess
import tempfile
import time
import uuid
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator, Mapping

from confluent_kafka import Producer

from runonce.connectors.vendors.sandbox.local import LocalVendors
from runonce.devbroker.broker import Broker
from runonce.devbroker.users import SUPER_USER, client_config, write_private, write_users
from runonce.kafka import topics
from runonce.kafka.partitioner import partition_for
from runonce.kafka.topics import create_topics
from runonce.ops import child
from runonce.sdk.submit import build_request
from runonce.settings import Settings
from runonce.testkit.decisions import approved_decision
from runonce.wire.codec import Codec

OUT = Path(__file__).resolve().parent / "out"


@contextmanager
def local_broker(name: str, say: Callable[[str], None], *, secure: bool = False) -> Iterator[Settings]:
    """Settings pointing at a started broker whose topics exist. ``secure``: the secured dev
    broker (SASL_SSL with SCRAM-SHA-512, its private CA), every client the admin principal,
    so what a run measures beside a plain one is the cost of TLS and SASL (a superuser's
    requests skip the ACL checks)."""
    settings = Settings.from_env({"RUNONCE_HOME": str(OUT / f"{name}-{uuid.uuid4().hex[:6]}")})
    if secure:
        users_file = settings.home / "users.properties"
        users = write_users(users_file, [])
        settings = settings.with_(broker_users_file=users_file, sasl_username=SUPER_USER,
                                  sasl_password=users[SUPER_USER])
    broker = Broker(settings, progress=say)
    settings = settings.with_(bootstrap=broker.start().bootstrap)
    if secure:
        settings = settings.with_(kafka_config=client_config(broker.pki))
        write_private(settings.home / "admin.password", f"{settings.sasl_password}\n")
    try:
        create_topics(settings.kafka_access(), settings.partitions)
        yield settings
    finally:
        broker.stop()


@contextmanager
def payments_stack(settings: Settings, name: str) -> Iterator[LocalVendors]:
    """On the bench broker: the sandbox vendors, a stream worker and a payments executor, each
    its own process (logs in bench/out/NAME-worker.log, NAME-executor.log); stopped however
    the run ends. Yields the sandbox (its ledger holds every request)."""
    sandbox = LocalVendors(Path(tempfile.mkdtemp(prefix="runonce-bench-"))).start()
    env = settings.with_(connectors_file=sandbox.write_connectors()).child_env(os.environ)
    procs = [child.start(argv, env, OUT / f"{name}-{role}.log", own_session=False)
             for role, argv in (("worker", ["worker", "--name", name]), ("executor", ["executor", "--vendor", "payments"]))]
    try:
        yield sandbox
    finally:
        for proc in procs:
            proc.terminate()
            proc.wait(30)
        sandbox.stop()


def principal_env(settings: Settings) -> dict[str, str]:
    """What a runonce process sets to connect to the bench broker: on a secured one, the admin
    principal (its password in a file) and the broker's client settings; else nothing."""
    if not settings.sasl_username:
        return {}
    return {**settings.with_principal({}, settings.sasl_username, settings.home / "admin.password"),
            "RUNONCE_KAFKA_CONFIG": str(Broker(settings).client_properties)}


def child_env(settings: Settings) -> dict[str, str]:
    """A runonce process's whole environment on the bench broker."""
    return {**settings.child_env(os.environ), **principal_env(settings)}


def assigned_executor(env: Mapping[str, str], vendor: str, group: str, log_path: Path) -> subprocess.Popen[bytes]:
    """``runonce executor --vendor VENDOR`` from the end of actions.approved, once its consumer
    has its partitions (its log says ``assigned``)."""
    log_path.unlink(missing_ok=True)  # "assigned" is this run's
    proc = child.start(["executor", "--vendor", vendor, "--group", group, "--from-end", "--loglevel", "info"],
                       env, log_path, own_session=False)
    while "assigned" not in log_path.read_text(errors="replace"):
        assert proc.poll() is None, log_path.read_text()[-3000:]
        time.sleep(0.05)
    return proc


def approve_many(bootstrap: str, partitions: int, actions: Iterable[tuple[str, dict[str, Any], str]]) -> list[str]:
    """Approved decisions for ``(tool, params, key)`` straight onto actions.approved, as the
    stream job would write them (the executor is what is measured); their action ids."""
    codec, ids = Codec(), []
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for i, (tool, params, key) in enumerate(actions):
        request = build_request(tool, params, agent_id="bench", idempotency_key=key)
        p.produce(topics.APPROVED, key=key.encode(),
                  value=codec.encode("ActionDecision", approved_decision(request, key, source_offset=i)),
                  partition=partition_for(key.encode(), partitions))
        p.poll(0)
        ids.append(request["action_id"])
    p.flush(60)
    return ids
