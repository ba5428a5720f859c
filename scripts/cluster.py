"""The Helm chart installed, unmodified, on the real Kubernetes of scripts/kube.sh, as a platform
team installs it:

    bash scripts/cluster.sh                  # up the cluster, install, check, leave it running
    bash scripts/cluster.sh --uninstall      # and uninstall at the end

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

Prints what each step took; exits 1 naming the step that failed (with the pods' state and the
last events of the namespace)."""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import time
import tomllib
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from runonce.connectors.vendors.sandbox.local import LocalVendors  # noqa: E402
from runonce.devbroker.broker import Broker  # noqa: E402
from runonce.devbroker.users import client_config, write_users  # noqa: E402
from runonce.kafka import acls  # noqa: E402
from runonce.settings import Settings  # noqa: E402

CACHE = Path(os.environ.get("RUNONCE_CACHE_DIR", Path.home() / ".cache" / "runonce"))
KUBE = Path(os.environ.get("RUNONCE_KUBE_DIR", CACHE / "kube" / "cluster"))
BIN = CACHE / "kube" / "bin"
POD_GATEWAY = "10.244.0.1"  # scripts/kube.sh: the pods' bridge, where they reach the node
#: the chart's components and the principal of runonce/kafka/acls.toml each connects as
PRINCIPALS = {"worker": "stream", "executors": "executor", "gateway": "agent", "gatewayReader": "agent-reader",
              "topics": "admin"}
VENDORS = ("payments", "smtp")


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


def vendor_values(namespace: str, sandbox: LocalVendors) -> dict[str, Any]:
    """The sandbox's connectors as the chart's values: each file it names becomes a key of the
    vendor's Secret, read at /var/run/secrets/runonce/VENDOR/KEY."""
    every = tomllib.loads(sandbox.connectors_toml())["vendors"]
    vendors: dict[str, Any] = {}
    for vendor in VENDORS:
        table = dict(every[vendor])
        files: dict[str, str] = {}
        for key, value in list(table.items()):
            if isinstance(value, dict) and "file" in value:
                files[key] = Path(value["file"]).read_text()
                table[key] = {"file": f"/var/run/secrets/runonce/{vendor}/{key}"}
            elif key == "ca_file":
                files[key] = Path(value).read_text()
                table[key] = f"/var/run/secrets/runonce/{vendor}/{key}"
        secret(namespace, f"runonce-{vendor}", files)
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
            "executors": {"vendors": {v: {"secret": f"runonce-{v}"} for v in vendors}},
            "gateway": {"tokensSecret": "runonce-gateway-tokens", "replicas": 2}}


def show_state(namespace: str) -> None:
    print(kubectl("get", "pods", "-n", namespace, "-o", "wide", check=False))
    print(kubectl("get", "events", "-n", namespace, "--sort-by", ".lastTimestamp", check=False)[-4000:])


def agent_call(namespace: str, release: str, token: str, key: str) -> dict[str, Any]:
    """An agent's call from a pod of the namespace, through the gateway's Service by its cluster
    DNS name: POST /v1/actions/charge_payment, waiting for the outcome."""
    url = f"http://{release}-runonce-gateway.{namespace}.svc.cluster.local:8765/v1/actions/charge_payment?wait=30"
    body = json.dumps({"amount": 4200, "currency": "usd", "customer": "cus_k8s"})
    script = ("import json, sys, urllib.request\n"
              f"req = urllib.request.Request({url!r}, data={body!r}.encode(), method='POST', headers={{\n"
              f"  'Authorization': 'Bearer ' + sys.argv[1], 'Content-Type': 'application/json', 'Idempotency-Key': {key!r}}})\n"
              "print(urllib.request.urlopen(req, timeout=60).read().decode())\n")
    name = f"agent-{key[-8:]}"
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": namespace},
           "spec": {"restartPolicy": "Never", "automountServiceAccountToken": False,
                    "securityContext": {"runAsNonRoot": True, "runAsUser": 10001,
                                        "seccompProfile": {"type": "RuntimeDefault"}},
                    "containers": [{"name": "agent", "image": "localhost/runonce:0.1.0", "imagePullPolicy": "Never",
                                    "command": ["python3", "-c", script, token],
                                    "securityContext": {"allowPrivilegeEscalation": False,
                                                        "capabilities": {"drop": ["ALL"]}}}]}}
    kubectl("apply", "-f", "-", input_text=json.dumps(pod))
    kubectl("wait", "-n", namespace, f"pod/{name}", "--for", "jsonpath={.status.phase}=Succeeded", "--timeout", "120s",
            timeout_s=130)
    answer = kubectl("logs", "-n", namespace, name).strip().splitlines()[-1]
    kubectl("delete", "-n", namespace, f"pod/{name}", "--wait=false")
    parsed: dict[str, Any] = json.loads(answer)
    return parsed


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--release", default="r1")
    parser.add_argument("--namespace", default="runonce")
    parser.add_argument("--timeout", default="6m", help="helm install --wait's --timeout")
    parser.add_argument("--uninstall", action="store_true", help="uninstall and stop the broker at the end")
    args = parser.parse_args()
    # SIGTERM (kill, a CI timeout) ends as Ctrl-C does: the broker and the sandbox stop
    signal.signal(signal.SIGTERM, lambda *_: (_ for _ in ()).throw(KeyboardInterrupt()))
    folder = CACHE / "kube" / "run"
    folder.mkdir(parents=True, exist_ok=True)
    ns, release = args.namespace, args.release
    started = time.monotonic()
    admin, broker, users = start_broker(folder / "broker")
    sandbox = LocalVendors(folder / "sandbox", host=POD_GATEWAY).start()
    try:
        timed(f"the secured broker on {admin.bootstrap_servers()} and the sandbox on {POD_GATEWAY}", started)
        kubectl("delete", "namespace", ns, "--ignore-not-found", "--wait", timeout_s=300)
        helm("uninstall", release, "-n", ns)
        kubectl("create", "namespace", ns)
        kubectl("label", "namespace", ns, "pod-security.kubernetes.io/enforce=restricted",
                "pod-security.kubernetes.io/enforce-version=latest")
        # what a platform team makes before the install (docs/deploy.md)
        secret(ns, "runonce-kafka", {"client.properties": "security.protocol=SASL_SSL\nsasl.mechanism=SCRAM-SHA-512\n"
                                                          "ssl.ca.location=/etc/runonce/kafka-tls/ca.pem\n"})
        secret(ns, "runonce-kafka-tls", {"ca.pem": broker.pki.ca.read_text()})
        for principal in PRINCIPALS.values():
            secret(ns, f"runonce-kafka-{principal}", {"password": users[principal]})
        tokens = folder / "gateway.tokens"
        tokens.unlink(missing_ok=True)
        token = subprocess.run([str(ROOT / ".venv" / "bin" / "runonce"), "gateway", "token", "add", "billing-agent",
                                "--tools", "charge_payment", "--tokens", str(tokens)],
                               capture_output=True, text=True, check=True).stdout.strip().splitlines()[-1].split()[-1]
        secret(ns, "runonce-gateway-tokens", {"gateway.tokens": tokens.read_text()})
        chart_values = values(admin.bootstrap_servers(), vendor_values(ns, sandbox))
        (folder / "values.json").write_text(json.dumps(chart_values, indent=2))
        at = time.monotonic()
        done = helm("install", release, str(ROOT / "deploy" / "helm" / "runonce"), "-n", ns, "-f",
                    str(folder / "values.json"), "--wait", "--timeout", args.timeout)
        if done.returncode != 0:
            say(f"helm install --wait failed: {done.stderr.strip()}")
            show_state(ns)
            return 1
        timed("helm install --wait (restricted namespace, SASL_SSL, a principal per component)", at)
        print(kubectl("get", "pods", "-n", ns, "-o", "wide"))
        at = time.monotonic()
        key = f"k8s-{int(time.time())}"
        before = [e for e in sandbox.ledger.effects() if e.vendor == "payments"]
        answer = agent_call(ns, release, token, key)
        timed(f"an agent's call through {release}-runonce-gateway.{ns}.svc.cluster.local: {answer.get('status')}", at)
        charges = [e for e in sandbox.ledger.effects() if e.vendor == "payments"][len(before):]
        say(f"the sandbox charged {len(charges)} time(s) for it")
        if answer.get("status") != "succeeded" or len(charges) != 1:
            say(f"expected succeeded and one charge: {answer}, {charges}")
            show_state(ns)
            return 1
        timed("all", started)
        return 0
    except KeyboardInterrupt:
        args.uninstall = True
        return 130
    finally:
        if args.uninstall:
            helm("uninstall", release, "-n", ns, "--wait")
            kubectl("delete", "namespace", ns, "--ignore-not-found", "--wait=false")
            sandbox.stop()
            broker.stop()
        else:
            say(f"left running: the release {release} in {ns}, the broker, the sandbox (this process holds it: "
                "Ctrl-C stops it)")
            try:
                while True:
                    time.sleep(3600)
            except KeyboardInterrupt:
                sandbox.stop()
                broker.stop()


if __name__ == "__main__":
    sys.exit(main())
