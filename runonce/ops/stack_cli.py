"""``runonce up``, ``down``, ``status`` (the local stack in the background) and ``demo``."""

from __future__ import annotations

import argparse

from runonce.ops.commands import Adder, say
from runonce.settings import Settings


def cmd_up(settings: Settings, args: argparse.Namespace) -> int:
    """Broker, topics, stream worker, sandbox vendors and executors in the background."""
    from runonce.ops.stack import Stack

    Stack(settings, progress=say).up(with_executors=not getattr(args, "no_executors", False),
                                      secure=getattr(args, "secure", False), observe=getattr(args, "observe", False))
    return 0


def cmd_down(settings: Settings, args: argparse.Namespace) -> int:
    from runonce.ops.stack import Stack

    print(Stack(settings, progress=say).down().describe())
    return 0


def cmd_status(settings: Settings, args: argparse.Namespace) -> int:
    from runonce.ops.stack import Stack

    rows = Stack(settings).status()
    for name, state in rows:
        print(f"{name:<22} {state}")
    return 0 if all("running" in state for _, state in rows) else 1


def cmd_demo(settings: Settings, args: argparse.Namespace) -> int:
    from runonce.devbroker.users import SUPER_USER
    from runonce.ops.demo import DemoAccess, format_table, run_demo, surprises
    from runonce.ops.stack import Stack

    stack = Stack(settings, progress=say)
    stack.up(with_executors=False)  # the demo runs its own sandboxes and executors
    # On a secured stack each part connects as its own principal; else these are all one.
    access = DemoAccess(agent=stack.access_as("agent"), approver=stack.access_as("approver"),
                        observer=stack.access_as(SUPER_USER), executor=stack.access_as("executor"),
                        executor_env=stack.env_as("executor"))
    say("replaying the seed's incidents, straight to the sandbox vendors and then through runonce ...")
    rows = run_demo(settings, progress=say, access=access)
    print(format_table(rows))
    wrong = surprises(rows)
    for surprise in wrong:
        say(f"demo: NOT AS EXPECTED: {surprise}")
    return 1 if wrong else 0


def add_commands(add: Adder) -> None:
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
    add("demo", cmd_demo, "Start the local stack (as `up`), then replay the seed's incidents against sandbox "
                          "vendors, without and with runonce, counted from the vendors' ledgers.")
