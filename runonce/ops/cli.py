"""The ``runonce`` command line. Builds one Settings from the environment and flags,
and passes it down; every subcommand has --help."""

from __future__ import annotations

import argparse
import datetime as dt
import json
import logging
import sys
import time
from typing import Any, Callable, Sequence

from runonce.errors import ConfigError, FatalError, RunonceError
from runonce.ops import gateway_cli, vendors_cli
from runonce.settings import Settings


def _say(msg: str) -> None:
    print(f"runonce: {msg}", file=sys.stderr, flush=True)


# -- broker / topics -------------------------------------------------------------------
def cmd_cluster(settings: Settings, args: argparse.Namespace) -> int:
    from runonce.devbroker.broker import BrokerState
    from runonce.devbroker.cluster import Cluster

    cluster = (Cluster(settings, args.brokers, progress=_say) if args.action == "start"
               else Cluster.existing(settings, progress=_say))
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
        _say(f"{cluster.size} nodes ready in {time.monotonic() - started:.1f} s")
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
    broker = Broker(settings, progress=_say)
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
                            min_insync_replicas=settings.min_insync_replicas, say=_say)
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
    if args.action == "users":
        if not args.out:
            _say("acl users needs --out FILE")
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


# -- stream worker ---------------------------------------------------------------------
HOST = "@host"
_NAME_CHARS = set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_.")


def instance_name(given: str, kind: str) -> str:
    """A worker's name or an executor's slot; ``@host`` takes the host's name, so replicas of
    one compose service (or pods of a StatefulSet) each get their own. The name becomes a
    folder and a transactional.id: letters, digits, ``-_.`` only."""
    import socket

    name = socket.gethostname() if given == HOST else given
    if not name or set(name) - _NAME_CHARS:
        raise ConfigError(f"{kind} name {name!r}: use letters, digits and -_. only")
    return name


def cmd_worker(settings: Settings, args: argparse.Namespace) -> int:
    from prometheus_client import start_http_server

    from runonce.core.policy import PolicyBook
    from runonce.streams.metrics import StreamMetrics

    if args.name:
        settings = settings.with_(worker_name=instance_name(args.name, "worker"))
    if args.metrics_port is not None:
        settings = settings.with_(metrics_port=args.metrics_port)
    if args.runtime:
        settings = settings.with_(runtime=args.runtime)
        settings.validate()
    policies = PolicyBook.load(settings.policy_file)  # fail fast, naming the tool and field
    metrics = StreamMetrics()
    if settings.metrics_port:
        start_http_server(settings.metrics_port, addr="127.0.0.1", registry=metrics.registry)
        _say(f"metrics on http://127.0.0.1:{settings.metrics_port}/metrics")
    if settings.runtime == "faust":
        return _run_faust(settings, policies, metrics, args.loglevel)
    from runonce.streams.transactional.worker import TransactionalWorker

    logging.getLogger("runonce").setLevel(vendors_cli.LEVELS[args.loglevel])
    _say(f"stream worker {settings.worker_name} on {settings.kafka_access()} (transactional, exactly-once; "
         f"transactions of up to {settings.txn_max_records} records; "
         f"{len(policies.tools)} tool policies)")
    TransactionalWorker(settings, policies, metrics).run()
    return 0


def _run_faust(settings: Settings, policies: Any, metrics: Any, loglevel: str) -> int:
    import faust

    from runonce.streams.faust_runtime.app import create_app

    app = create_app(settings, policies, metrics)
    _say(f"stream worker {settings.worker_name} on {settings.kafka_access()} "
         f"(faust, {settings.processing_guarantee}, {len(policies.tools)} tool policies)")
    worker = faust.Worker(app, loglevel=loglevel, quiet=True)
    # faust's terminal spinner puts the root logger at DEBUG so it can spin on every record:
    # then every debug() call in aiokafka and faust builds a LogRecord (~10% of a worker's CPU).
    worker.spinner = None
    worker.execute_from_commandline()
    return 0


def cmd_observe(settings: Settings, args: argparse.Namespace) -> int:
    from runonce.ops.observe import prometheus

    if args.action == "fetch":
        print(prometheus.fetch(settings, progress=_say))
        return 0
    if args.action == "check":
        return prometheus.check_rules(settings, say=print)
    server = prometheus.Prometheus(settings)
    if server.pid() is None:
        _say("Prometheus is not running: `runonce up --observe` starts it")
        return 1
    firing = server.firing()
    for alert in firing:
        labels = {k: v for k, v in alert["labels"].items() if k not in ("alertname", "severity")}
        print(f"{alert['labels']['alertname']:<28} {alert['labels'].get('severity', ''):<7} {labels} "
              f"{alert.get('annotations', {}).get('summary', '')}")
    if not firing:
        print("no alert firing")
    return 0


def cmd_up(settings: Settings, args: argparse.Namespace) -> int:
    """Broker, topics, stream worker, sandbox vendors and executors in the background."""
    from runonce.ops.stack import Stack

    Stack(settings, progress=_say).up(with_executors=not getattr(args, "no_executors", False),
                                      secure=getattr(args, "secure", False), observe=getattr(args, "observe", False))
    return 0


def cmd_down(settings: Settings, args: argparse.Namespace) -> int:
    from runonce.ops.stack import Stack

    print(Stack(settings, progress=_say).down().describe())
    return 0


def cmd_status(settings: Settings, args: argparse.Namespace) -> int:
    from runonce.ops.stack import Stack

    rows = Stack(settings).status()
    for name, state in rows:
        print(f"{name:<22} {state}")
    return 0 if all("running" in state for _, state in rows) else 1


# -- submit / tail / verify / stats ----------------------------------------------------
def cmd_submit(settings: Settings, args: argparse.Namespace) -> int:
    from runonce.sdk.submit import Submitter

    try:
        params = json.loads(args.params)
    except ValueError as exc:
        _say(f"--params is not JSON: {exc}")
        return 2
    with Submitter(settings.kafka_access(), agent_id=args.agent) as sub:
        action_id = sub.submit(args.tool, params, idempotency_key=args.key, natural_id=args.natural_id)
    print(action_id)
    return 0


def broker_time_ms(value: str, now_ms: int) -> int:
    """``--since``/``--until``: an ISO 8601 time (UTC unless it says otherwise) or a duration
    ago ("15m", "2h", "7d")."""
    from runonce.core.policy import parse_duration_ms

    try:
        return now_ms - parse_duration_ms(value, "time")
    except ConfigError:
        pass
    try:
        when = dt.datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        raise ConfigError(f"expected an ISO time (2026-11-30T14:00:00Z) or a duration ago "
                          f"(15m, 2h, 7d), got {value!r}") from None
    if when.tzinfo is None:
        when = when.replace(tzinfo=dt.timezone.utc)
    return int(when.timestamp() * 1000)


def cmd_approvals(settings: Settings, args: argparse.Namespace) -> int:
    import getpass
    import json
    from pathlib import Path

    from runonce import tokens
    from runonce.approvals.client import Approvals
    from runonce.approvals.page import ApprovalsPage
    from runonce.core.approval import HoldStatus, Verdict

    tokens_file = Path(args.tokens) if args.tokens else settings.home / "approvers.tokens"
    if args.action == "token":
        if not args.action_id:
            raise ConfigError("runonce approvals token NAME: name the approver")
        if args.revoke:
            found = tokens.revoke(tokens_file, args.action_id)
            print(f"{args.action_id}: token revoked" if found else f"{args.action_id} has no token in {tokens_file}")
            return 0 if found else 1
        token = tokens.add(tokens_file, args.action_id)
        print(f"token for {args.action_id} (shown once; its hash is in {tokens_file}): {token}")
        print(f"sign-in link: http://{args.host}:{args.port}/?token={token}")
        return 0
    access = settings.kafka_access()
    approver = args.approver or (access.username if access.secured else None) or getpass.getuser()
    with Approvals(access, approver) as approvals:
        if args.action == "serve":
            page = ApprovalsPage(approvals, tokens_file, args.host, args.port)
            _say(f"approvals page on {page.url} (approvers sign in with `runonce approvals token NAME`'s link)")
            try:
                page.serve_forever()
            except KeyboardInterrupt:
                pass
            finally:
                page.close()
            return 0
        if args.action == "list":
            held = [h for h in approvals.held() if args.all or h.status is HoldStatus.HELD]
            now_ms = int(time.time() * 1000)
            for h in held:
                if args.json:
                    print(json.dumps({"action_id": h.action_id, "tool": h.tool, "params": h.params, "agent": h.agent_id,
                                      "why": h.why, "held_at_ms": h.held_at_ms, "expires_at_ms": h.expires_at_ms,
                                      "status": h.status.value, "decided_by": h.decided_by}))
                else:
                    left_s = max(0, (h.expires_at_ms - now_ms) // 1000)
                    print(f"{h.action_id}  {h.tool:<22} {h.status.value:<8} {h.why}  agent {h.agent_id}"
                          + (f"  expires in {left_s // 3600}h{left_s % 3600 // 60:02d}m" if h.status is HoldStatus.HELD
                             else f"  by {h.decided_by}"))
            if not held and not args.json:
                print("nothing is held" if not args.all else "nothing was ever held")
            return 0
        if not args.action_id:
            raise ConfigError(f"runonce approvals {args.action} ACTION_ID: name the held action")
        if args.action == "show":
            h = approvals.get(args.action_id)
            print(f"{h.action_id}  {h.tool}  {h.status.value}" + (f" by {h.decided_by}" if h.decided_by else ""))
            print(f"  params {json.dumps(h.params, ensure_ascii=False)}\n  agent {h.agent_id}\n  why {h.why}")
            for v in h.verdicts:
                print(f"  {v.approver}: {v.verdict or 'expiry'} -> {v.change}" + (f" ({v.note})" if v.note else ""))
            return 0
        seen = approvals.verdict(args.action_id, Verdict(args.action), args.reason)
        if seen.change == "none":
            print(f"{args.action}: changed nothing: {seen.note}")
            return 3
        print(f"{args.action}: {seen.change}d by {approver}" if seen.change != "deny" else f"deny: denied by {approver}")
        return 0


def cmd_tail(settings: Settings, args: argparse.Namespace) -> int:
    from runonce.ops.tail import Filter, tail

    now_ms = int(time.time() * 1000)
    since_ms = broker_time_ms(args.since, now_ms) if args.since else None
    until_ms = broker_time_ms(args.until, now_ms) if args.until else None
    tail(settings.kafka_access(), args.topic, follow=args.follow, limit=args.limit, as_json=args.json,
         keep=Filter(tool=args.tool, reason=args.reason, agent=args.agent, tenant=args.tenant), since_ms=since_ms, until_ms=until_ms)
    return 0


def cmd_export(settings: Settings, args: argparse.Namespace) -> int:
    from pathlib import Path

    from runonce.ops.export import export
    from runonce.ops.tail import Filter

    now_ms = int(time.time() * 1000)
    export(settings.kafka_access(), args.topic, Path(args.out), fmt=args.format,
           keep=Filter(tool=args.tool, reason=args.reason, agent=args.agent, tenant=args.tenant),
           since_ms=broker_time_ms(args.since, now_ms) if args.since else None,
           until_ms=broker_time_ms(args.until, now_ms) if args.until else None, progress=_say)
    return 0


def cmd_report(settings: Settings, args: argparse.Namespace) -> int:
    from pathlib import Path

    from runonce.ops.report.build import write_report

    now_ms = int(time.time() * 1000)
    since_ms = broker_time_ms(args.since, now_ms)
    until_ms = broker_time_ms(args.until, now_ms) if args.until else now_ms
    if until_ms <= since_ms:
        raise ConfigError(f"--until ({args.until}) must come after --since ({args.since})")
    write_report(settings.kafka_access(), Path(args.html), since_ms, until_ms,
                 source=f"Kafka at {settings.bootstrap_servers()}", progress=_say)
    return 0


def cmd_verify(settings: Settings, args: argparse.Namespace) -> int:
    from runonce.testkit.oracle import verify

    deadline = time.monotonic() + args.wait
    while True:
        report = verify(settings.kafka_access())
        if report.ok or time.monotonic() >= deadline:
            break
        _say(f"{len(report.lost)} records not yet decided; waiting ...")
        time.sleep(2)
    print(report.summary())
    return 0 if report.ok else 1


def cmd_stats(settings: Settings, args: argparse.Namespace) -> int:
    from runonce.ops.stats import stats_table

    print(stats_table(settings.kafka_access()))
    return 0


def cmd_demo(settings: Settings, args: argparse.Namespace) -> int:
    from runonce.devbroker.users import SUPER_USER
    from runonce.ops.demo import DemoAccess, format_table, run_demo
    from runonce.ops.stack import Stack

    stack = Stack(settings, progress=_say)
    stack.up(with_executors=False)  # the demo runs its own sandboxes and executors
    # On a secured stack each part connects as its own principal; else these are all one.
    access = DemoAccess(agent=stack.access_as("agent"), approver=stack.access_as("approver"),
                        observer=stack.access_as(SUPER_USER), executor=stack.access_as("executor"),
                        executor_env=stack.env_as("executor"))
    _say("replaying the seed's incidents, straight to the sandbox vendors and then through runonce ...")
    rows = run_demo(settings, progress=_say, access=access)
    print(format_table(rows))
    surprises = [s for s in (row.surprise() for row in rows) if s is not None]
    for surprise in surprises:
        _say(f"demo: NOT AS EXPECTED: {surprise}")
    return 1 if surprises else 0


# -- parser ----------------------------------------------------------------------------
def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="runonce",
        description="Deduplicate the actions AI agents take, on Kafka: approve each action once, "
                    "drop repeats with a reason. Settings come from RUNONCE_* environment variables "
                    "(RUNONCE_HOME, RUNONCE_BOOTSTRAP, RUNONCE_PARTITIONS, RUNONCE_POLICY_FILE, ...).",
    )
    parser.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def add(name: str, fn: Callable[[Settings, argparse.Namespace], int], help_: str) -> argparse.ArgumentParser:
        p = sub.add_parser(name, help=help_, description=help_)
        p.set_defaults(fn=fn)
        return p

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
    p.add_argument("action", choices=["apply", "list", "users"],
                   help="apply: grant the file's rules; list: show the rules the broker holds for its "
                        "principals; users: write a broker users file with random passwords (--out)")
    p.add_argument("--file", help="ACL file (TOML, [[grant]] tables)")
    p.add_argument("--prune", action="store_true", help="apply: also delete the principals' rules not in the file")
    p.add_argument("--out", help="users: where to write name=password lines")
    p = add("worker", cmd_worker, "Run one stream worker in the foreground.")
    p.add_argument("--name", help="worker name; names its local RocksDB folder and its transactional.id "
                                  "(default worker-0; two workers must not share one; @host: the host's name, "
                                  "for replicas of one service)")
    p.add_argument("--runtime", choices=["transactional", "faust"], default=None,
                   help="transactional (default: exactly-once on confluent-kafka transactions) or faust "
                        "(faust-streaming, at-least-once made harmless); RUNONCE_RUNTIME sets the default")
    p.add_argument("--metrics-port", type=int, default=None, help="serve Prometheus metrics on this port")
    p.add_argument("--loglevel", default="warn", choices=["crit", "error", "warn", "info", "debug"])
    p = add("up", cmd_up, "Start the local stack in the background: broker, topics, a stream worker, "
                          "the sandbox vendors and one executor per vendor.")
    p.add_argument("--no-executors", action="store_true", help="only the broker, topics and a stream worker")
    p.add_argument("--secure", action="store_true",
                   help="SASL on every listener and least-privilege ACLs, one principal per component; "
                        "credentials in RUNONCE_HOME/credentials (a broker secured once stays secured)")
    p.add_argument("--observe", action="store_true",
                   help="also start a real Prometheus (Debian's package, fetched once) scraping every component, "
                        "with runonce's alert rules; `runonce status` shows its address")
    add("down", cmd_down, "Stop everything `up` started.")
    add("status", cmd_status, "Show each part of the local stack: running, stopped or crashed.")
    p = add("submit", cmd_submit, "Publish one action to actions.requested; prints its action id.")
    p.add_argument("tool", help="tool name, e.g. send_email")
    p.add_argument("--params", default="{}", help="the tool's arguments as a JSON object")
    p.add_argument("--key", help="idempotency key (retries of one logical action reuse it)")
    p.add_argument("--natural-id", help="business identifier for write-once tools")
    p.add_argument("--agent", default="cli", help="agent id")
    p = add("approvals", cmd_approvals, "People's yes or no on held actions (a policy's approval rule): list "
                                        "them, approve or deny one, or serve the approvals page.")
    p.add_argument("action", choices=["list", "show", "approve", "deny", "serve", "token"],
                   help="list: what is held (--all: and decided); show ID: one and its verdicts; approve ID / "
                        "deny ID: your verdict, and what it did (exit 3: it changed nothing, e.g. someone "
                        "decided first); serve: the approvals page; token NAME: a sign-in link for an approver")
    p.add_argument("action_id", nargs="?", metavar="ID", help="the held action's id (token: the approver's name)")
    p.add_argument("--reason", default="", help="approve / deny: why, recorded with the verdict")
    p.add_argument("--as", dest="approver", help="the name on your verdicts (default: the secured principal, "
                                                 "else your login)")
    p.add_argument("--all", action="store_true", help="list: decided ones too")
    p.add_argument("--json", action="store_true", help="list: one JSON object per line")
    p.add_argument("--host", default="127.0.0.1", help="serve: address (default 127.0.0.1)")
    p.add_argument("--port", type=int, default=8470, help="serve: port (default 8470)")
    p.add_argument("--tokens", help="serve / token: the approvers' tokens file (default RUNONCE_HOME/approvers.tokens)")
    p.add_argument("--revoke", action="store_true", help="token NAME --revoke: the approver's link stops working")
    p = add("tail", cmd_tail, "Print a topic's records as readable lines or JSON: what analysts tap. "
                              "Example: runonce tail dropped --json --reason duplicate_key --since 1h | jq .")
    p.add_argument("topic", choices=["dropped", "approved", "dlq", "results", "requested", "held", "verdicts"])
    p.add_argument("-f", "--follow", action="store_true", help="keep reading new records")
    p.add_argument("-n", "--limit", type=int, default=0, help="stop after N records shown (0: no limit)")
    p.add_argument("--json", action="store_true", help="one JSON object per line (for jq, DuckDB, pandas)")
    p.add_argument("--tool", help="only this tool's records")
    p.add_argument("--reason", help="only decisions with this reason (e.g. duplicate_key, budget_exhausted)")
    p.add_argument("--agent", help="only this agent's decisions and requests")
    p.add_argument("--tenant", help="only this tenant's decisions and requests (docs/security.md)")
    p.add_argument("--since", help="from this broker time: ISO 8601 (2026-11-30T14:00:00Z) or a duration ago "
                                   "(15m, 2h, 7d); looked up in the broker's time index, not scanned")
    p.add_argument("--until", help="up to this broker time (same forms as --since)")
    p = add("export", cmd_export, "Write a topic's records for a time range to Parquet or JSON lines, one flat "
                                  "row each (for DuckDB, pandas), with tail's filters; progress on stderr. "
                                  "Example: runonce export dropped --since 24h --out drops.parquet")
    p.add_argument("topic", choices=["dropped", "approved", "dlq", "results", "requested", "held", "verdicts"])
    p.add_argument("--out", required=True, help="file to write (.parquet: Parquet; anything else: JSON lines)")
    p.add_argument("--format", choices=["parquet", "jsonl"], help="override the format the suffix implies")
    p.add_argument("--tool", help="only this tool's records")
    p.add_argument("--reason", help="only decisions with this reason")
    p.add_argument("--agent", help="only this agent's records")
    p.add_argument("--tenant", help="only this tenant's records")
    p.add_argument("--since", help="from this broker time: ISO 8601 or a duration ago (24h); via the time index")
    p.add_argument("--until", help="up to this broker time (same forms)")
    p = add("report", cmd_report, "Write one self-contained HTML page for a time range: drops by reason and tool "
                                  "over time, the most repeated keys and scopes, budgets exhausted, results in "
                                  "doubt, dead letters. Example: runonce report --html report.html --since 24h")
    p.add_argument("--html", required=True, help="the page to write")
    p.add_argument("--since", default="24h", help="from this broker time: ISO 8601 or a duration ago (default 24h)")
    p.add_argument("--until", help="up to this broker time (same forms; default now)")
    gateway_cli.add_commands(add)
    vendors_cli.add_commands(add)
    p = add("verify", cmd_verify, "The oracle: account for every requested record exactly once.")
    p.add_argument("--wait", type=float, default=0.0, help="seconds to wait for undecided records")
    add("stats", cmd_stats, "Requested, approved, dropped by reason and tool, unkeyed, dead-lettered.")
    add("demo", cmd_demo, "Start the local stack (as `up`), then replay the seed's incidents against sandbox "
                          "vendors, without and with runonce, counted from the vendors' ledgers.")
    return parser


#: the extra (pyproject.toml) that brings each optional package
_EXTRA_OF = {"rocksdict": "worker", "prometheus_client": "worker", "faust": "faust", "mode": "faust",
             "mcp": "gateway", "starlette": "gateway", "uvicorn": "gateway", "anyio": "gateway",
             "aiosmtpd": "sandbox", "trustme": "sandbox", "pyarrow": "export"}


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=logging.DEBUG if args.verbose else logging.WARNING,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    if not args.verbose:
        logging.getLogger("runonce.librdkafka").setLevel(logging.CRITICAL)
    try:
        settings = Settings.from_env()
        return int(args.fn(settings, args))
    except FatalError as exc:
        _say(f"error: {exc}")
        return 2
    except RunonceError as exc:
        _say(f"error: {exc}")
        return 1
    except ModuleNotFoundError as exc:
        extra = _EXTRA_OF.get((exc.name or "").partition(".")[0])
        if extra is None:
            raise
        _say(f"error: runonce {args.command} needs the {extra!r} extra: pip install 'runonce[{extra}]' "
             f"(no module {exc.name!r}; `pip install runonce` alone is the agent SDK)")
        return 2
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
