"""The ``runonce`` command line: one module per group of commands (``*_cli.py``), each adding
its own to the parser; this module builds the parser, the one Settings from the environment,
and turns errors into exit statuses. Every subcommand has --help."""

from __future__ import annotations

import argparse
import logging
import os
import sys
from typing import Sequence

from runonce.errors import FatalError, RunonceError
from runonce.ops import (
    actions_cli,
    analysts_cli,
    audit_cli,
    broker_cli,
    gateway_cli,
    stack_cli,
    vendors_cli,
    worker_cli,
)
from runonce.ops.commands import Command, say
from runonce.settings import Settings
from runonce.telemetry.setup import configure_from_env

#: the command groups, in the order ``runonce --help`` lists them
GROUPS = (broker_cli, worker_cli, stack_cli, actions_cli, analysts_cli, audit_cli, gateway_cli, vendors_cli)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="runonce",
        description="Deduplicate the actions AI agents take, on Kafka: approve each action once, "
                    "drop repeats with a reason. Settings come from RUNONCE_* environment variables "
                    "(RUNONCE_HOME, RUNONCE_BOOTSTRAP, RUNONCE_PARTITIONS, RUNONCE_POLICY_FILE, ...).",
    )
    parser.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def add(name: str, fn: Command, help_: str) -> argparse.ArgumentParser:
        p = sub.add_parser(name, help=help_, description=help_)
        p.set_defaults(fn=fn)
        return p

    for group in GROUPS:
        group.add_commands(add)
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
        configure_from_env(f"runonce-{args.command}", os.environ)
        return int(args.fn(settings, args))
    except FatalError as exc:
        say(f"error: {exc}")
        return 2
    except RunonceError as exc:
        say(f"error: {exc}")
        return 1
    except ModuleNotFoundError as exc:
        extra = _EXTRA_OF.get((exc.name or "").partition(".")[0])
        if extra is None:
            raise
        say(f"error: runonce {args.command} needs the {extra!r} extra: pip install 'runonce[{extra}]' "
             f"(no module {exc.name!r}; `pip install runonce` alone is the agent SDK)")
        return 2
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
