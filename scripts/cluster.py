"""The Helm chart installed, unmodified, on the real Kubernetes of scripts/kube.sh, as a platform
team installs it:

    bash scripts/cluster.sh                  # up the cluster, install, check, leave it running
    bash scripts/cluster.sh --uninstall      # and uninstall at the end
    bash scripts/cluster.sh --storm --cut --uninstall   # and the proofs below (the full storm)
    bash scripts/cluster.sh --storm --short --cut --uninstall   # one of each step, shorter
    bash scripts/cluster.sh --incidents --uninstall   # the seed's incidents through the gateway's Service
    bash scripts/cluster.sh --validate       # only the rendered chart validated by the API server (CI runs it)

What it does, each step as a platform team would:
- the dev broker secured (SASL_SSL + SCRAM, deny by default, runonce/kafka/acls.toml's grants),
  listening on the pods' bridge address (RUNONCE_BROKER_HOST), with a principal per component;
- the sandbox vendors (payments: Stripe's API shape; smtp: an SMTP relay with STARTTLS) on the same
  address;
- the image built by scripts/image.sh, loaded into the node's containerd (no registry);
- a namespace labelled ``pod-security.kubernetes.io/enforce: restricted``;
- the Kafka settings, each principal's password, the gateway's tokens and each vendor's
  credentials as Secrets made with ``kubectl create secret`` (the chart never holds a secret);
- ``helm install --wait`` of deploy/helm/runonce as it is in the repository;
- then an agent's call through the gateway's Service by its cluster DNS name, from a pod of the
  namespace (``runonce`` in the image, as an agent's container would be), answered ``succeeded``,
  and the sandbox's ledger showing the charge once.

With ``--incidents``: the seed's incidents, the table ``scripts/run.sh`` prints, with the agents
in a pod of the namespace calling the gateway's HTTP API by its Service's cluster DNS name, the
chart's stream worker deciding and an executor pod for every sandbox vendor performing (and for
the refund, a PostgreSQL on the node's bridge address, TLS verified, as the connector asks off
the machine); each effect counted on the sandbox's ledgers and the refunds table.

With ``--storm``: a burst of the workload's actions (testkit/workload.py: families of repeats,
natural ids, retries) published as the agent principal, and meanwhile what a platform team and
a node do to the release: ``kubectl scale`` of the stream worker 1 -> 3, ``kubectl delete pod
--grace-period=0 --force`` of a worker and of the payments executor (the StatefulSet makes the
pod again at once, beside a container that may still run: a zombie its fencing must stop),
``kubectl rollout restart`` of the executors, and a ``helm upgrade`` that changes a value (a pod
annotation: every pod rolls) and keeps the scale (``worker.replicas=3``). The kubelet's own probes decide readiness. Then the oracle on every
record and the sandbox's ledgers on every effect (runonce/testkit/storm.py, as scripts/pods.py
judges): 0 lost, 0 decided two ways, 0 re-emitted, effects equal to the successes.

With ``--cut``: agents in a pod of the namespace charge through the gateway's Service while
the pods' network is cut from the broker for 40 s (runonce/testkit/faults.py ``cut_from``):
every answer in the cut a 503 with Retry-After, never a refused connection (the gateway pods
stay ready: the Service's endpoints are sampled throughout), and after the heal every charge
succeeded, made once.

Prints what each step took; exits 1 naming the step that failed (with the pods' state and the
last events of the namespace)."""

from __future__ import annotations

import argparse
import inspect
import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
import tomllib
import uuid
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from runonce.connectors.vendors.sandbox.local import LocalVendors  # noqa: E402
from runonce.connectors.vendors.sandbox.local_postgres import LocalPostgres  # noqa: E402
from runonce.devbroker.broker import Broker  # noqa: E402
from runonce.devbroker.users import client_config, write_users  # noqa: E402
from runonce.kafka import acls  # noqa: E402
from runonce.kafka.access import KafkaAccess  # noqa: E402
from runonce.ops.demo import DemoAccess, Stage, format_table, run_demo, surprises  # noqa: E402
from runonce.ops.scenarios import Incident  # noqa: E402
from runonce.settings import Settings  # noqa: E402
from runonce.testkit import agents  # noqa: E402
from runonce.testkit.faults import Faults  # noqa: E402
from runonce.testkit.storm import Burst, judge  # noqa: E402

CACHE = Path(os.environ.get("RUNONCE_CACHE_DIR", Path.home() / ".cache" / "runonce"))
KUBE = Path(os.environ.get("RUNONCE_KUBE_DIR", CACHE / "kube" / "cluster"))
BIN = CACHE / "kube" / "bin"
POD_GATEWAY = "10.244.0.1"  # scripts/kube.sh: the pods' bridge, where they reach the node
POD_NETWORK = "10.244.0.0/24"  # scripts/kube.sh: the pods' addresses
#: the chart's components and the principal of runonce/kafka/acls.toml each connects as
PRINCIPALS = {"worker": "stream", "executors": "executor", "gateway": "agent", "gatewayReader": "agent-reader",
              "topics": "admin"}
#: the sandbox vendors the workload reaches, and the tool each performs (as scripts/pods.py's)
VENDORS = {"payments": "charge_payment", "smtp": "send_email", "jira": "create_jira_ticket",
           "salesforce": "update_salesforce_field"}


def say(message: str) -> None:
    print(f"cluster: {message}", flush=True)


def kubectl(*args: str, input_text: str | None = None, check: bool = True, timeout_s: float = 120) -> str:
    done = subprocess.run([str(BIN / "kubectl"), "--kubeconfig", str(KUBE / "admin.kubeconfig"), *args],
                          input=input_text, capture_output=True, text=True, timeout=timeout_s)
    if check and done.returncode != 0:
        raise RuntimeError(f"kubectl {' '.join(args[:3])}: {done.stderr.strip()}")
    return done.stdout


def helm(*args: str, timeout_s: float = 900) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "KUBECONFIG": str(KUBE / "admin.kubeconfig")}
    return subprocess.run([str(CACHE / "bin" / "helm"), *args], capture_output=True, text=True, env=env,
                          timeout=timeout_s)


def secret(namespace: str, name: str, files: dict[str, str]) -> None:
    """``kubectl create secret generic`` from files' contents (never on a command line)."""
    manifest = {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": name, "namespace": namespace},
                "type": "Opaque", "stringData": files}
    kubectl("apply", "-f", "-", input_text=json.dumps(manifest))


def release_volumes() -> None:
    """The local volumes whose claims are gone, emptied and offered again (scripts/kube.sh)."""
    subprocess.run(["bash", str(ROOT / "scripts" / "kube.sh"), "volumes"], check=True, timeout=300)


def timed(what: str, started: float) -> float:
    took = time.monotonic() - started
    say(f"{what} in {took:.1f} s")
    return took


def start_broker(folder: Path) -> tuple[Settings, Broker, dict[str, str]]:
    """The secured dev broker on the pods' bridge address, every principal of acls.toml a user."""
    settings = Settings.from_env({"RUNONCE_HOME": str(folder), "RUNONCE_BROKER_HOST": POD_GATEWAY,
                                  "RUNONCE_CACHE_DIR": str(CACHE)})
    if (folder / "users.properties").exists():  # an earlier run's broker: stopped, forgotten
        Broker(settings).stop()
        shutil.rmtree(folder)
    folder.mkdir(parents=True)
    users_file = folder / "users.properties"
    grants = acls.load()
    users = write_users(users_file, acls.principals(grants))
    settings = settings.with_(broker_users_file=users_file, sasl_username="admin", sasl_password=users["admin"])
    broker = Broker(settings, progress=say)
    status = broker.start()
    admin = settings.with_(bootstrap=status.bootstrap, kafka_config=client_config(broker.pki))
    acls.apply(admin.kafka_access(), grants, prune=True)
    return admin, broker, users


def dns_name(vendor: str) -> str:
    """A vendor's name in its Kubernetes names (the chart's ``$dnsName``): ``orders_db`` is ``orders-db``."""
    return vendor.replace("_", "-")


def vendor_secret(vendor: str) -> str:
    return f"runonce-{dns_name(vendor)}"


def vendor_values(namespace: str, connectors: Path, only: set[str] | None) -> dict[str, Any]:
    """A connectors file (the sandbox's) as the chart's values: each file it names becomes a key of
    the vendor's Secret, read at /var/run/secrets/runonce/VENDOR/KEY (a kubeconfig with the token
    and CA files it names beside it)."""
    every = tomllib.loads(connectors.read_text())["vendors"]
    vendors: dict[str, Any] = {}
    for vendor in sorted(every if only is None else only):
        table = dict(every[vendor])
        mounted = f"/var/run/secrets/runonce/{vendor}"
        files: dict[str, str] = {}
        for key, value in list(table.items()):
            if isinstance(value, dict) and "file" in value:
                files[key] = Path(value["file"]).read_text()
                table[key] = {"file": f"{mounted}/{key}"}
            elif key == "ca_file":
                files[key] = Path(value).read_text()
                table[key] = f"{mounted}/{key}"
            elif key == "kubeconfig":
                kubeconfig = yaml.safe_load(Path(value).read_text())
                for cluster in kubeconfig["clusters"]:
                    if "certificate-authority" in cluster["cluster"]:
                        files["ca.pem"] = Path(cluster["cluster"]["certificate-authority"]).read_text()
                        cluster["cluster"]["certificate-authority"] = "ca.pem"  # beside the kubeconfig
                for user in kubeconfig["users"]:
                    if "tokenFile" in user["user"]:
                        name = user["user"]["tokenFile"]
                        files[name] = (Path(value).parent / name).read_text()
                files[key] = yaml.safe_dump(kubeconfig)
                table[key] = f"{mounted}/{key}"
        secret(namespace, vendor_secret(vendor), files)
        vendors[vendor] = table
    return vendors


def values(bootstrap: str, vendors: dict[str, Any]) -> dict[str, Any]:
    sasl: dict[str, Any] = {"passwordKey": "password"}
    for component, principal in PRINCIPALS.items():
        sasl[component] = {"username": principal, "passwordSecret": f"runonce-kafka-{principal}"}
    return {"kafka": {"bootstrapServers": bootstrap, "partitions": 6, "configSecret": "runonce-kafka",
                      "tlsSecret": "runonce-kafka-tls", "sasl": sasl},
            "image": {"pullPolicy": "Never"},
            "connectors": {"vendors": vendors},
            "executors": {"vendors": {v: {"secret": vendor_secret(v)} for v in vendors}},
            "gateway": {"tokensSecret": "runonce-gateway-tokens", "replicas": 2}}


def show_state(namespace: str) -> None:
    print(kubectl("get", "pods", "-n", namespace, "-o", "wide", check=False))
    print(kubectl("get", "events", "-n", namespace, "--sort-by", ".lastTimestamp", check=False)[-4000:])


@dataclass
class Release:
    """What the install made: the release in its namespace, and what reaches it from outside."""

    name: str
    namespace: str
    admin: Settings
    users: dict[str, str]
    sandbox: LocalVendors
    #: the gateway token of agent ``billing-agent`` (tool charge_payment)
    token: str
    values_file: Path
    #: the incidents' PostgreSQL and connectors file, with ``--incidents``
    stage: Stage | None
    #: the gateway token of agent ``demo`` (every tool), with ``--incidents``
    demo_token: str | None

    def access(self, principal: str) -> KafkaAccess:
        """The secured broker as one of acls.toml's principals."""
        return self.admin.with_(sasl_username=principal, sasl_password=self.users[principal]).kafka_access()

    @property
    def gateway_url(self) -> str:
        return f"http://{self.name}-runonce-gateway.{self.namespace}.svc.cluster.local:8765"

    def set_of(self, component: str) -> str:
        """The StatefulSet of a component (its ``app.kubernetes.io/component`` label)."""
        found = json.loads(kubectl("get", "statefulsets", "-n", self.namespace, "-o", "json",
                                   "-l", f"app.kubernetes.io/component={component}"))["items"]
        if len(found) != 1:
            raise RuntimeError(f"{component}: {len(found)} StatefulSets")
        return str(found[0]["metadata"]["name"])


def run_pod(namespace: str, name: str, argv: list[str], timeout_s: float = 180) -> str:
    """A pod of the namespace running ``argv`` in the image (as an agent's container would be),
    admitted by the restricted namespace; its output once it succeeded (a pod that failed is
    said at once, with its output)."""
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": namespace},
           "spec": {"restartPolicy": "Never", "automountServiceAccountToken": False,
                    "securityContext": {"runAsNonRoot": True, "runAsUser": 10001,
                                        "seccompProfile": {"type": "RuntimeDefault"}},
                    "containers": [{"name": "agent", "image": "localhost/runonce:0.1.0", "imagePullPolicy": "Never",
                                    "command": argv,
                                    "securityContext": {"allowPrivilegeEscalation": False,
                                                        "capabilities": {"drop": ["ALL"]}}}]}}
    kubectl("apply", "-f", "-", input_text=json.dumps(pod))
    try:
        deadline = time.monotonic() + timeout_s
        while (phase := kubectl("get", "-n", namespace, f"pod/{name}", "-o", "jsonpath={.status.phase}")) not in (
                "Succeeded", "Failed"):
            if time.monotonic() > deadline:
                raise Failed(f"pod {name}: still {phase or 'not scheduled'} after {timeout_s:.0f} s")
            time.sleep(1)
        output = kubectl("logs", "-n", namespace, name)
        if phase == "Failed":  # its error said at once, not a wait for a success that cannot come
            raise Failed(f"pod {name} failed: {output[-2000:]}")
        return output
    finally:
        kubectl("delete", "-n", namespace, f"pod/{name}", "--wait=false", check=False)


#: the agents' plain HTTP client (runonce/testkit/agents.py ``http``), its source sent with each
#: script run in a pod: the image carries no test tools
IN_POD_HTTP = ("import json, urllib.error, urllib.request\nfrom typing import Any\n"
               + inspect.getsource(agents.http) + "\n")


def agent_call(release: Release, key: str) -> dict[str, Any]:
    """An agent's call from a pod of the namespace, through the gateway's Service by its cluster
    DNS name: POST /v1/actions/charge_payment until a final answer, honouring each 503's
    Retry-After as an agent does (right after the install the gateway may not have reached
    Kafka yet: it answers 503, it does not leave the Service); every answer kept with its body,
    so a failed check says what it was answered."""
    script = ("import json, sys, time\n"
              + IN_POD_HTTP +
              "url, key, token = sys.argv[1:4]\n"
              "answers, deadline = [], time.monotonic() + 150\n"
              "while time.monotonic() < deadline:\n"
              "    status, headers, body = http('POST', url + '/v1/actions/charge_payment?wait=20', token,\n"
              "                                 {'card': 'tok', 'amount_cents': 4200}, {'Idempotency-Key': key})\n"
              "    answers.append([status, body])\n"
              "    if status not in (202, 503):\n"
              "        break\n"
              "    time.sleep(float(headers.get('retry-after') or 1) if status == 503 else 0)\n"
              "final = body if status == 200 and isinstance(body, dict) else {}\n"
              "print(json.dumps({**final, 'answers': answers}))\n")
    answer = run_pod(release.namespace, f"agent-{key[-8:]}",
                     ["python3", "-c", script, release.gateway_url, key, release.token])
    parsed: dict[str, Any] = json.loads(answer.strip().splitlines()[-1])
    return parsed


def restricted_namespace(ns: str) -> None:
    """A namespace enforcing the ``restricted`` Pod Security Standard, as a platform team makes one."""
    kubectl("create", "namespace", ns)
    kubectl("label", "namespace", ns, "pod-security.kubernetes.io/enforce=restricted",
            "pod-security.kubernetes.io/enforce-version=latest")


def add_token(tokens: Path, agent: str, tools: str) -> str:
    """``runonce gateway token add``: the new token (printed once)."""
    done = subprocess.run([str(ROOT / ".venv" / "bin" / "runonce"), "gateway", "token", "add", agent, "--tools", tools,
                           "--tokens", str(tokens)], capture_output=True, text=True, check=True)
    return done.stdout.strip().splitlines()[-1].split()[-1]


def install(args: argparse.Namespace, folder: Path, admin: Settings, broker: Broker, users: dict[str, str],
            sandbox: LocalVendors, stage: Stage | None) -> Release:
    """What a platform team makes before the install (docs/deploy.md), then ``helm install --wait``."""
    ns, name = args.namespace, args.release
    kubectl("delete", "namespace", ns, "--ignore-not-found", "--wait", timeout_s=300)
    helm("uninstall", name, "-n", ns)
    release_volumes()  # an earlier install's: its claims went with its namespace
    restricted_namespace(ns)
    secret(ns, "runonce-kafka", {"client.properties": "security.protocol=SASL_SSL\nsasl.mechanism=SCRAM-SHA-512\n"
                                                      "ssl.ca.location=/etc/runonce/kafka-tls/ca.pem\n"})
    secret(ns, "runonce-kafka-tls", {"ca.pem": broker.pki.ca.read_text()})
    for principal in PRINCIPALS.values():
        secret(ns, f"runonce-kafka-{principal}", {"password": users[principal]})
    tokens = folder / "gateway.tokens"
    tokens.unlink(missing_ok=True)
    token = add_token(tokens, "billing-agent", "charge_payment")
    demo_token = None if stage is None else add_token(tokens, "demo", "*")
    secret(ns, "runonce-gateway-tokens", {"gateway.tokens": tokens.read_text()})
    values_file = folder / "values.json"
    vendors = (vendor_values(ns, sandbox.write_connectors(), set(VENDORS)) if stage is None
               else vendor_values(ns, stage.connectors, None))
    values_file.write_text(json.dumps(values(admin.bootstrap_servers(), vendors), indent=2))
    validate(name, ns, values_file)
    at = time.monotonic()
    done = helm("install", name, str(ROOT / "deploy" / "helm" / "runonce"), "-n", ns, "-f", str(values_file),
                "--wait", "--timeout", args.timeout)
    if done.returncode != 0:
        show_state(ns)
        raise Failed(f"helm install --wait failed: {done.stderr.strip()}")
    timed("helm install --wait (restricted namespace, SASL_SSL, a principal per component)", at)
    print(kubectl("get", "pods", "-n", ns, "-o", "wide"))
    return Release(name, ns, admin, users, sandbox, token, values_file, stage, demo_token)


def validate(name: str, namespace: str, values_file: Path) -> None:
    """The rendered manifests validated by the API server (``kubectl apply --dry-run=server``):
    schemas, admission, the namespace's Pod Security level. A warning fails it too: PodSecurity
    only warns of a StatefulSet's template it would refuse as a pod."""
    at = time.monotonic()
    rendered = helm("template", name, str(ROOT / "deploy" / "helm" / "runonce"), "-n", namespace, "-f",
                    str(values_file))
    if rendered.returncode != 0:
        raise Failed(f"helm template: {rendered.stderr.strip()}")
    checked = subprocess.run([str(BIN / "kubectl"), "--kubeconfig", str(KUBE / "admin.kubeconfig"), "apply", "-n",
                              namespace, "--dry-run=server", "-f", "-"], input=rendered.stdout, capture_output=True,
                             text=True, timeout=120)
    if checked.returncode != 0 or "Warning" in checked.stderr:
        raise Failed(f"kubectl apply --dry-run=server: {checked.stderr.strip()}")
    timed(f"{len(checked.stdout.splitlines())} rendered objects validated by the API server (--dry-run=server)", at)


def validate_only(args: argparse.Namespace) -> int:
    """The chart rendered with an install's values and validated by the API server in a
    restricted namespace of its own, then the namespace deleted: no broker, no image, no pod."""
    ns = f"{args.namespace}-validate"
    folder = CACHE / "kube" / "validate"
    folder.mkdir(parents=True, exist_ok=True)
    kubectl("delete", "namespace", ns, "--ignore-not-found", "--wait", timeout_s=300)
    restricted_namespace(ns)
    sandbox = LocalVendors(folder / "sandbox", host=POD_GATEWAY).start()
    try:
        values_file = folder / "values.json"
        values_file.write_text(json.dumps(values(f"{POD_GATEWAY}:9093",
                                                 vendor_values(ns, sandbox.write_connectors(), set(VENDORS)))))
        validate(args.release, ns, values_file)
        return 0
    except Failed as failed:
        say(f"FAILED: {failed}")
        return 1
    finally:
        sandbox.stop()
        kubectl("delete", "namespace", ns, "--wait=false", check=False)


class Failed(Exception):
    """A step did not do what it should: said, with the namespace's state, and exit 1."""


def check_call(release: Release) -> None:
    at = time.monotonic()
    key = f"k8s-{int(time.time())}"
    before = len(release.sandbox.ledger.effects("payments"))
    answer = agent_call(release, key)
    timed(f"an agent's call through {release.gateway_url}: {answer.get('status')} (answered "
          f"{[status for status, _ in answer.get('answers', [])]})", at)
    charges = release.sandbox.ledger.effects("payments")[before:]
    say(f"the sandbox charged {len(charges)} time(s) for it")
    if answer.get("status") != "succeeded" or len(charges) != 1:
        raise Failed(f"expected succeeded and one charge: {answer}, {charges}")


# -- the seed's incidents -------------------------------------------------------------------
#: an incident's agents in a pod: its requests made anew from the run id (testkit/scenarios.py,
#: in the image), each POSTed to the gateway's Service with its key (none for the unkeyed),
#: eight at a time, not waiting for outcomes; the action id each call published, in order
INCIDENT_AGENTS = """
import json, sys, time
from concurrent.futures import ThreadPoolExecutor
from runonce.ops import scenarios
""" + IN_POD_HTTP + """
url, token, run_id, name = sys.argv[1:5]
every = [*scenarios.incidents(run_id), scenarios.refund_race(run_id), scenarios.approval_race(run_id)]
incident = next(i for i in every if i.name == name)
def call(request):
    headers = {"Idempotency-Key": request.idempotency_key} if request.idempotency_key else {}
    for _ in range(30):
        status, got, body = http("POST", f"{url}/v1/actions/{request.tool}?wait=0", token, request.params, headers)
        if status != 503:
            break
        time.sleep(float(got.get("retry-after") or 1))
    return [status, got.get("runonce-action-id"), body if status not in (200, 202) else None]
with ThreadPoolExecutor(8) as pool:
    print(json.dumps(list(pool.map(call, incident.requests))))
"""


class GatewayAgents:
    """The incidents' agents as a pod of the namespace calling the gateway's HTTP API by its
    Service's cluster DNS name (runonce/ops/demo.py ``Agents``)."""

    def __init__(self, release: Release, run_id: str) -> None:
        assert release.demo_token is not None
        self._release, self._token, self._run_id = release, release.demo_token, run_id

    def submit(self, incident: Incident) -> list[str]:
        pod = f"incident-{incident.name.replace('_', '-')}-{self._run_id}"
        out = run_pod(self._release.namespace, pod, ["python3", "-c", INCIDENT_AGENTS, self._release.gateway_url,
                                                     self._token, self._run_id, incident.name], timeout_s=300)
        answers = json.loads(out.strip().splitlines()[-1])
        unpublished = [a for a in answers if not a[1]]
        if unpublished:
            raise Failed(f"{incident.name}: {len(unpublished)} calls published nothing, e.g. {unpublished[:3]}")
        say(f"  {incident.name}: {len(answers)} calls through {self._release.gateway_url}, answered "
            f"{dict(Counter(a[0] for a in answers))}")
        return [str(a[1]) for a in answers]


class ChartFleet:
    """The chart's executor pods (runonce/ops/demo.py ``Fleet``): installed with every vendor of
    the stage's connectors file, each consuming actions.approved since the install."""

    def __init__(self, release: Release) -> None:
        self._release = release

    def start(self, connectors: Path, vendors: list[str], run_id: str) -> None:
        for vendor in vendors:
            name = self._release.set_of(f"executor-{dns_name(vendor)}")
            kubectl("rollout", "status", "-n", self._release.namespace, f"statefulset/{name}", "--timeout", "120s",
                    timeout_s=130)
        say(f"the chart's executors of {', '.join(vendors)} ready")

    def stop(self) -> None:
        """The release's: left to the script's end (and --uninstall)."""


def seed_incidents(release: Release) -> None:
    """The table ``scripts/run.sh`` prints, the agents in a pod calling the gateway's Service, the
    stream worker and every executor the chart's; effects counted on the sandbox's ledgers and
    the refunds table, straight calls made from this node as the agents made them."""
    assert release.stage is not None
    at = time.monotonic()
    run_id = uuid.uuid4().hex[:8]
    access = DemoAccess(agent=release.access("agent"), approver=release.access("approver"),
                        observer=release.admin.kafka_access(), executor=release.access("executor"), executor_env={})
    rows = run_demo(release.admin, say, access=access, fleet=ChartFleet(release),
                    agents=GatewayAgents(release, run_id), stage=release.stage, run_id=run_id)
    print(format_table(rows))
    timed("the seed's incidents through the gateway's Service", at)
    wrong = surprises(rows)
    if wrong:
        raise Failed(f"the incidents: {wrong}")


# -- the storm -----------------------------------------------------------------------------
def pod_json(namespace: str, pod: str) -> dict[str, Any] | None:
    """The pod as the API server has it, or None while there is none of that name."""
    got = kubectl("get", "pod", pod, "-n", namespace, "-o", "json", "--ignore-not-found", timeout_s=60)
    parsed: dict[str, Any] | None = json.loads(got) if got.strip() else None
    return parsed


def is_ready(pod: dict[str, Any]) -> bool:
    return any(c["type"] == "Ready" and c["status"] == "True" for c in pod.get("status", {}).get("conditions", []))


def await_replaced(namespace: str, pod: str, old_uid: str, since: float, timeout_s: float = 300) -> float:
    """Seconds from ``since`` until pod ``pod`` is a new one (another uid) that the kubelet's
    readiness probe has passed."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        now = pod_json(namespace, pod)
        if now is not None and now["metadata"]["uid"] != old_uid and is_ready(now):
            return time.monotonic() - since
        time.sleep(0.5)
    raise Failed(f"{pod} was not made again and ready within {timeout_s:.0f} s")


def await_ready_replicas(namespace: str, statefulset: str, replicas: int, since: float, timeout_s: float = 300) -> float:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        status = json.loads(kubectl("get", "statefulset", statefulset, "-n", namespace, "-o", "json"))["status"]
        if status.get("readyReplicas", 0) >= replicas and status.get("updatedReplicas", 0) >= replicas:
            return time.monotonic() - since
        time.sleep(0.5)
    raise Failed(f"{statefulset}: {replicas} ready replicas not reached within {timeout_s:.0f} s")


def storm(release: Release, args: argparse.Namespace) -> None:
    """The burst, and meanwhile scale, force-delete, rollout restart and helm upgrade."""
    started = time.monotonic()
    ns = release.namespace
    run_id = f"k8s-{uuid.uuid4().hex[:6]}"
    burst = Burst(release.access("agent"), args.actions, args.rate, run_id, "cluster")
    worker = release.set_of("worker")
    executors = {vendor: release.set_of(f"executor-{vendor}") for vendor in VENDORS}
    earlier = len(release.sandbox.ledger.effects())  # the install's check call made one
    burst.start()
    burst_at = time.monotonic()
    steps: list[str] = []
    ready_s: dict[str, list[float]] = {}

    def step(what: str, at: float) -> None:
        took = time.monotonic() - at
        steps.append(f"{what} at {at - burst_at:.0f} s of the burst, {took:.1f} s")
        say(steps[-1])

    time.sleep(burst.seconds * 0.1)
    at = time.monotonic()
    kubectl("scale", f"statefulset/{worker}", "-n", ns, "--replicas", "3")
    ready_s["worker scaled 1 -> 3"] = [await_ready_replicas(ns, worker, 3, at)]
    step("kubectl scale worker 1 -> 3, all ready", at)

    doomed = [f"{worker}-1", f"{executors['payments']}-0"]
    uids = {pod: (pod_json(ns, pod) or {}).get("metadata", {}).get("uid", "") for pod in doomed}
    at = time.monotonic()
    kubectl("delete", "pod", *doomed, "-n", ns, "--grace-period=0", "--force", "--wait=false")
    ready_s["kubectl delete pod --force to ready"] = [await_replaced(ns, pod, uids[pod], at) for pod in doomed]
    step(f"kubectl delete pod --grace-period=0 --force {' '.join(doomed)}, both ready again", at)

    rolled = [executors["smtp"]] if args.short else list(executors.values())
    for statefulset in rolled:
        at = time.monotonic()
        kubectl("rollout", "restart", f"statefulset/{statefulset}", "-n", ns)
        kubectl("rollout", "status", f"statefulset/{statefulset}", "-n", ns, "--timeout", "600s", timeout_s=620)
        ready_s.setdefault("rollout restart, done", []).append(time.monotonic() - at)
        step(f"kubectl rollout restart {statefulset}", at)

    # the scale written into the values, as a platform team makes a kubectl scale last: Helm 4
    # applies server-side, and an upgrade carrying another worker.replicas than kubectl's is
    # refused (a conflict on .spec.replicas; docs/deploy.md)
    at = time.monotonic()
    done = helm("upgrade", release.name, str(ROOT / "deploy" / "helm" / "runonce"), "-n", ns, "-f",
                str(release.values_file), "--set", "worker.replicas=3", "--set-string",
                f"podAnnotations.runonce-storm={run_id}", "--wait", "--timeout", "15m")
    if done.returncode != 0:
        raise Failed(f"helm upgrade --wait failed: {done.stderr.strip()}")
    ready_s["helm upgrade (every pod rolled), done"] = [time.monotonic() - at]
    step("helm upgrade --set worker.replicas=3 --set-string podAnnotations.runonce-storm=... (every pod rolls)", at)

    try:
        burst.wait(burst.seconds * 3 + 120)
    except Exception as exc:  # noqa: BLE001 (said as the step that failed)
        raise Failed(f"the burst failed: {exc!r}") from exc
    say(f"burst sent ({len(burst.items)} actions in {burst.seconds:.0f} s); waiting for every decision and every result")
    killed_vendors = {"payments"}  # whose executor was force-deleted (a vendor answer may be lost)
    judgement = judge(release.access("admin"), burst.families, burst.items, VENDORS,
                      lambda: Counter((e.vendor, e.key) for e in release.sandbox.ledger.effects()[earlier:]
                                      if e.vendor in VENDORS),
                      lambda _, tool: tool == VENDORS["smtp"] and "smtp" in killed_vendors)
    restarts = {p["metadata"]["name"]: sum(c.get("restartCount", 0) for c in p["status"].get("containerStatuses", []))
                for p in json.loads(kubectl("get", "pods", "-n", ns, "-o", "json"))["items"]}
    rows = {**judgement.rows, "steps": "; ".join(steps),
            **{f"time to ready: {what}": ", ".join(f"{s:.1f} s" for s in times) for what, times in ready_s.items()},
            "containers restarted by the kubelet": str({k: v for k, v in restarts.items() if v}),
            "took": f"{time.monotonic() - started:.0f} s"}
    print(json.dumps(rows, indent=2))
    if not judgement.ok:
        raise Failed(f"the storm: {judgement.wrong}")


# -- the broker cut ------------------------------------------------------------------------
#: agents in a pod: each charges with its own key from ``start_at`` until a final answer,
#: honouring each 503's Retry-After, and every answer is printed (wall-clock times: the pod
#: and this script share the node's clock)
AGENTS = """
import json, sys, threading, time
""" + IN_POD_HTTP + """
url, token, start_at, count, run = sys.argv[1], sys.argv[2], float(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
answers, lock = [], threading.Lock()
def agent(i):
    key = f"{run}-{i}"
    while time.time() < start_at:
        time.sleep(0.05)
    while time.time() < start_at + 200:
        began = time.time()
        try:
            status, headers, body = http("POST", url + "/v1/actions/charge_payment?wait=20", token,
                                         {"card": "tok", "amount_cents": 3000 + i}, {"Idempotency-Key": key})
        except OSError as exc:
            with lock:
                answers.append([key, began, time.time(), 0, None, f"{type(exc).__name__}: {exc}"])
            time.sleep(1)
            continue
        final = body.get("status") if status == 200 and isinstance(body, dict) else None
        with lock:
            answers.append([key, began, time.time(), status, headers.get("retry-after"), final])
        if status == 200:
            return
        if status == 503:
            time.sleep(float(headers.get("retry-after") or 1))
        elif status != 202:
            return
threads = [threading.Thread(target=agent, args=(i,)) for i in range(count)]
for t in threads:
    t.start()
for t in threads:
    t.join()
print(json.dumps(answers))
"""


def ready_endpoints(release: Release) -> int:
    """The gateway Service's ready endpoints, as the kubelet's probes left them."""
    slices = json.loads(kubectl("get", "endpointslices", "-n", release.namespace, "-o", "json", "-l",
                                f"kubernetes.io/service-name={release.name}-runonce-gateway"))["items"]
    return sum(1 for s in slices for e in s.get("endpoints") or [] if (e.get("conditions") or {}).get("ready"))


def broker_cut(release: Release, cut_s: float = 40.0) -> None:
    """Agents charge through the gateway's Service while the pods' network is cut from the broker."""
    port = int(release.admin.bootstrap_servers().rsplit(":", 1)[1])
    run = f"cut-{uuid.uuid4().hex[:6]}"
    count = 6
    start_at = time.time() + 25  # the pod is up by then; the cut begins 3 s before
    output: list[str] = []
    agents = threading.Thread(target=lambda: output.append(run_pod(
        release.namespace, run, ["python3", "-c", AGENTS, release.gateway_url, release.token, f"{start_at:.3f}",
                                 str(count), run], timeout_s=360)), daemon=True)
    agents.start()
    time.sleep(max(0.0, start_at - 3 - time.time()))
    endpoints: list[int] = []
    with Faults() as faults:
        cut = faults.cut_from(POD_NETWORK, [port])
        cut_at = time.time()
        say(f"the pods' network {POD_NETWORK} cut from the broker's port {port} for {cut_s:.0f} s")
        while time.time() < cut_at + cut_s:
            endpoints.append(ready_endpoints(release))
            time.sleep(2)
        faults.heal(cut)
        heal_at = time.time()
    say("healed")
    agents.join(400)
    if not output:
        raise Failed("the agents' pod gave no answers")
    answers = json.loads(output[0].strip().splitlines()[-1])
    seen = Counter(a[3] for a in answers)
    during = [(a[3], a[4]) for a in answers if a[1] >= cut_at and a[2] <= heal_at]
    refused = [a[5] for a in answers if a[3] == 0]
    finals = {a[0]: a[5] for a in answers if a[3] == 200}
    made = {f"{run}-{i}": sum(1 for e in release.sandbox.ledger.effects("payments") if e.key.endswith(f"/{run}-{i}"))
            for i in range(count)}
    rows = {"agents": str(count), "cut": f"{heal_at - cut_at:.0f} s", "answers": str(dict(seen)),
            "answers in the cut": str(dict(Counter(during))), "connections refused or failed": str(refused[:3]),
            "gateway endpoints ready while cut (samples)": str(Counter(endpoints)),
            "final answers": str(Counter(finals.values())), "charges per key": str(Counter(made.values()))}
    print(json.dumps(rows, indent=2))
    gateways = json.loads(release.values_file.read_text())["gateway"]["replicas"]
    ok = (bool(during) and all(status == 503 and retry_after for status, retry_after in during) and not refused
          and set(seen) <= {200, 202, 503} and set(endpoints) == {gateways}
          and len(finals) == count and set(finals.values()) == {"succeeded"} and set(made.values()) == {1})
    if not ok:
        raise Failed("the broker cut: an answer in the cut other than 503 + Retry-After, a refused connection, "
                     "a gateway out of its Service, or a charge not made exactly once")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--release", default="r1")
    parser.add_argument("--namespace", default="runonce")
    parser.add_argument("--timeout", default="6m", help="helm install --wait's --timeout")
    parser.add_argument("--uninstall", action="store_true", help="uninstall and stop the broker at the end")
    parser.add_argument("--storm", action="store_true", help="the storm (scale, force-delete, roll, upgrade)")
    parser.add_argument("--actions", type=int, default=3000, help="the storm's actions")
    parser.add_argument("--rate", type=float, default=20.0, help="the storm's actions per second")
    parser.add_argument("--short", action="store_true", help="the storm rolls one executor, not each")
    parser.add_argument("--cut", action="store_true", help="the broker cut while agents call the gateway's Service")
    parser.add_argument("--incidents", action="store_true",
                        help="the seed's incidents through the gateway's Service (the table scripts/run.sh prints); "
                             "installs an executor for every sandbox vendor and PostgreSQL")
    parser.add_argument("--validate", action="store_true",
                        help="only validate the rendered chart with the API server (kubectl apply --dry-run=server) "
                             "in a restricted namespace; no broker, no install")
    args = parser.parse_args()
    if args.validate:
        return validate_only(args)
    # SIGTERM (kill, a CI timeout) ends as Ctrl-C does: the broker and the sandbox stop
    signal.signal(signal.SIGTERM, lambda *_: (_ for _ in ()).throw(KeyboardInterrupt()))
    folder = CACHE / "kube" / "run"
    folder.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    admin, broker, users = start_broker(folder / "broker")
    sandbox = LocalVendors(folder / "sandbox", host=POD_GATEWAY).start()
    postgres = LocalPostgres(folder / "postgres", host=POD_GATEWAY)
    try:
        timed(f"the secured broker on {admin.bootstrap_servers()} and the sandbox on {POD_GATEWAY}", started)
        stage = Stage.of(sandbox, postgres.start()) if args.incidents else None
        release = install(args, folder, admin, broker, users, sandbox, stage)
        check_call(release)
        if args.incidents:
            seed_incidents(release)
        if args.storm:
            storm(release, args)
        if args.cut:
            broker_cut(release)
        timed("all", started)
        return 0
    except Failed as failed:
        say(f"FAILED: {failed}")
        show_state(args.namespace)
        return 1
    except KeyboardInterrupt:
        args.uninstall = True
        return 130
    finally:
        if args.uninstall:
            helm("uninstall", args.release, "-n", args.namespace, "--wait")
            kubectl("delete", "namespace", args.namespace, "--ignore-not-found", "--wait", timeout_s=300, check=False)
            release_volumes()
            sandbox.stop()
            postgres.stop()
            broker.stop()
        else:
            say(f"left running: the release {args.release} in {args.namespace}, the broker, the sandbox (this "
                "process holds it: Ctrl-C stops it)")
            try:
                while True:
                    time.sleep(3600)
            except KeyboardInterrupt:
                sandbox.stop()
                postgres.stop()
                broker.stop()


if __name__ == "__main__":
    sys.exit(main())
