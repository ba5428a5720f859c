"""docker-compose.yml cannot run here (no Docker engine); check it matches what the CLI runs."""

from __future__ import annotations

from pathlib import Path

import yaml

from runonce.cli import build_parser
from runonce.kafka.broker import SERVER_DEFAULTS

COMPOSE = yaml.safe_load((Path(__file__).parents[2] / "docker-compose.yml").read_text())


def test_every_runonce_service_runs_a_real_cli_command() -> None:
    parser = build_parser()
    for name, service in COMPOSE["services"].items():
        command = service.get("command")
        if not command or command[0] != "runonce":
            continue
        args = parser.parse_args(command[1:])  # raises SystemExit on an unknown command or flag
        assert callable(args.fn), name


def test_broker_settings_match_the_local_broker() -> None:
    env = COMPOSE["services"]["kafka"]["environment"]
    for key in ("offsets.topic.replication.factor", "transaction.state.log.replication.factor",
                "transaction.state.log.min.isr", "group.initial.rebalance.delay.ms", "auto.create.topics.enable"):
        assert str(env["KAFKA_" + key.upper().replace(".", "_")]) == SERVER_DEFAULTS[key], key
    assert env["KAFKA_PROCESS_ROLES"] == SERVER_DEFAULTS["process.roles"]


def test_partitions_agree() -> None:
    assert COMPOSE["services"]["topics"]["command"][-1] == COMPOSE["services"]["worker"]["environment"]["RUNONCE_PARTITIONS"]


def test_an_executor_service_for_every_vendor() -> None:
    from runonce.connectors.registry import FACTORIES

    vendors = {svc["command"][3] for name, svc in COMPOSE["services"].items() if name.startswith("executor-")}
    assert vendors == set(FACTORIES)
