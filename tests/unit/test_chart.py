"""The Helm chart (deploy/helm/runonce), linted and rendered by Helm itself (scripts/setup.sh
installs it from the Go module proxy), checked against what the code needs.

Catches: a value the schema lets through misspelt (``worker.replicaz``: the chart would run
with the default in silence); a vendor of the connectors file without its executor; the
connectors file rendered as TOML runonce cannot read; the worker without its volume, its
probes, its name from the pod, or its static membership; KEDA scaling workers past the
partition count; the Strimzi topics drifting from runonce/kafka/topics.py; a secret's value
written into a ConfigMap."""

from __future__ import annotations

import os
import shutil
import subprocess
import tomllib
from pathlib import Path
from typing import Any

import pytest
import yaml

from runonce.kafka.topics import TOPICS

ROOT = Path(__file__).parents[2]
CHART = ROOT / "deploy" / "helm" / "runonce"
VALUES = {"kafka": {"bootstrapServers": "kafka:9092", "partitions": 6},
          "gateway": {"tokensSecret": "runonce-tokens"},
          "connectors": {"vendors": {
              "payments": {"kind": "stripe", "api_key": {"file": "/var/run/secrets/runonce/payments/api_key"}},
              "email": {"kind": "smtp", "host": "smtp.example.com", "username": "agent",
                        "password": {"file": "/var/run/secrets/runonce/email/password"},
                        "sender": "agent@example.com"}}},
          "executors": {"vendors": {"payments": {"replicas": 2, "secret": "runonce-payments"},
                                    "email": {"secret": "runonce-email"}}}}


def helm() -> str:
    found = shutil.which("helm") or str(Path(os.environ.get("RUNONCE_CACHE_DIR", Path.home() / ".cache" / "runonce"))
                                        / "bin" / "helm")
    if not Path(found).exists():
        pytest.fail("helm is not installed: bash scripts/setup.sh installs it (helm.sh/helm/v4 from the Go module proxy)")
    return found


def run(*args: str, values: dict[str, Any] | None = None, tmp: Path) -> subprocess.CompletedProcess[str]:
    path = tmp / "values.yaml"
    path.write_text(yaml.safe_dump(values if values is not None else VALUES))
    return subprocess.run([helm(), *args, str(CHART), "-f", str(path)], capture_output=True, text=True, timeout=60)


def render(tmp: Path, values: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    done = run("template", "r1", values=values, tmp=tmp)
    assert done.returncode == 0, done.stderr
    return [d for d in yaml.safe_load_all(done.stdout) if d]


def of_kind(docs: list[dict[str, Any]], kind: str) -> dict[str, dict[str, Any]]:
    return {d["metadata"]["name"]: d for d in docs if d["kind"] == kind}


def test_helm_lints_the_chart(tmp_path: Path) -> None:
    done = run("lint", tmp=tmp_path)
    assert done.returncode == 0 and "0 chart(s) failed" in done.stdout, done.stdout + done.stderr


@pytest.mark.parametrize("values, said", [
    ({**VALUES, "worker": {"replicaz": 2}}, "replicaz"),
    ({**VALUES, "gateway": {"enabled": True, "tokensSecret": "t", "port": "8765"}}, "port"),
    ({key: value for key, value in VALUES.items() if key != "kafka"}, "kafka.bootstrapServers is required"),
    ({**VALUES, "executors": {"vendors": {"paymnts": {"replicas": 1}}}}, "no vendor paymnts in connectors.vendors"),
])
def test_a_wrong_value_fails_the_install_naming_it(tmp_path: Path, values: dict[str, Any], said: str) -> None:
    done = run("template", "r1", values=values, tmp=tmp_path)
    assert done.returncode != 0 and said in done.stderr, done.stderr


def test_each_vendor_gets_an_executor_and_the_connectors_file_reads_as_runonce_reads_it(tmp_path: Path) -> None:
    docs = render(tmp_path)
    sets = of_kind(docs, "StatefulSet")
    assert set(sets) == {"r1-runonce-worker", "r1-runonce-executor-payments", "r1-runonce-executor-email"}
    payments = sets["r1-runonce-executor-payments"]
    assert payments["spec"]["replicas"] == 2 and sets["r1-runonce-executor-email"]["spec"]["replicas"] == 1
    container = payments["spec"]["template"]["spec"]["containers"][0]
    assert container["args"][:5] == ["executor", "--vendor", "payments", "--slot", "@host"]
    mounts = {m["name"]: m["mountPath"] for m in container["volumeMounts"]}
    assert mounts["vendor-secrets"] == "/var/run/secrets/runonce/payments"
    (config,) = of_kind(docs, "ConfigMap").values()
    connectors = tomllib.loads(config["data"]["connectors.toml"])
    assert connectors == {"vendors": VALUES["connectors"]["vendors"]}
    assert "api_key = " not in config["data"]["connectors.toml"].replace("[vendors.payments.api_key]", "")


def test_a_vendor_named_with_an_underscore_runs_under_a_kubernetes_name_but_keeps_its_own(tmp_path: Path) -> None:
    """runonce lets a vendor be any TOML key (the demo's is ``orders_db``); Kubernetes names
    allow no "_". Catches: the schema refusing the name, or ``--vendor`` given the DNS form (the
    executor would find no such vendor in the file)."""
    table = {"kind": "postgres", "dsn": {"file": "/var/run/secrets/runonce/orders_db/dsn"}}
    docs = render(tmp_path, {**VALUES, "connectors": {"vendors": {"orders_db": table}}, "executors": {}})
    executor = of_kind(docs, "StatefulSet")["r1-runonce-executor-orders-db"]
    (container,) = executor["spec"]["template"]["spec"]["containers"]
    assert container["args"][:3] == ["executor", "--vendor", "orders_db"]
    two = {"orders_db": table, "orders-db": table}
    done = run("template", "r1", values={**VALUES, "connectors": {"vendors": two}, "executors": {}}, tmp=tmp_path)
    assert done.returncode != 0 and "both name their executor \"r1-runonce-executor-orders-db\"" in done.stderr, done.stderr


def test_the_worker_is_a_stateful_static_member_probed_on_its_metrics_port(tmp_path: Path) -> None:
    docs = render(tmp_path)
    worker = of_kind(docs, "StatefulSet")["r1-runonce-worker"]
    pod = worker["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    assert container["args"][:3] == ["worker", "--name", "@host"]
    env = {e["name"]: e.get("value") for e in container["env"]}
    assert env["RUNONCE_STATIC_MEMBERSHIP"] == "true" and env["RUNONCE_METRICS_HOST"] == "0.0.0.0"
    assert container["livenessProbe"]["httpGet"]["path"] == "/healthz"
    assert container["readinessProbe"]["httpGet"]["path"] == "/readyz"
    assert {m["mountPath"] for m in container["volumeMounts"]} >= {"/var/lib/runonce", "/tmp"}
    assert worker["spec"]["volumeClaimTemplates"][0]["metadata"]["name"] == "state"
    assert pod["securityContext"]["runAsNonRoot"] is True and pod["terminationGracePeriodSeconds"] >= 30
    assert "r1-runonce-worker" in of_kind(docs, "PodDisruptionBudget")


def test_keda_never_scales_workers_past_the_partition_count(tmp_path: Path) -> None:
    docs = render(tmp_path, {**VALUES, "worker": {"keda": {"enabled": True, "maxReplicas": 20}}})
    (scaled,) = of_kind(docs, "ScaledObject").values()
    assert scaled["spec"]["maxReplicaCount"] == 6
    assert "replicas" not in of_kind(docs, "StatefulSet")["r1-runonce-worker"]["spec"]  # KEDA owns the count


def test_the_strimzi_topics_are_runonces_topics_with_their_configs(tmp_path: Path) -> None:
    docs = render(tmp_path, {**VALUES, "topics": {"job": False, "strimzi": {"enabled": True, "cluster": "prod"}}})
    rendered = {d["spec"]["topicName"]: d["spec"]["config"] for d in docs if d["kind"] == "KafkaTopic"}
    assert rendered == {t.name: dict(t.configs) for t in TOPICS}
    assert "Job" not in {d["kind"] for d in docs}


def test_the_alert_rules_are_the_ones_runonce_up_loads(tmp_path: Path) -> None:
    docs = render(tmp_path, {**VALUES, "metrics": {"prometheusRule": {"enabled": True}, "podMonitor": {"enabled": True}}})
    (rule,) = of_kind(docs, "PrometheusRule").values()
    shipped = yaml.safe_load((ROOT / "runonce/ops/observe/alerts.yml").read_text())
    assert rule["spec"] == shipped


def test_the_chart_runs_what_docker_compose_runs(tmp_path: Path) -> None:
    """docker-compose.yml and the chart run one image with the same commands (the chart adds
    ``--loglevel info``): the two stay in step."""
    compose = yaml.safe_load((ROOT / "docker-compose.yml").read_text())["services"]
    sets = of_kind(render(tmp_path), "StatefulSet")
    worker = sets["r1-runonce-worker"]["spec"]["template"]["spec"]["containers"][0]["args"]
    executor = sets["r1-runonce-executor-payments"]["spec"]["template"]["spec"]["containers"][0]["args"]
    assert worker[:3] == compose["worker"]["command"]
    assert executor[:5] == compose["executor-payments"]["command"]


def test_the_rendered_connectors_file_builds_every_vendor_integers_included(tmp_path: Path) -> None:
    """Helm writes every number of its values as a float (``port = 587.0``). Catches the
    connectors reader refusing those (an SMTP executor crash-looping on "port: must be a
    positive integer, got 587.0", as the pods proof found)."""
    from runonce.connectors.executor import registry

    secret = tmp_path / "secret"
    secret.write_text("s3cret")
    vendors = {"payments": {"kind": "stripe", "api_key": {"file": str(secret)}, "timeout_s": 20,
                            "rate": {"per_s": 50, "burst": 5, "in_flight": 32}},
               "email": {"kind": "smtp", "host": "smtp.example.com", "port": 587, "username": "agent",
                         "password": {"file": str(secret)}, "sender": "agent@example.com"}}
    (config,) = of_kind(render(tmp_path, {**VALUES, "connectors": {"vendors": vendors},
                                          "executors": {"vendors": {}}}), "ConfigMap").values()
    path = tmp_path / "connectors.toml"
    path.write_text(config["data"]["connectors.toml"])
    assert "port = 587.0" in path.read_text()  # what Helm writes
    built = registry.load(path, {})
    assert built["email"].connector.relay.port == 587  # type: ignore[attr-defined]
    assert built["payments"].rate is not None and built["payments"].rate.in_flight == 32
