"""The Helm chart played as pods on this machine (podman kube play), with the image built here,
against the dev broker and the sandbox vendors, under a burst: scale the stream worker from 1 to
3 pods mid-burst, SIGKILL one worker container and one executor container (``podman kill``;
then started again, as a kubelet restarts a crashed container), then roll every executor (SIGTERM, then started again, one at a time,
as ``kubectl rollout restart`` does). Then the oracle on every record and the vendors' ledgers
on every effect:

    bash scripts/pods.sh                       # 3,000 actions at 60/s, the full storm
    bash scripts/pods.sh --actions 300 --rate 30 --short   # what CI runs: one of each fault
    bash scripts/pods.sh --incidents           # the seed's incidents through the pods (CI runs it)

With ``--incidents`` it replays the seed's incidents as ``scripts/run.sh`` does (``runonce
demo``: straight to the sandbox vendors, then through runonce), but with the stream worker and
one executor per vendor (nine sandbox vendors and the demo's PostgreSQL) played as the chart's
pods; the table is counted from the vendors' ledgers and the refunds table, and a figure other
than the incident's expected one fails the run.

What podman kube play does not do, this script does for it (each step says so): a StatefulSet
becomes its pods (pod i named NAME-i, with its PersistentVolumeClaim), a Job a pod; pods share
the host's network (the broker listens on loopback), so each gets a metrics port of its own
and its pod name in place of ``@host``; podman runs no readiness probe, so the script asks
``/readyz`` itself. The sandbox's credentials reach the executors by a hostPath mount of the
sandbox's folder at the same path (the chart mounts a vendor's Secret instead).

The storm's pods sign receipts (the chart's ``receipts.keySecret``, a key made for the run,
the Secret played as a folder as the sandbox's are): every decision and every final result
then has exactly one receipt, and every chain verifies with the public key.

Prints a table of what it measured; exits 1 if anything was lost, decided two ways, performed
twice, left in doubt where no lost vendor answer explains it, or without its one receipt."""

from __future__ import annotations

import argparse
import copy
import json
import os
import subprocess
import sys
import time
import tomllib
import urllib.error
import urllib.request
import uuid
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.receipts_check import receipts_held, receipts_key  # noqa: E402
from runonce.audit.oracle import verify  # noqa: E402
from runonce.audit.receipts import decision_hashes, final_result_hashes  # noqa: E402
from runonce.connectors.vendors.sandbox.local import LocalVendors  # noqa: E402
from runonce.devbroker.broker import Broker, free_ports  # noqa: E402
from runonce.kafka import topics  # noqa: E402
from runonce.kafka.reader import read_all  # noqa: E402
from runonce.receipts.receipt import Kind  # noqa: E402
from runonce.settings import Settings  # noqa: E402
from runonce.testkit.storm import Burst, judge  # noqa: E402
from runonce.wire.codec import Codec  # noqa: E402

#: the sandbox vendors the workload reaches, and the tool each performs
VENDORS = {"payments": "charge_payment", "smtp": "send_email", "jira": "create_jira_ticket",
           "salesforce": "update_salesforce_field"}
CHART = ROOT / "deploy" / "helm" / "runonce"
RELEASE = "proof"
PODMAN_ENV = {**os.environ, "CONTAINERS_CONF": str(ROOT / "deploy" / "podman" / "containers.conf")}


def say(message: str) -> None:
    print(f"pods: {message}", file=sys.stderr, flush=True)


#: how often a container that runc could not start is started again, and the wait before each
RESTART_TRIES, RESTART_BACKOFF_S = 5, 1.0


#: what podman says of a start that may succeed once it has read its containers' state again:
#: runc's "can't get final child's PID from pipe: EOF" (an OCI runtime error), and the pod's
#: infra container found "paused or unknown" (podman 4.3 marks a container unknown when runc's
#: state query fails); both seen under CI's load right after a SIGKILL
TRANSIENT_START_ERRORS = ("OCI runtime error", "container state improper")


def restart(*args: str) -> None:
    """``podman start C`` or ``podman pod start P``: start a stopped container or pod again, as
    a kubelet restarts a crashed one. A start refused for a transient state (above) is retried
    after a back-off, as the kubelet's CrashLoopBackOff does, saying the pods' infra containers'
    states first; anything else, or the last try, is an error."""
    for attempt in range(1, RESTART_TRIES + 1):
        done = subprocess.run(["podman", *args], env=PODMAN_ENV, capture_output=True, text=True)
        if done.returncode == 0:
            return
        if not any(error in done.stderr for error in TRANSIENT_START_ERRORS) or attempt == RESTART_TRIES:
            raise RuntimeError(f"podman {' '.join(args)}: {done.stderr.strip()}")
        listed = podman("ps", "-a", "--format", "{{.Names}}: {{.Status}} (infra {{.IsInfra}})", check=False)
        infra = [line for line in listed.splitlines() if line.endswith("(infra true)")]
        say(f"podman {' '.join(args)}: {done.stderr.strip()[:300]}; infra containers: {' | '.join(infra)}; "
            f"again in {RESTART_BACKOFF_S * attempt:.0f} s")
        time.sleep(RESTART_BACKOFF_S * attempt)


def podman(*args: str, check: bool = True) -> str:
    done = subprocess.run(["podman", *args], env=PODMAN_ENV, capture_output=True, text=True)
    if check and done.returncode != 0:
        raise RuntimeError(f"podman {' '.join(args)}: {done.stderr.strip()}")
    return done.stdout


def helm() -> str:
    cache = Path(os.environ.get("RUNONCE_CACHE_DIR", Path.home() / ".cache" / "runonce"))
    return str(cache / "bin" / "helm")


def render(values: dict[str, Any], folder: Path) -> list[dict[str, Any]]:
    path = folder / "values.yaml"
    path.write_text(yaml.safe_dump(values))
    done = subprocess.run([helm(), "template", RELEASE, str(CHART), "-f", str(path)], capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"helm template with {path}: {done.stderr.strip()}")
    out = done.stdout
    return [d for d in yaml.safe_load_all(out) if d]


class Pod:
    """One pod of the rendered chart, as podman kube play runs it."""

    def __init__(self, name: str, component: str, manifest: list[dict[str, Any]], port: int | None) -> None:
        self.name, self.component, self.manifest, self.port = name, component, manifest, port
        self.file: Path | None = None

    @property
    def container(self) -> str:
        spec = next(d for d in self.manifest if d["kind"] == "Pod")["spec"]
        return f"{self.name}-{spec['containers'][0]['name']}"

    def ready(self) -> tuple[int, str]:
        assert self.port is not None
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/readyz", timeout=2) as answer:
                return answer.status, answer.read().decode().strip()
        except urllib.error.HTTPError as error:
            return error.code, error.read().decode().strip()
        except OSError as error:
            return 0, str(error)

    def await_ready(self, since: float, timeout_s: float = 180.0) -> float:
        """Seconds from ``since`` (a monotonic time: when it was started) until /readyz answered 200."""
        started = time.monotonic()
        while self.ready()[0] != 200:
            if time.monotonic() - started > timeout_s:
                raise RuntimeError(f"{self.name} not ready after {timeout_s:.0f} s: {self.ready()}\n"
                                   f"{podman('logs', '--tail', '30', self.container, check=False)}")
            time.sleep(0.1)
        return time.monotonic() - since


def as_pods(docs: list[dict[str, Any]], sandbox_folder: Path, secrets: dict[str, Path] | None = None
            ) -> tuple[dict[str, Any], dict[str, Pod]]:
    """The chart's ConfigMap, and each pod a cluster would run: what kube play takes. ``secrets``:
    a Secret's name -> the host folder that holds its keys as files (mounted in its place)."""
    config = next(d for d in docs if d["kind"] == "ConfigMap")
    pods: dict[str, Pod] = {}
    for doc in docs:
        kind = doc["kind"]
        if kind not in ("StatefulSet", "Job"):
            continue  # Services, PodDisruptionBudgets: nothing for podman to do
        template = doc["spec"]["template"]
        replicas = doc["spec"].get("replicas", 1) if kind == "StatefulSet" else 1
        component = template["metadata"]["labels"]["app.kubernetes.io/component"]
        # a StatefulSet is played with 3 workers' worth of pods; which run is the script's choice
        for i in range(3 if component == "worker" else replicas):
            name = f"{doc['metadata']['name']}-{i}" if kind == "StatefulSet" else doc["metadata"]["name"]
            spec = copy.deepcopy(template["spec"])
            spec["hostNetwork"] = True  # the dev broker and the sandbox listen on loopback
            spec["restartPolicy"] = "Always" if kind == "StatefulSet" else "OnFailure"
            spec.pop("terminationGracePeriodSeconds", None)
            manifest: list[dict[str, Any]] = []
            port = None
            for container in spec["containers"]:
                container["args"] = [name if a == "@host" else a for a in container["args"]]
                for probe in ("startupProbe", "livenessProbe", "readinessProbe"):
                    container.pop(probe, None)  # podman runs probes as systemd timers; the script asks itself
                if kind == "StatefulSet":
                    port = free_ports(1)[0]  # one network for every pod: a port each
                    container["env"] = [e for e in container["env"] if e["name"] != "RUNONCE_METRICS_PORT"] + [
                        {"name": "RUNONCE_METRICS_PORT", "value": str(port)}]
                container.pop("ports", None)  # on the host's network a pod maps no port
                if component.startswith("executor-"):
                    container["volumeMounts"].append({"name": "sandbox", "mountPath": str(sandbox_folder),
                                                      "readOnly": True})
            if component.startswith("executor-"):
                spec["volumes"].append({"name": "sandbox", "hostPath": {"path": str(sandbox_folder),
                                                                        "type": "Directory"}})
            for volume in spec["volumes"]:
                held = (secrets or {}).get(volume.get("secret", {}).get("secretName", ""))
                if held is not None:
                    volume.pop("secret")
                    volume["hostPath"] = {"path": str(held), "type": "Directory"}
            for claim in doc["spec"].get("volumeClaimTemplates", []):
                claim_name = f"{claim['metadata']['name']}-{name}"
                manifest.append({"apiVersion": "v1", "kind": "PersistentVolumeClaim",
                                 "metadata": {"name": claim_name}, "spec": claim["spec"]})
                spec["volumes"].append({"name": claim["metadata"]["name"],
                                        "persistentVolumeClaim": {"claimName": claim_name}})
            manifest.append({"apiVersion": "v1", "kind": "Pod",
                             "metadata": {"name": name, "labels": template["metadata"]["labels"]}, "spec": spec})
            pods[name] = Pod(name, component, manifest, port)
    return config, pods


def play(pod: Pod, config: dict[str, Any], folder: Path) -> None:
    pod.file = folder / f"{pod.name}.yaml"
    pod.file.write_text(yaml.safe_dump_all([config, *pod.manifest]))
    podman("kube", "play", "--replace", str(pod.file))


def chart_values(bootstrap: str, partitions: int, vendors: dict[str, Any], receipts_secret: str = "") -> dict[str, Any]:
    version = next(line.split('"')[1] for line in (ROOT / "pyproject.toml").read_text().splitlines()
                   if line.startswith("version = "))
    return {"image": {"repository": "localhost/runonce", "tag": version, "pullPolicy": "Never"},
            "kafka": {"bootstrapServers": bootstrap, "partitions": partitions},
            "gateway": {"enabled": False}, "connectors": {"vendors": vendors},
            "receipts": {"keySecret": receipts_secret}}


@dataclass(frozen=True, slots=True)
class ReceiptsFound:
    rows: dict[str, str]
    ok: bool


def receipts_of(bootstrap: str, items: Sequence[tuple[dict[str, Any], float]], key: Path) -> ReceiptsFound:
    """The burst's decisions and final results held against their receipts, chains verified."""
    wanted = {record["action_id"] for record, _ in items}
    codec = Codec()
    decided: dict[str, str] = {}
    for topic in (topics.APPROVED, topics.DROPPED, topics.HELD):
        decided.update({d: a for d, a in decision_hashes(read_all(bootstrap, topic), codec).items() if a in wanted})
    results = {d: a for d, a in final_result_hashes(read_all(bootstrap, topics.RESULTS), codec).items() if a in wanted}
    rows, ok = {}, True
    for what, kind, records in (("decisions", Kind.DECISION, decided), ("results", Kind.OUTCOME, results)):
        held = receipts_held(bootstrap, 0, kind, records, wanted, key)
        rows[f"receipts of {what}"] = (
            f"{held['receipts']} for {held['records']}: {held['without_receipt']} without, {held['doubled']} doubled, "
            f"{held['of_no_record']} of no record; {held['chains']} chains, {len(held['chains_not_verified'])} not verified")
        ok = ok and held["receipts"] > 0 and not (held["without_receipt"] or held["doubled"] or held["of_no_record"]
                                                  or held["chains_not_verified"])
    return ReceiptsFound(rows, ok)


def readable_by_image(folder: Path) -> None:
    """The sandbox's secrets, readable by the image's user (the host's sandbox runs as root)."""
    subprocess.run(["chown", "-R", "10001:10001", str(folder)], check=True)


def play_topics(pods: dict[str, Pod], config: dict[str, Any], folder: Path) -> None:
    job = next(p for p in pods.values() if p.component == "topics")
    play(job, config, folder)
    exit_code = podman("wait", job.container).strip()
    say(f"topics Job pod exited {exit_code}")
    if exit_code != "0":
        raise RuntimeError(f"the topics Job failed:\n{podman('logs', '--tail', '30', job.container, check=False)}")


def down(pods: dict[str, Pod]) -> None:
    for pod in pods.values():
        if pod.file is not None:
            podman("kube", "down", str(pod.file), check=False)
    for pod in pods.values():
        for doc in pod.manifest:
            if doc["kind"] == "PersistentVolumeClaim":
                podman("volume", "rm", "--force", doc["metadata"]["name"], check=False)


class PodFleet:
    """``runonce demo``'s executors as the chart's pods (a ``runonce.ops.demo.Fleet``): the chart
    rendered with the demo's connectors file as its ``connectors.vendors``; the topics Job, one
    stream worker and one executor pod per vendor played, each awaited on ``/readyz``."""

    def __init__(self, bootstrap: str, partitions: int, folder: Path) -> None:
        self._bootstrap, self._partitions, self._folder = bootstrap, partitions, folder
        self.pods: dict[str, Pod] = {}
        self.ready_s: list[float] = []

    def start(self, connectors: Path, vendors: list[str], run_id: str) -> None:
        readable_by_image(connectors.parent)  # the demo's sandbox secrets and its database's DSN file
        tables = tomllib.loads(connectors.read_text(encoding="utf-8"))["vendors"]
        values = chart_values(self._bootstrap, self._partitions, {v: tables[v] for v in vendors})
        config, every = as_pods(render(values, self._folder), connectors.parent)
        self.pods = {n: p for n, p in every.items() if p.component != "worker" or n.endswith("-0")}
        play_topics(self.pods, config, self._folder)
        running = [p for p in self.pods.values() if p.component != "topics"]
        played_at = {}
        for pod in running:
            played_at[pod.name] = time.monotonic()
            play(pod, config, self._folder)
        self.ready_s = [pod.await_ready(played_at[pod.name]) for pod in running]
        say(f"played {', '.join(sorted(p.name for p in running))}; each ready in "
            f"{min(self.ready_s):.1f}-{max(self.ready_s):.1f} s")

    def stop(self) -> None:
        down(self.pods)


def incidents(folder: Path, settings: Settings) -> int:
    """The seed's incidents, straight to the sandbox vendors and then through the pods: the table
    ``scripts/run.sh`` prints, with the worker and every executor in a container."""
    from runonce.ops.demo import format_table, run_demo, surprises

    started = time.monotonic()
    fleet = PodFleet(settings.bootstrap_servers(), settings.partitions, folder)
    rows = run_demo(settings, progress=say, fleet=fleet)
    print(format_table(rows))
    report = verify(settings.bootstrap_servers())
    wrong = surprises(rows)
    print(json.dumps({"pods": sorted(p.name for p in fleet.pods.values() if p.component != "topics"),
                      "time to ready": f"{min(fleet.ready_s):.1f}-{max(fleet.ready_s):.1f} s",
                      "requested": report.requested, "lost": len(report.lost),
                      "decided two ways": len(report.conflicts), "re-emitted decisions": report.re_emitted,
                      "took": f"{time.monotonic() - started:.0f} s"}, indent=2))
    for surprise in wrong:
        say(f"NOT AS EXPECTED: {surprise}")
    if report.lost or report.conflicts:
        say(f"NOT AS EXPECTED: lost {report.lost[:5]}, two ways {report.conflicts[:5]}")
    return 1 if wrong or report.lost or report.conflicts else 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--incidents", action="store_true",
                        help="replay the seed's incidents through the pods (the table scripts/run.sh prints) "
                             "instead of the storm")
    parser.add_argument("--actions", type=int, default=3000)
    parser.add_argument("--rate", type=float, default=60.0, help="actions per second")
    parser.add_argument("--short", action="store_true", help="one kill of each kind and one executor rolled")
    parser.add_argument("--keep", action="store_true", help="leave the pods, broker and sandbox running")
    args = parser.parse_args()
    run_id = f"pods-{uuid.uuid4().hex[:6]}"
    folder = ROOT / "bench" / "out" / run_id
    folder.mkdir(parents=True)
    settings = Settings.from_env({"RUNONCE_HOME": str(folder / "home"), "RUNONCE_BROKER_HEAP_MB": "384"})
    broker = Broker(settings, progress=say)
    broker.start()
    try:
        if args.incidents:
            return incidents(folder, settings)
        return storm(args, run_id, folder, settings)
    finally:
        if not args.keep:
            broker.stop()


#: the Secret the storm's chart values name for the signing key (played as a host folder)
RECEIPTS_SECRET = "runonce-receipts"


def storm(args: argparse.Namespace, run_id: str, folder: Path, settings: Settings) -> int:
    started = time.monotonic()
    bootstrap = settings.bootstrap_servers()
    sandbox = LocalVendors(folder / "sandbox").start()
    pods: dict[str, Pod] = {}
    try:
        readable_by_image(sandbox.folder)
        key_folder = folder / "receipts-key"
        key_folder.mkdir()
        key = receipts_key(key_folder)
        readable_by_image(key_folder)
        every = tomllib.loads(sandbox.connectors_toml())["vendors"]
        values = chart_values(bootstrap, settings.partitions, {name: every[name] for name in VENDORS},
                              receipts_secret=RECEIPTS_SECRET)
        config, pods = as_pods(render(values, folder), sandbox.folder, {RECEIPTS_SECRET: key_folder})
        say(f"chart rendered: {', '.join(sorted(pods))}")
        play_topics(pods, config, folder)
        workers = sorted(n for n, p in pods.items() if p.component == "worker")
        executors = sorted(n for n, p in pods.items() if p.component.startswith("executor-"))
        ready_s: dict[str, list[float]] = {}
        played_at = {}
        for name in [workers[0], *executors]:
            played_at[name] = time.monotonic()
            play(pods[name], config, folder)
        for name in [workers[0], *executors]:
            ready_s.setdefault("first start", []).append(pods[name].await_ready(played_at[name]))
        say(f"1 worker and {len(executors)} executors ready")

        burst = Burst(bootstrap, args.actions, args.rate, run_id, "pods").start()
        burst_at = time.monotonic()
        steps: list[str] = []
        time.sleep(burst.seconds * 0.15)
        for name in workers[1:]:  # scale 1 -> 3
            played_at[name] = time.monotonic()
            play(pods[name], config, folder)
        steps.append(f"worker scaled 1 -> {len(workers)} at {time.monotonic() - burst_at:.0f} s of the burst")
        for name in workers[1:]:
            ready_s.setdefault("scaled worker", []).append(pods[name].await_ready(played_at[name]))
        time.sleep(max(0.0, burst.seconds * 0.4 - (time.monotonic() - burst_at)))
        killed = [pods[workers[1]], pods[executors[0]]]
        for pod in killed:
            podman("kill", "--signal", "KILL", pod.container)
            steps.append(f"SIGKILL {pod.container} at {time.monotonic() - burst_at:.0f} s")
        for pod in killed:
            # a container that podman kill stopped is the user's, and podman's restart policy
            # leaves it: the script starts it again, as a kubelet restarts a crashed container
            podman("wait", "--condition", "exited", pod.container)  # its cleanup done before a new start
            restarted_at = time.monotonic()
            restart("start", pod.container)
            ready_s.setdefault("after SIGKILL", []).append(pod.await_ready(restarted_at))
        rolled = executors[:1] if args.short else executors
        for name in rolled:  # kubectl rollout restart: one pod at a time, the next once it is ready
            pod = pods[name]
            stopped_at = time.monotonic()
            podman("pod", "stop", "--time", "60", name)
            stop_s = time.monotonic() - stopped_at
            exited = podman("inspect", "--format", "{{.State.ExitCode}}", pod.container).strip()
            restarted_at = time.monotonic()
            restart("pod", "start", name)
            ready_s.setdefault("rolled executor", []).append(pod.await_ready(restarted_at))
            steps.append(f"rolled {name} at {time.monotonic() - burst_at:.0f} s: SIGTERM to exit {stop_s:.1f} s, "
                         f"exit code {exited}")
        burst.wait(burst.seconds * 3 + 120)
        say(f"burst sent ({len(burst.items)} actions); waiting for every decision and every result")

        # An in_doubt is explained only by a vendor answer lost for good: an executor SIGKILLed
        # mid-call, of a vendor that can neither deduplicate nor be asked (smtp). A rolling
        # restart (SIGTERM) or a SIGKILLed executor of another kind explains none.
        killed_vendors = {pod.component.removeprefix("executor-") for pod in killed}
        judgement = judge(bootstrap, burst.families, burst.items, VENDORS,
                          lambda: Counter((e.vendor, e.key) for e in sandbox.ledger.effects() if e.vendor in VENDORS),
                          lambda _, tool: tool == VENDORS["smtp"] and "smtp" in killed_vendors)
        receipts = receipts_of(bootstrap, burst.items, key)
        rows = {**judgement.rows, **receipts.rows, "steps": "; ".join(steps),
                **{f"time to ready: {what}": ", ".join(f"{s:.1f} s" for s in times) for what, times in ready_s.items()},
                "took": f"{time.monotonic() - started:.0f} s"}
        print(json.dumps(rows, indent=2))
        if not judgement.ok:
            say(f"NOT AS EXPECTED: {judgement.wrong}")
        if not receipts.ok:
            say(f"NOT AS EXPECTED: receipts {receipts.rows}")
        return 0 if judgement.ok and receipts.ok else 1
    finally:
        if not args.keep:
            down(pods)
            sandbox.stop()




if __name__ == "__main__":
    sys.exit(main())
