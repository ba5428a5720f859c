"""docker-compose.yml cannot run here (no Docker engine); check it matches what the CLI runs."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml

from runonce.connectors.vendors.sandbox.names import SANDBOX_VENDORS
from runonce.devbroker.broker import SERVER_DEFAULTS
from runonce.errors import ConfigError
from runonce.ops.cli import build_parser
from runonce.ops.commands import HOST, instance_name

COMPOSE = yaml.safe_load((Path(__file__).parents[2] / "docker-compose.yml").read_text())


def runonce_commands(compose: dict[str, Any]) -> dict[str, str]:
    """Service -> runonce subcommand, for every service built from this repo; each command must
    parse with the real CLI parser (an unknown command or flag raises SystemExit)."""
    parser = build_parser()
    commands = {}
    for name, service in compose["services"].items():
        if "build" not in service:
            continue
        command = service.get("command") or []
        assert command and not command[0].startswith("-"), f"{name}: built from this repo but runs no subcommand"
        parser.parse_args(command)  # the image's entrypoint is runonce (Dockerfile)
        commands[name] = command[0]
    return commands


def test_the_image_runs_runonce_as_a_user_of_its_own_and_compose_builds_that_image() -> None:
    dockerfile = (Path(__file__).parents[2] / "Dockerfile").read_text()
    assert 'ENTRYPOINT ["runonce"]' in dockerfile and "USER 10001:10001" in dockerfile
    built = {name: s["image"] for name, s in COMPOSE["services"].items() if "build" in s}
    assert len(set(built.values())) == 1, built  # one image for every part


def check_stack(compose: dict[str, Any]) -> None:
    commands = runonce_commands(compose)
    assert {"topics", "worker", "executor", "sandbox"} <= set(commands.values()), commands


def test_the_stack_runs_topics_a_worker_executors_and_the_sandbox_through_the_real_cli() -> None:
    check_stack(COMPOSE)


def test_the_check_fails_on_a_stack_without_runonce_services_or_with_an_unknown_flag() -> None:
    with pytest.raises(AssertionError):
        check_stack({"services": {"kafka": COMPOSE["services"]["kafka"]}})
    broken = copy.deepcopy(COMPOSE)
    broken["services"]["worker"]["command"].append("--no-such-flag")
    with pytest.raises(SystemExit):
        check_stack(broken)


def test_broker_settings_match_the_local_broker() -> None:
    env = COMPOSE["services"]["kafka"]["environment"]
    for key in ("offsets.topic.replication.factor", "transaction.state.log.replication.factor",
                "transaction.state.log.min.isr", "group.initial.rebalance.delay.ms", "auto.create.topics.enable"):
        assert str(env["KAFKA_" + key.upper().replace(".", "_")]) == SERVER_DEFAULTS[key], key
    assert env["KAFKA_PROCESS_ROLES"] == SERVER_DEFAULTS["process.roles"]


def test_partitions_agree() -> None:
    assert COMPOSE["services"]["topics"]["command"][-1] == COMPOSE["services"]["worker"]["environment"]["RUNONCE_PARTITIONS"]


def test_an_executor_service_for_every_vendor() -> None:
    from runonce.connectors.vendors.sandbox.names import SANDBOX_VENDORS

    vendors = {svc["command"][2] for name, svc in COMPOSE["services"].items() if name.startswith("executor-")}
    assert vendors == set(SANDBOX_VENDORS)


def _flag(command: list[str], flag: str) -> str | None:
    return command[command.index(flag) + 1] if flag in command else None


def test_workers_and_executors_scale_by_count_without_edits() -> None:
    """`docker compose up --scale worker=N --scale executor-X=N`: each replica must name itself
    (a shared transactional.id fences, a shared RocksDB folder corrupts) and keep its state apart."""
    services = COMPOSE["services"]
    named_volumes = set(COMPOSE.get("volumes") or {})
    scaled = {name: s for name, s in services.items() if runonce_commands({"services": {name: s}}).get(name)
              in ("worker", "executor")}
    assert "worker" in scaled and sum(1 for n in scaled if n.startswith("executor-")) == len(SANDBOX_VENDORS)
    for name, service in scaled.items():
        command = service["command"]
        identity = _flag(command, "--name") if command[0] == "worker" else _flag(command, "--slot")
        assert identity == HOST, f"{name}: replicas would share {identity!r}"
        for volume in service.get("volumes", []):
            source = volume.split(":")[0] if ":" in volume else None
            if volume.endswith(":ro"):  # configuration read by every replica (the connectors file), not state
                continue
            assert source is None or (source not in named_volumes and not source.startswith(("/", "."))), (
                f"{name}: volume {volume!r} would be shared by every replica")
    assert any(":" not in v for v in services["worker"].get("volumes", [])), "worker state needs a volume per replica"


def test_host_names_a_replica_and_bad_names_are_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    import socket

    monkeypatch.setattr(socket, "gethostname", lambda: "3f2a9c1b7d0e")
    assert instance_name(HOST, "worker") == "3f2a9c1b7d0e"
    assert instance_name("worker-0", "worker") == "worker-0"
    with pytest.raises(ConfigError):
        instance_name("../other", "worker")



def test_compose_runs_each_part_hardened_after_the_topics_exist() -> None:
    """As the chart runs its pods: a read-only root, every capability dropped, no privilege
    escalation; the worker, the executors and the gateway start once the topics Job's twin has
    finished, and the worker is a static member. Catches a service that drops any of these."""
    services = COMPOSE["services"]
    parts = {name: s for name, s in services.items() if runonce_commands({"services": {name: s}}).get(name)
             in ("worker", "executor", "gateway", "topics")}
    assert "gateway" in parts and "worker" in parts
    for name, service in parts.items():
        assert service.get("read_only") is True and service.get("cap_drop") == ["ALL"], name
        assert "no-new-privileges:true" in service.get("security_opt", []), name
        if name != "topics":
            assert service["depends_on"]["topics"]["condition"] == "service_completed_successfully", name
    assert services["worker"]["environment"]["RUNONCE_STATIC_MEMBERSHIP"] == "true"
