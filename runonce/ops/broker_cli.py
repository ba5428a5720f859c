"""``runonce broker`` (the local Kafka: one node or a cluster), ``topics``, ``acl`` and
``observe`` (the local Prometheus)."""

from __future__ import annotations

import argparse
import time
from typing import Any

from runonce.errors import ConfigError
from runonce.ops.commands import Adder, say
from runonce.settings import Settings


def cmd_cluster(settings: Settings, args: argparse.Namespace) -> int:
    from runonce.devbroker.broker import BrokerState
    from runonce.devbroker.cluster import Cluster

    cluster = (Cluster(settings, args.brokers, progress=say) if args.action == "start"
               else Cluster.existing(settings, progress=say))
    if cluster is None:
        raise ConfigError(f"no local cluster in {settings.broker_dir}: runonce broker start --brokers 3")
    if args.action in ("kill", "restart"):
        if args.node not in cluster.nodes:
            raise ConfigError(f"--node must be one of {sorted(cluster.nodes)}")
        if args.action == "kill":
            cluster.nodes[args.node].kill()
        else:
            cluster.restart(args.node)
    elif args.action == "start":
        started = time.monotonic()
        cluster.start()
        say(f"{cluster.size} nodes ready in {time.monotonic() - started:.1f} s")
    elif args.action == "stop":
        cluster.stop()
    statuses = cluster.status()
    for node_id, status in statuses.items():
        print(f"node {node_id}: {status.describe()}")
    if args.action == "status":
        return 0 if all(s.state is BrokerState.RUNNING for s in statuses.values()) else 1
    return 0


def cmd_broker(settings: Settings, args: argparse.Namespace) -> int:
    from runonce.devbroker.broker import Broker, BrokerState
    from runonce.devbroker.cluster import Cluster

    if args.brokers > 1 or args.action in ("kill", "restart") or (
            args.action in ("status", "stop") and Cluster.existing(settings) is not None):
        return cmd_cluster(settings, args)
    broker = Broker(settings, progress=say)
    if args.action == "fetch":
        started = time.monotonic()
        path = broker.fetch()
        size_mb = sum(p.stat().st_size for p in path.iterdir()) / 1e6
        print(f"Kafka {settings.kafka_version} jars in {path} ({size_mb:.0f} MB, {time.monotonic() - started:.1f} s)")
        return 0
    if args.action == "start":
        started = time.monotonic()
        status = broker.start()
        print(f"{status.describe()} ({time.monotonic() - started:.1f} s)")
        return 0
    if args.action == "stop":
        print(broker.stop().describe())
        return 0
    status = broker.status()
    print(status.describe())
    return 0 if status.state is BrokerState.RUNNING else 1


def cmd_topics(settings: Settings, args: argparse.Namespace) -> int:
    from runonce.kafka.topics import TOPICS, create_topics

    outcome = create_topics(settings.kafka_access(), args.partitions or settings.partitions,
                            replication_factor=settings.replication_factor,
                            min_insync_replicas=settings.min_insync_replicas, say=say)
    for spec in TOPICS:
        print(f"{spec.name:<26} {outcome[spec.name]:<8} {spec.doc}")
    return 0


def _name(value: Any) -> str:
    """An ACL binding's enum field (the stubs also allow its raw str or int)."""
    return str(getattr(value, "name", value))


def cmd_acl(settings: Settings, args: argparse.Namespace) -> int:
    from pathlib import Path

    from runonce.devbroker.users import write_users
    from runonce.kafka import acls

    grants = acls.load(Path(args.file) if args.file else None)
    if args.action == "show":  # from the file alone: no broker needed
        print(acls.show(grants, acls.holders(Path(args.file) if args.file else None)))
        return 0
    if args.action == "users":
        if not args.out:
            say("acl users needs --out FILE")
            return 2
        users = write_users(Path(args.out), acls.principals(grants))
        print(f"wrote {len(users)} users ({', '.join(users)}) to {args.out} (mode 0600); "
              f"start the broker with RUNONCE_BROKER_USERS={args.out}")
        return 0
    if args.action == "apply":
        count, deleted = acls.apply(settings.kafka_access(), grants, prune=args.prune)
        for grant in grants:
            print(grant.describe())
        print(f"{count} ACL bindings in place for {', '.join(acls.principals(grants))}"
              + (f"; {deleted} other bindings removed" if args.prune else ""))
        return 0
    for binding in acls.current(settings.kafka_access(), acls.principals(grants)):
        print(f"{binding.principal:<15} {_name(binding.permission_type):<6} {_name(binding.operation):<9} "
              f"{_name(binding.restype).lower()} {binding.name}"
              f"{'*' if _name(binding.resource_pattern_type) == 'PREFIXED' else ''}")
    return 0


def cmd_observe(settings: Settings, args: argparse.Namespace) -> int:
    from runonce.ops.observe import prometheus

    if args.action == "fetch":
        print(prometheus.fetch(settings, progress=say))
        return 0
    if args.action == "check":
        return prometheus.check_rules(settings, say=print)
    server = prometheus.Prometheus(settings)
    if server.pid() is None:
        say("Prometheus is not running: `runonce up --observe` starts it")
        return 1
    firing = server.firing()
    for alert in firing:
        labels = {k: v for k, v in alert["labels"].items() if k not in ("alertname", "severity")}
        print(f"{alert['labels']['alertname']:<28} {alert['labels'].get('severity', ''):<7} {labels} "
              f"{alert.get('annotations', {}).get('summary', '')}")
    if not firing:
        print("no alert firing")
    return 0


def add_commands(add: Adder) -> None:
    p = add("broker", cmd_broker, "Fetch, start, stop or check the local Kafka (KRaft): one node, or a "
                                  "cluster of --brokers N for failover tests.")
    p.add_argument("action", choices=["fetch", "start", "stop", "status", "kill", "restart"],
                   help="fetch: resolve jars with Maven; start: start and wait until it answers; "
                        "stop: stop cleanly; status: running/stopped/crashed (exit 1 unless running); "
                        "kill / restart: one node of a cluster (--node)")
    p.add_argument("--brokers", type=int, default=1,
                   help="start: nodes (broker+controller each, 384 MiB heap each); 3 gives replication 3")
    p.add_argument("--node", type=int, help="kill / restart: the node's id (1..N)")
    p = add("observe", cmd_observe, "Prometheus for the local stack: fetch its programs (Debian's package), "
                                    "check runonce's alert rules with promtool, or show what is firing.")
    p.add_argument("action", choices=["fetch", "check", "alerts"],
                   help="fetch: download and unpack prometheus and promtool once; check: promtool check rules "
                        "and promtool test rules on runonce's alerts; alerts: the alerts `up --observe` has firing")
    p = add("topics", cmd_topics, "Create runonce's topics (idempotent).")
    p.add_argument("action", choices=["create"])
    p.add_argument("--partitions", type=int, default=None, help="partitions per topic (default 6)")
    p = add("acl", cmd_acl, "Least-privilege ACLs from one file (default: runonce/kafka/acls.toml) on a "
                            "secured broker; run as the admin principal (RUNONCE_SASL_USERNAME=admin).")
    p.add_argument("action", choices=["show", "apply", "list", "users"],
                   help="show: each principal, who connects as it and what it is granted (from the file, no "
                        "broker); apply: grant the file's rules; list: the rules the broker holds for its "
                        "principals; users: write a broker users file with random passwords (--out)")
    p.add_argument("--file", help="ACL file (TOML, [[grant]] tables)")
    p.add_argument("--prune", action="store_true", help="apply: also delete the principals' rules not in the file")
    p.add_argument("--out", help="users: where to write name=password lines")
