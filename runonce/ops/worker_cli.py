"""``runonce worker``: one stream worker in the foreground, either runtime."""

from __future__ import annotations

import argparse
import logging
from typing import Any

from runonce.ops.commands import LEVELS, Adder, instance_name, say
from runonce.settings import Runtime, Settings


def cmd_worker(settings: Settings, args: argparse.Namespace) -> int:
    from runonce.core.policy import PolicyBook
    from runonce.kafka.health import Health
    from runonce.ops.observe.serve import ProbeServer
    from runonce.streams.metrics import StreamMetrics

    if args.name:
        settings = settings.with_(worker_name=instance_name(args.name, "worker"))
    if args.metrics_port is not None:
        settings = settings.with_(metrics_port=args.metrics_port)
    if args.runtime:
        settings = settings.with_(runtime=Runtime(args.runtime))  # argparse's choices are Runtime's values
    policies = PolicyBook.load(settings.policy_file)  # fail fast, naming the tool and field
    metrics = StreamMetrics()
    health = Health(f"stream worker {settings.worker_name}")
    if settings.metrics_port:
        probes = ProbeServer(settings.metrics_host, settings.metrics_port, metrics.registry, health)
        say(f"metrics on http://{probes.host}:{probes.port}/metrics, probes on /healthz and /readyz")
    if settings.runtime is Runtime.FAUST:
        return _run_faust(settings, policies, metrics, args.loglevel)
    from runonce.streams.transactional.worker import TransactionalWorker

    logging.getLogger("runonce").setLevel(LEVELS[args.loglevel])
    say(f"stream worker {settings.worker_name} on {settings.kafka_access()} (transactional, exactly-once; "
         f"transactions of up to {settings.txn_max_records} records; "
         f"{len(policies.tools)} tool policies)")
    TransactionalWorker(settings, policies, metrics, health=health).run()
    return 0


#: how long a faust worker's start waits for the broker's first answer
FAUST_CONNECT_S = 30.0


def _run_faust(settings: Settings, policies: Any, metrics: Any, loglevel: str) -> int:
    import faust

    from runonce.kafka.clients import check_connects
    from runonce.streams.faust_runtime.app import create_faust_app

    # aiokafka retries a handshake that cannot succeed and then reports only "Unable to
    # bootstrap": the same client settings are tried first under the handshake watch, which
    # names the handshake (exit 2) as the transactional runtime's clients do
    check_connects(settings.kafka_access(), FAUST_CONNECT_S)
    app = create_faust_app(settings, policies, metrics)
    say(f"stream worker {settings.worker_name} on {settings.kafka_access()} "
         f"(faust, {settings.processing_guarantee}, {len(policies.tools)} tool policies)")
    worker = faust.Worker(app, loglevel=loglevel, quiet=True)
    # faust's terminal spinner puts the root logger at DEBUG so it can spin on every record:
    # then every debug() call in aiokafka and faust builds a LogRecord (~10% of a worker's CPU).
    worker.spinner = None
    worker.execute_from_commandline()
    return 0


def add_commands(add: Adder) -> None:
    p = add("worker", cmd_worker, "Run one stream worker in the foreground.")
    p.add_argument("--name", help="worker name; names its local RocksDB folder and its transactional.id "
                                  "(default worker-0; two workers must not share one; @host: the host's name, "
                                  "for replicas of one service)")
    p.add_argument("--runtime", choices=[r.value for r in Runtime], default=None,
                   help="transactional (default: exactly-once on confluent-kafka transactions) or faust "
                        "(faust-streaming, at-least-once made harmless); RUNONCE_RUNTIME sets the default")
    p.add_argument("--metrics-port", type=int, default=None,
                   help="serve Prometheus metrics on this port, with /healthz (live) and /readyz (ready) beside "
                        "them (RUNONCE_METRICS_HOST: the address, default 127.0.0.1)")
    p.add_argument("--loglevel", default="warn", choices=["crit", "error", "warn", "info", "debug"])
