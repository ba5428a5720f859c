"""``runonce connectors`` (check the connectors file, probe each vendor), ``runonce executor``
(one vendor's executor) and ``runonce sandbox`` (the local sandbox vendors)."""

from __future__ import annotations

import argparse
import logging
import signal
from pathlib import Path

from runonce.errors import ConfigError
from runonce.ops.commands import LEVELS, Adder, instance_name, say
from runonce.settings import Settings


def _path(settings: Settings, args: argparse.Namespace) -> Path:
    return Path(args.file) if getattr(args, "file", None) else settings.connectors_path


def cmd_connectors(settings: Settings, args: argparse.Namespace) -> int:
    """check: one line per vendor, or the first error (vendor and field named); --probe: each
    vendor's harmless authenticated call. Exit 1 when the file or any probe fails."""
    from runonce.connectors.executor import registry
    from runonce.connectors.toolkit.base import Probe
    from runonce.connectors.toolkit.errors import ConnectorError

    if args.action == "fields":
        known = registry.kinds()
        for kind in [args.kind] if args.kind else sorted(known):
            spec = registry.spec_of(kind, known)
            print(f"## {kind}\n\n{spec.markdown() if spec is not None else '(its factory declares no fields)'}\n")
        return 0
    path = _path(settings, args)
    if getattr(args, "file", None) and not path.is_file():
        raise ConfigError(f"--file {path}: no such file")
    vendors = registry.load(path, settings.environ)
    unknown = sorted({vendor for vendor, _ in settings.vendor_rates} - vendors.keys())
    if unknown:
        raise ConfigError(f"RUNONCE_VENDOR_LIMITS names vendors not in {path}: {', '.join(unknown)}")
    failed = 0
    for name, vendor in sorted(vendors.items()):
        c = vendor.connector
        line = f"{name}: kind {vendor.kind}, tools {', '.join(sorted(c.tools))}, {c.capability.value}"
        if args.probe:
            if not isinstance(c, Probe):
                line += "; probe: this kind has none"
            else:
                try:
                    line += f"; probe: ok, {c.probe()}"
                except (ConnectorError, OSError) as exc:
                    failed += 1
                    line += f"; probe: FAILED, {exc}"
        print(line)
    print(f"{path}: {len(vendors)} vendors{f', {failed} probes failed' if failed else ', ok'}")
    return 1 if failed else 0


def cmd_executor(settings: Settings, args: argparse.Namespace) -> int:
    from runonce.connectors.executor import registry
    from runonce.connectors.executor.executor import StartPolicy, create_executor
    from runonce.connectors.executor.metrics import ExecutorMetrics
    from runonce.connectors.toolkit.config import read_tables
    from runonce.kafka.health import Health
    from runonce.ops.malloc_arenas import cap_malloc_arenas
    from runonce.ops.observe.serve import ProbeServer

    cap_malloc_arenas()  # before any thread (metrics server, librdkafka, RocksDB) allocates
    logging.getLogger("runonce").setLevel(LEVELS[args.loglevel])
    path = settings.connectors_path
    unknown = sorted({vendor for vendor, _ in settings.vendor_rates} - read_tables(path).keys())
    if unknown:
        raise ConfigError(f"RUNONCE_VENDOR_LIMITS names vendors not in {path}: {', '.join(unknown)}")
    vendor = registry.vendor(path, settings.environ, args.vendor, warn=lambda message: say(f"warning: {message}"))
    connector = vendor.connector
    metrics = ExecutorMetrics()
    slot = instance_name(args.slot, "executor")
    health = Health(f"executor {args.vendor}/{slot}")
    port = args.metrics_port if args.metrics_port is not None else settings.metrics_port
    if port:
        probes = ProbeServer(settings.metrics_host, port, metrics.registry, health)
        say(f"metrics on http://{probes.host}:{probes.port}/metrics, probes on /healthz and /readyz")
    say(f"executor {args.vendor}/{slot} ({vendor.kind}) for {', '.join(sorted(connector.tools))} "
         f"({connector.capability.value}) on {settings.kafka_access()}")
    start = StartPolicy.END if args.from_end else StartPolicy.EARLIEST
    create_executor(settings, connector, slot=slot, group=args.group, source_topic=args.source_topic,
                    start=start, metrics=metrics, rate=vendor.rate, health=health).run()
    return 0


def cmd_sandbox(settings: Settings, args: argparse.Namespace) -> int:
    from runonce.connectors.vendors.sandbox.local import LocalVendors

    folder = Path(args.dir) if args.dir else settings.home / "sandbox"
    local = LocalVendors(folder, http_port=args.http_port, smtp_port=args.smtp_port, host=args.host,
                         implicit_tls=args.implicit_tls, advertise=args.advertise).start()
    out = Path(args.write_connectors) if args.write_connectors else settings.connectors_path
    written = local.write_connectors(out)
    say(f"sandbox vendors on {local.http_url} (ledger: {local.http_url}/_ledger), SMTP on port {local.smtp.port} "
         f"({'implicit TLS' if args.implicit_tls else 'STARTTLS'} and AUTH); connectors file: {written}")
    try:
        signal.sigwait({signal.SIGINT, signal.SIGTERM})
    finally:
        local.stop()
    return 0


def add_commands(add: Adder) -> None:
    p = add("connectors", cmd_connectors,
            "The connectors file (RUNONCE_CONNECTORS, else RUNONCE_HOME/connectors.toml): which vendors the "
            "executors reach and how. check: validate it (each error names the vendor and the field); "
            "check --probe: also make each vendor's harmless authenticated call (Stripe GET /v1/balance; "
            "SMTP EHLO, STARTTLS, AUTH, no mail). Secrets are never printed. fields: each kind's fields "
            "(type, default, what it is), as docs/vendors.md shows them.")
    p.add_argument("action", choices=["check", "fields"])
    p.add_argument("--kind", help="fields: only this kind's")
    p.add_argument("--probe", action="store_true", help="call each vendor once, harmlessly; exit 1 if one fails")
    p.add_argument("--file", help="the connectors file (default: RUNONCE_CONNECTORS, else RUNONCE_HOME/connectors.toml)")
    p = add("executor", cmd_executor, "Run one vendor's executor: perform approved actions exactly once, through "
                                      "the connector the connectors file gives that vendor.")
    p.add_argument("--vendor", required=True, help="a vendor of the connectors file ([vendors.NAME])")
    p.add_argument("--slot", default="0", help="executor slot; names its stable transactional.id "
                                               "(@host: the host's name, for replicas of one service)")
    p.add_argument("--group", help="consumer group (default runonce-exec-VENDOR)")
    p.add_argument("--source-topic", default="actions.approved",
                   help="where approved actions come from (another topic only for tests and replays)")
    p.add_argument("--from-end", action="store_true",
                   help="where the group has no committed offset yet, start at the end of actions.approved "
                        "instead of its earliest record (skip the backlog); committed offsets always win")
    p.add_argument("--metrics-port", type=int, default=None,
                   help="serve Prometheus metrics on this port, with /healthz (live) and /readyz (ready) beside "
                        "them (RUNONCE_METRICS_HOST: the address, default 127.0.0.1)")
    p.add_argument("--loglevel", default="warn", choices=list(LEVELS),
                   help="info also logs where each assigned partition starts and why")
    p = add("sandbox", cmd_sandbox,
            "Run the local sandbox vendors in the foreground: Stripe's charges (a secret key required), an SMTP "
            "relay asking for STARTTLS and AUTH, and the sandbox-only vendors; writes the connectors file that "
            "reaches them, with their credentials and CA in --dir.")
    p.add_argument("--http-port", type=int, default=8787, help="the HTTP vendors' port (default 8787; 0: any free)")
    p.add_argument("--smtp-port", type=int, default=8025, help="the SMTP relay's port (default 8025; 0: any free)")
    p.add_argument("--host", default="127.0.0.1", help="the address to listen on (default 127.0.0.1)")
    p.add_argument("--advertise", help="the host name the connectors file uses (default: --host)")
    p.add_argument("--implicit-tls", action="store_true", help="SMTP with TLS from the first byte (as on 465)")
    p.add_argument("--dir", help="credentials, CA and ledger folder (default RUNONCE_HOME/sandbox)")
    p.add_argument("--write-connectors", metavar="PATH",
                   help="where to write the connectors file (default: RUNONCE_CONNECTORS, else "
                        "RUNONCE_HOME/connectors.toml)")

