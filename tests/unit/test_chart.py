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
    done = run("lint", "--strict", tmp=tmp_path)
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


# -- what a real cluster shows (issue: the chart installed unmodified; tests/cluster/ installs it) --

SECURED = {**VALUES, "kafka": {"bootstrapServers": "kafka:9093", "partitions": 6, "configSecret": "runonce-kafka",
                               "tlsSecret": "runonce-kafka-tls",
                               "sasl": {"passwordKey": "password",
                                        "worker": {"username": "stream", "passwordSecret": "runonce-stream"},
                                        "executors": {"username": "executor", "passwordSecret": "runonce-executor"},
                                        "gateway": {"username": "agent", "passwordSecret": "runonce-agent"},
                                        "gatewayReader": {"username": "agent-reader",
                                                          "passwordSecret": "runonce-agent-reader"},
                                        "topics": {"username": "admin", "passwordSecret": "runonce-admin"}}}}


def pods(docs: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Every pod template the chart renders, by its owner's name."""
    return {d["metadata"]["name"]: d["spec"]["template"]["spec"] for d in docs
            if d["kind"] in ("StatefulSet", "Deployment", "Job")}


def env_of(pod: dict[str, Any]) -> dict[str, str]:
    return {e["name"]: e.get("value", "") for e in pod["containers"][0]["env"]}


def test_the_topics_hook_needs_nothing_the_release_makes(tmp_path: Path) -> None:
    """Helm creates a release's resources only after its pre-install hooks succeed: a hook pod that
    mounts the release's ConfigMap (or runs as its ServiceAccount) waits for it until Helm's
    timeout. Catches the topics Job mounting ``<release>-config`` (the first ``helm install``
    of a real cluster hung on it)."""
    docs = render(tmp_path, SECURED)
    hooks = [d for d in docs if "helm.sh/hook" in d["metadata"].get("annotations", {})]
    made = {(d["kind"], d["metadata"]["name"]) for d in docs if d not in hooks}
    (job,) = [d for d in hooks if d["kind"] == "Job"]
    pod = job["spec"]["template"]["spec"]
    used = {("ConfigMap", v["configMap"]["name"]) for v in pod["volumes"] if "configMap" in v}
    used |= {("Secret", v["secret"]["secretName"]) for v in pod["volumes"] if "secret" in v}
    used.add(("ServiceAccount", pod.get("serviceAccountName", "default")))
    assert not used & made, used & made
    assert pod["automountServiceAccountToken"] is False


def test_every_pod_meets_the_restricted_pod_security_standard(tmp_path: Path) -> None:
    """What ``pod-security.kubernetes.io/enforce: restricted`` checks (tests/cluster/ has the real
    apiserver refuse or admit them). Catches a pod without a seccomp profile (every pod of
    today's chart was refused), a container that may escalate or keeps a capability."""
    for name, pod in pods(render(tmp_path, SECURED)).items():
        assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}, name
        assert pod["securityContext"]["runAsNonRoot"] is True, name
        for container in pod["containers"]:
            context = container["securityContext"]
            assert context["allowPrivilegeEscalation"] is False and context["capabilities"]["drop"] == ["ALL"], name
        assert not any("hostPath" in v for v in pod.get("volumes", [])), name


def test_a_platform_that_assigns_the_uid_can_have_it(tmp_path: Path) -> None:
    """OpenShift's restricted SCC gives each namespace its own uid range and refuses a fixed one.
    Catches a uid the chart writes whatever the values say."""
    values = {**VALUES, "podSecurityContext": {"runAsUser": None, "runAsGroup": None, "fsGroup": None}}
    for name, pod in pods(render(tmp_path, values)).items():
        assert not {"runAsUser", "runAsGroup", "fsGroup"} & set(pod["securityContext"]), name
        assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}, name


def test_each_component_runs_as_its_own_principal(tmp_path: Path) -> None:
    """The ACL design (runonce/kafka/acls.toml) holds only if each component connects as its own
    principal. Catches the gateway, which faces agents, given the stream worker's principal
    (which may write actions.approved), or any pod mounting another's password."""
    sets = pods(render(tmp_path, SECURED))
    expected = {"r1-runonce-worker": ("stream", "runonce-stream"),
                "r1-runonce-executor-payments": ("executor", "runonce-executor"),
                "r1-runonce-gateway": ("agent", "runonce-agent"),
                "r1-runonce-topics": ("admin", "runonce-admin")}
    for name, (user, secret) in expected.items():
        pod = sets[name]
        assert env_of(pod)["RUNONCE_SASL_USERNAME"] == user, name
        secrets = {v["secret"]["secretName"] for v in pod["volumes"] if "secret" in v}
        assert secret in secrets, name
        others = {s for _, (_, s) in expected.items() if s != secret}
        assert not secrets & others, (name, secrets & others)
    gateway = sets["r1-runonce-gateway"]
    assert env_of(gateway)["RUNONCE_READER_SASL_USERNAME"] == "agent-reader"
    assert "runonce-agent-reader" in {v["secret"]["secretName"] for v in gateway["volumes"] if "secret" in v}


def test_drain_times_cover_the_work_in_hand(tmp_path: Path) -> None:
    """An executor stopped mid-batch needs its lease, the slowest vendor call and the commit; the
    gateway, the preStop pause and the longest wait a call may be in. Catches today's 60 s for
    an executor (5 + 30 + 60 s of work) and 30 s for a gateway whose calls wait 60 s."""
    from runonce.connectors.executor.lease import Lease
    from runonce.settings import Settings

    settings = Settings.from_env({})
    vendor_timeout_s = 30.0  # a connector's timeout_s default (runonce/connectors/toolkit/config.py)
    executor_s = (Lease.of_session(settings.executor_session_timeout_ms).length_s + vendor_timeout_s
                  + settings.executor_txn_timeout_ms / 1000)
    sets = pods(render(tmp_path, SECURED))
    assert sets["r1-runonce-executor-payments"]["terminationGracePeriodSeconds"] >= executor_s
    gateway = sets["r1-runonce-gateway"]
    (container,) = gateway["containers"]
    pause_s = container["lifecycle"]["preStop"]["sleep"]["seconds"]
    wait_s = float(container["args"][container["args"].index("--max-wait-s") + 1])
    assert pause_s > 0 and gateway["terminationGracePeriodSeconds"] >= pause_s + wait_s


def test_what_real_clusters_set_can_be_set(tmp_path: Path) -> None:
    """Catches each value a platform team needs and the chart refused or ignored: extra env and
    envFrom, a pull secret, an image by digest, a ServiceAccount without a token, requests on
    every container (a namespace with a ResourceQuota refuses pods without), spread
    constraints, a priority class, and Helm's ``global`` (set whenever the chart is a subchart)."""
    digest = "sha256:" + "a" * 64
    values = {**VALUES, "global": {"imageRegistry": "r.example"}, "image": {"digest": digest},
              "imagePullSecrets": [{"name": "regcred"}], "priorityClassName": "agents",
              "extraEnv": [{"name": "RUNONCE_LOG_JSON", "value": "true"}],
              "envFrom": [{"secretRef": {"name": "more"}}],
              "topologySpreadConstraints": [{"maxSkew": 1, "topologyKey": "kubernetes.io/hostname",
                                             "whenUnsatisfiable": "ScheduleAnyway"}]}
    docs = render(tmp_path, values)
    (account,) = of_kind(docs, "ServiceAccount").values()
    assert account["automountServiceAccountToken"] is False
    for name, pod in pods(docs).items():
        (container,) = pod["containers"]
        assert container["image"].endswith("@" + digest), name
        assert env_of(pod)["RUNONCE_LOG_JSON"] == "true" and container["envFrom"] == [{"secretRef": {"name": "more"}}]
        assert pod["imagePullSecrets"] == [{"name": "regcred"}] and pod["priorityClassName"] == "agents", name
        assert pod["automountServiceAccountToken"] is False, name
        assert container["resources"]["requests"]["memory"] and container["resources"]["limits"]["memory"], name
        (spread,) = pod["topologySpreadConstraints"]
        assert spread["labelSelector"]["matchLabels"]["app.kubernetes.io/instance"] == "r1", name


def test_keda_reads_the_lag_as_the_workers_principal_over_tls(tmp_path: Path) -> None:
    """Catches a KEDA trigger with no SASL/TLS settings: on SASL_SSL it cannot read the lag and
    never scales."""
    docs = render(tmp_path, {**SECURED, "worker": {"keda": {"enabled": True}}})
    (scaled,) = of_kind(docs, "ScaledObject").values()
    (auth,) = of_kind(docs, "TriggerAuthentication").values()
    assert scaled["spec"]["triggers"][0]["authenticationRef"]["name"] == auth["metadata"]["name"]
    refs = {r["parameter"]: r for r in auth["spec"]["secretTargetRef"]}
    assert refs["password"]["name"] == "runonce-stream" and refs["ca"]["name"] == "runonce-kafka-tls"
    keda = of_kind(docs, "Secret")[refs["sasl"]["name"]]["stringData"]
    assert keda == {"sasl": "scram_sha512", "username": "stream", "tls": "enable"}


def test_strimzi_topics_go_where_the_topic_operator_watches(tmp_path: Path) -> None:
    """Catches KafkaTopics rendered in the release's namespace (the operator watches the Kafka
    cluster's) and only at v1beta2 (gone in Strimzi 1.0)."""
    docs = render(tmp_path, {**VALUES, "topics": {"strimzi": {"enabled": True, "cluster": "main",
                                                               "namespace": "kafka"}}})
    topics = of_kind(docs, "KafkaTopic")
    assert topics and all(t["metadata"]["namespace"] == "kafka" and t["apiVersion"] == "kafka.strimzi.io/v1"
                          for t in topics.values())


def test_long_release_names_keep_every_statefulset_within_52_characters(tmp_path: Path) -> None:
    """A StatefulSet's pods carry ``controller-revision-hash: <name>-<10 characters>``, a label
    value of at most 63: past 52 characters no pod is made. Catches names of 57-63."""
    values = {**VALUES, "connectors": {"vendors": {**VALUES["connectors"]["vendors"],
                                                   "a_rather_long_vendor_name": {"kind": "stripe"}}}}
    done = run("template", "production-agents-eu-west-1-blue", values=values, tmp=tmp_path)
    assert done.returncode == 0, done.stderr
    sets = [d for d in yaml.safe_load_all(done.stdout) if d and d["kind"] == "StatefulSet"]
    names = [s["metadata"]["name"] for s in sets]
    assert len(sets) == 4 and len(set(names)) == 4 and all(len(n) <= 52 for n in names), names


def test_the_down_alert_sees_the_pods_a_podmonitor_scrapes(tmp_path: Path) -> None:
    """A PodMonitor's job label is ``<namespace>/<name>`` unless relabelled: ``RunonceComponentDown``
    (``up{job=~"runonce-.*"}``) would never fire on Kubernetes. Catches the PodMonitor without
    the relabelling to ``runonce-<component>``, the names `runonce up` scrapes under."""
    import re

    docs = render(tmp_path, {**VALUES, "metrics": {"podMonitor": {"enabled": True}}})
    (monitor,) = of_kind(docs, "PodMonitor").values()
    rules = yaml.safe_load((ROOT / "runonce/ops/observe/alerts.yml").read_text())
    (down,) = [r for g in rules["groups"] for r in g["rules"] if r.get("alert") == "RunonceComponentDown"]
    pattern = re.search(r'job=~"([^"]+)"', down["expr"])
    assert pattern is not None
    for endpoint in monitor["spec"]["podMetricsEndpoints"]:
        (relabel,) = [r for r in endpoint["relabelings"] if r["targetLabel"] == "job"]
        component = relabel["sourceLabels"] == ["__meta_kubernetes_pod_label_app_kubernetes_io_component"]
        assert component and re.fullmatch(pattern[1], relabel["replacement"].replace("$1", "worker"))


def test_the_chart_folder_stands_alone(tmp_path: Path) -> None:
    """A chart is copied, packaged and pushed as its folder. Catches ``files/alerts.yml`` as a
    symlink out of the chart (broken once copied) and the copy drifting from the rules
    `runonce up` loads."""
    copy = tmp_path / "chart"
    shutil.copytree(CHART, copy, symlinks=True)
    alerts = copy / "files" / "alerts.yml"
    assert not alerts.is_symlink() and alerts.read_bytes() == (ROOT / "runonce/ops/observe/alerts.yml").read_bytes()
    path = tmp_path / "values.yaml"
    path.write_text(yaml.safe_dump({**VALUES, "metrics": {"prometheusRule": {"enabled": True}}}))
    done = subprocess.run([helm(), "package", str(copy), "-d", str(tmp_path)], capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 0, done.stderr


def test_the_signing_key_is_mounted_where_receipts_are_written_and_nowhere_else(tmp_path: Path) -> None:
    """``receipts.keySecret``: the worker and each executor read the key from a file of the Secret
    (RUNONCE_RECEIPTS_KEY, docs/receipts.md); the gateway, which faces agents, and the topics
    Job never mount it. Without the value no pod signs."""
    docs = render(tmp_path, {**VALUES, "receipts": {"keySecret": "runonce-receipts"}})
    claims = {d["metadata"]["name"]: {c["metadata"]["name"] for c in d["spec"].get("volumeClaimTemplates", [])}
              for d in docs if d["kind"] == "StatefulSet"}
    signed = pods(docs)
    for name, pod in signed.items():
        declared = {v["name"] for v in pod["volumes"]} | claims.get(name, set())
        assert {m["name"] for c in pod["containers"] for m in c.get("volumeMounts", [])} <= declared, name
        signs = name in ("r1-runonce-worker", "r1-runonce-executor-payments", "r1-runonce-executor-email")
        mounted = [v for v in pod["volumes"] if v.get("secret", {}).get("secretName") == "runonce-receipts"]
        assert bool(mounted) is signs, name
        if signs:
            mount = next(m for m in pod["containers"][0]["volumeMounts"] if m["name"] == mounted[0]["name"])
            key = env_of(pod)["RUNONCE_RECEIPTS_KEY"]
            assert key == f"{mount['mountPath']}/{mounted[0]['secret']['items'][0]['path']}", name
        else:
            assert "RUNONCE_RECEIPTS_KEY" not in env_of(pod), name
    assert not any("RUNONCE_RECEIPTS_KEY" in env_of(pod) for pod in pods(render(tmp_path)).values())
