"""The ``kubernetes`` kind against the sandbox's Kubernetes API server: what ``kubectl rollout
restart`` sends (a strategic merge patch of the pod template's annotations), the state check
that finds a restart already made, the credentials a kubeconfig or a pod gives. Every
recorded request is checked against the facts of Kubernetes' OpenAPI description."""

from __future__ import annotations

import base64
import json
import re
import uuid
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import pytest
import trustme

from runonce.connectors.executor import registry
from runonce.connectors.executor.runner import ActionRunner, RetryPolicy
from runonce.connectors.toolkit.base import ActionCall
from runonce.connectors.toolkit.bearer import StaticBearer
from runonce.connectors.toolkit.errors import PermanentVendorError, TransientVendorError
from runonce.connectors.toolkit.secrets import Secret
from runonce.connectors.vendors.kubeconfig import ApiServer, KubeconfigError, from_kubeconfig, in_cluster
from runonce.connectors.vendors.kubernetes import ACTION_ANNOTATION, KEEP, RESTARTED_AT, KubernetesConnector, annotation
from runonce.connectors.vendors.sandbox.faults import VendorFault
from runonce.connectors.vendors.sandbox.http_vendors import VendorServer
from runonce.connectors.vendors.sandbox.ledger import Request
from runonce.connectors.vendors.sandbox.local import LocalVendors
from runonce.errors import ConfigError
from runonce.wire.results import Status
from tests.connectors import vendor_api_facts as facts

FAST = RetryPolicy(max_attempts=3, base_backoff_s=0.01, check_attempts=3, lag_poll_s=0.1)
DEPLOYMENTS = "/apis/apps/v1/namespaces/default/deployments/"


def _restart(service: str | None = None, **params: object) -> ActionCall:
    return ActionCall(str(uuid.uuid4()), "restart_service",
                      {"service": service or f"api-{uuid.uuid4().hex[:8]}", "host": "srv-2", **params},
                      f"restart-{uuid.uuid4().hex[:8]}")


def _connector(local: LocalVendors) -> KubernetesConnector:
    connector = registry.load(local.write_connectors(), {})["kubernetes"].connector
    assert isinstance(connector, KubernetesConnector)
    return connector


def _check_against_openapi(request: Request) -> None:
    parts = urlsplit(request.path)
    pattern = re.escape(facts.KUBERNETES_DEPLOYMENT_PATH).replace(r"\{namespace\}", "[a-z0-9.-]+").replace(
        r"\{name\}", "[a-z0-9.-]+")
    assert re.fullmatch(pattern, parts.path), parts.path
    query = set(parse_qs(parts.query))
    allowed = facts.KUBERNETES_DEPLOYMENT["path_query"] | facts.KUBERNETES_DEPLOYMENT[
        "patch_query" if request.method == "PATCH" else "get_query"]
    assert query <= allowed, query - allowed
    assert request.headers["authorization"] == "Bearer <redacted>"
    if request.method != "PATCH":
        assert request.method == "GET"
        return
    assert request.headers["content-type"] in facts.KUBERNETES_DEPLOYMENT["patch_media_types"]
    patch = json.loads(request.raw)
    assert set(patch) <= facts.KUBERNETES_DEPLOYMENT_PROPERTIES
    assert set(patch["spec"]) <= facts.KUBERNETES_DEPLOYMENT_SPEC_PROPERTIES
    assert set(patch["spec"]["template"]) <= facts.KUBERNETES_POD_TEMPLATE_PROPERTIES
    annotations = patch["spec"]["template"]["metadata"]["annotations"]
    assert all(isinstance(v, str) or v is None for v in annotations.values())  # map[string]string; null removes


def test_a_restart_is_the_patch_kubectl_rollout_restart_sends(local: LocalVendors, vendors: VendorServer) -> None:
    call = _restart()
    response = _connector(local).perform(call)
    requests = vendors.ledger.requests(DEPLOYMENTS + call.params["service"])
    assert [r.method for r in requests] == ["GET", "PATCH"]
    for request in requests:
        _check_against_openapi(request)
    patch = json.loads(requests[1].raw)
    annotations = patch["spec"]["template"]["metadata"]["annotations"]
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", annotations[RESTARTED_AT])  # kubectl's RFC 3339
    assert annotations[annotation(call)].startswith(annotations[RESTARTED_AT][:-1])
    assert requests[1].headers["content-type"] == "application/strategic-merge-patch+json"
    assert parse_qs(urlsplit(requests[1].path).query) == {"fieldManager": ["runonce"]}
    assert response.vendor_ref == f"default/{call.params['service']}@{annotations[annotation(call)]}"
    assert vendors.ledger.count("kubernetes", f"default/deployments/{call.params['service']}") == 1


def test_a_lost_answer_finds_the_restart_and_never_restarts_again(local: LocalVendors, vendors: VendorServer) -> None:
    """The API server applied the patch, then the answer was lost: the runner's state check
    reads the workload, finds the action's annotation, and does not patch again."""
    call = _restart()
    path = DEPLOYMENTS + call.params["service"]
    vendors.state.faults.add(VendorFault(path, method="PATCH", drop_response=1))
    outcome = ActionRunner(_connector(local), FAST, sleep=lambda _s: None).perform(call)
    assert outcome.status is Status.SUCCEEDED, outcome
    methods = [r.method for r in vendors.ledger.requests(path)]
    assert methods.count("PATCH") == 1 and methods.count("GET") >= 2, methods
    assert vendors.ledger.count("kubernetes", f"default/deployments/{call.params['service']}") == 1


def test_a_later_restart_never_hides_an_earlier_one(local: LocalVendors, vendors: VendorServer) -> None:
    """A restart whose result was lost, then another action's restart of the same service: the
    first is still found (each restart has an annotation of its own), so it is not redone."""
    connector = _connector(local)
    service = f"api-{uuid.uuid4().hex[:8]}"
    first, second = _restart(service), _restart(service)
    connector.perform(first)
    connector.perform(second)
    found = connector.check(first)
    assert found is not None and found.detail == "already restarted"
    assert vendors.ledger.count("kubernetes", f"default/deployments/{service}") == 2


def test_runonces_annotations_are_kept_to_the_newest(local: LocalVendors, vendors: VendorServer) -> None:
    connector = _connector(local)
    service = f"api-{uuid.uuid4().hex[:8]}"
    calls = [_restart(service) for _ in range(KEEP + 3)]
    for call in calls:
        connector.perform(call)
    notes = vendors.state.kubernetes.workloads[("default", "deployments", service)]["spec"]["template"]["metadata"][
        "annotations"]
    ours = {k for k in notes if k.startswith(ACTION_ANNOTATION)}
    assert ours == {annotation(c) for c in calls[-KEEP:]}  # the newest KEEP, to the microsecond


def test_a_wrong_token_is_a_clear_permanent_failure_that_never_shows_it(vendors: VendorServer) -> None:
    wrong = uuid.uuid4().hex
    api = ApiServer(vendors.url, None, StaticBearer(Secret("env:KUBE_TOKEN", wrong)), "default", "test")
    connector = KubernetesConnector("kubernetes", api, api.http(30.0))
    outcome = ActionRunner(connector, FAST, sleep=lambda _s: None).perform(_restart())
    assert outcome.status is Status.FAILED, outcome
    assert "Kubernetes refused the credentials" in (outcome.error or "") and "Unauthorized" in (outcome.error or "")
    assert wrong not in (outcome.error or "") and wrong not in repr(connector)
    assert vendors.ledger.count("kubernetes") == 0


def test_a_workload_that_does_not_exist_fails_with_the_apis_reason(local: LocalVendors) -> None:
    outcome = ActionRunner(_connector(local), FAST, sleep=lambda _s: None).perform(_restart("missing-api"))
    assert outcome.status is Status.FAILED and "NotFound" in (outcome.error or ""), outcome


def test_the_probe_asks_whether_the_credentials_may_patch(local: LocalVendors) -> None:
    said = _connector(local).probe()
    assert "may patch deployments in namespace default" in said and local.kubernetes_token not in said


def test_a_probe_that_finds_the_credentials_may_not_patch_fails(local: LocalVendors) -> None:
    """Catches the probe answering "ok ... may NOT patch" (counted as passing by connectors check)."""
    connector = _connector(local)
    readonly_api = ApiServer(connector.api.url, connector.api.tls, connector.api.token, "readonly-apps",
                             connector.api.source)
    readonly = KubernetesConnector("kubernetes", readonly_api, connector.http)
    with pytest.raises(PermanentVendorError, match="may NOT patch deployments in namespace readonly-apps "
                                                   r"\(no RBAC policy matched\): grant it verb patch"):
        readonly.probe()


def test_the_service_account_token_is_read_again_on_every_call(tmp_path: Path) -> None:
    """In a pod: the server from KUBERNETES_SERVICE_HOST/_PORT, the namespace from its file, and
    the token file read each time (the kubelet rotates it in place)."""
    folder = tmp_path / "sa"
    folder.mkdir()
    (folder / "token").write_text("first\n")
    (folder / "namespace").write_text("payments\n")
    api = in_cluster({"KUBERNETES_SERVICE_HOST": "10.0.0.1", "KUBERNETES_SERVICE_PORT": "443"}, folder)
    assert (api.url, api.namespace, api.headers()["Authorization"]) == ("https://10.0.0.1:443", "payments",
                                                                       "Bearer first")
    (folder / "token").write_text("rotated\n")
    assert api.headers()["Authorization"] == "Bearer rotated"
    (folder / "token").unlink()
    with pytest.raises(TransientVendorError, match="cannot read the token file"):
        api.headers()
    with pytest.raises(KubeconfigError, match="not in a pod"):
        in_cluster({}, folder)


def _kubeconfig(tmp_path: Path, user: str, cluster: str = "server: https://10.0.0.1:6443") -> Path:
    path = tmp_path / "kubeconfig"
    path.write_text("\n".join(["apiVersion: v1", "kind: Config", "current-context: prod",
                               "clusters:", "- name: prod", "  cluster:", f"    {cluster}",
                               "users:", "- name: bot", "  user:", *[f"    {line}" for line in user.splitlines()],
                               "contexts:", "- name: prod", "  context:", "    cluster: prod", "    user: bot",
                               "    namespace: ops", ""]))
    return path


def test_a_kubeconfigs_client_certificate_is_loaded_and_its_secrets_refused_where_unsafe(tmp_path: Path) -> None:
    ca = trustme.CA()
    cert = ca.issue_cert("runonce-executor")
    pem = base64.b64encode(cert.cert_chain_pems[0].bytes()).decode()
    key = base64.b64encode(cert.private_key_pem.bytes()).decode()
    ca_data = base64.b64encode(ca.cert_pem.bytes()).decode()
    cluster = f"server: https://10.0.0.1:6443\n    certificate-authority-data: {ca_data}"
    api = from_kubeconfig(_kubeconfig(tmp_path, f"client-certificate-data: {pem}\nclient-key-data: {key}", cluster))
    assert (api.url, api.namespace, api.token, api.headers()) == ("https://10.0.0.1:6443", "ops", None, {})
    assert api.tls is not None and api.tls.verify_mode.name == "CERT_REQUIRED"
    for user, said in (("exec:\n  command: aws", "authenticates with 'exec'"),
                       ("auth-provider:\n  name: gcp", "authenticates with 'auth-provider'"),
                       ("username: admin", "no token, tokenFile or client certificate")):
        with pytest.raises(KubeconfigError, match=said):
            from_kubeconfig(_kubeconfig(tmp_path, user))
    with pytest.raises(KubeconfigError, match="insecure-skip-tls-verify is refused"):
        from_kubeconfig(_kubeconfig(tmp_path, "token: abc",
                                    "server: https://10.0.0.1:6443\n    insecure-skip-tls-verify: true"))


def test_the_connectors_file_takes_one_way_to_the_cluster(tmp_path: Path, local: LocalVendors) -> None:
    path = tmp_path / "connectors.toml"
    for table, said in ((f'kubeconfig = "{local.kubeconfig}"\nin_cluster = true', "give one of"),
                        ("", "give one of"),
                        ('server = "https://k8s.example.com"', "token: is required with server"),
                        ('in_cluster = true', "not in a pod"),
                        ('in_cluster = "yes"', "must be true or false")):
        path.write_text(f'[vendors.k8s]\nkind = "kubernetes"\n{table}\n')
        with pytest.raises(ConfigError, match=said):
            registry.load(path, {})
