"""Kubernetes, what ``kubectl rollout restart`` does (kind ``kubernetes``).

An action restarts one workload (a Deployment by default; ``workload`` may say ``statefulset``
or ``daemonset``): ``PATCH /apis/apps/v1/namespaces/{ns}/deployments/{name}`` with
``application/strategic-merge-patch+json``, setting the pod template's annotation
``kubectl.kubernetes.io/restartedAt`` (as kubectl does) and one naming the action:
``runonce.dev/restart-<digest of the vendor key>``. The template changes, so the controller
rolls the pods.

The capability is ``STATE_CHECK``: ``GET`` of the workload reads the pod template's annotations,
and a restart whose annotation is there already happened; it is found, not done again. Each
restart adds its own annotation (a later restart cannot hide an earlier one), and the oldest
beyond the newest ``KEEP`` are removed in the same patch. A read from the API server is
consistent (no ``resourceVersion``: the latest), so no lag is assumed.

The params: ``service`` (or ``deployment``/``name``) names the workload; ``namespace`` overrides
the credentials' namespace. Where the server is and who we are: connectors/vendors/kubeconfig.py.

The API's errors are a ``Status`` (``reason``, ``message``, ``code``):

    401 Unauthorized            failed: Kubernetes refused the credentials (never shown)
    403 Forbidden, 404 NotFound, failed, not restarted (the message names the verb or object)
    422 Invalid, other 4xx
    409 Conflict                not restarted; retried
    429 TooManyRequests         the vendor's rate limit (Retry-After honoured)
    5xx, timeout, lost answer   unknown: the runner reads the annotations before it patches again
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import re
import ssl
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping
from urllib.parse import quote, urlencode

from runonce.connectors.toolkit.base import ActionCall, Capability, VendorResponse
from runonce.connectors.toolkit.bearer import StaticBearer
from runonce.connectors.toolkit.config import VendorFields
from runonce.connectors.toolkit.errors import PermanentVendorError, RateLimited, TransientVendorError
from runonce.connectors.toolkit.fields import Field, FieldType, Spec
from runonce.connectors.toolkit.kind import Kind
from runonce.connectors.toolkit.transport import HttpResult, VendorHttp, raise_for_status, retry_after_seconds
from runonce.connectors.vendors.kubeconfig import (
    SERVICE_ACCOUNT_DIR,
    ApiServer,
    KubeconfigError,
    from_kubeconfig,
    in_cluster,
)

TOOLS = frozenset({"restart_service"})
RESTARTED_AT = "kubectl.kubernetes.io/restartedAt"
ACTION_ANNOTATION = "runonce.dev/restart-"
#: runonce's restart annotations kept on one pod template (each restart adds one)
KEEP = 16
#: the workloads ``kubectl rollout restart`` restarts, by the name an action gives
WORKLOADS = {"deployment": "deployments", "statefulset": "statefulsets", "daemonset": "daemonsets"}
STRATEGIC_MERGE = "application/strategic-merge-patch+json"
FIELD_MANAGER = "runonce"
#: a DNS-1123 subdomain: a workload's and a namespace's name
_NAME = re.compile(r"^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$")


def annotation(call: ActionCall) -> str:
    """The annotation naming this action's restart: stable across its retries and redeliveries."""
    return ACTION_ANNOTATION + hashlib.sha256(call.vendor_key.encode("utf-8")).hexdigest()[:20]


def _name(call: ActionCall, value: object, field: str) -> str:
    text = str(value or "")
    if not _NAME.match(text):
        raise PermanentVendorError(f"{call.tool}: params field {field!r} must be a Kubernetes name "
                                   f"(lower case, digits, '-', '.'), got {text[:80]!r}")
    return text


@dataclass
class KubernetesConnector:
    name: str
    api: ApiServer
    http: VendorHttp
    tools: frozenset[str] = TOOLS
    capability = Capability.STATE_CHECK
    check_lag_s = 0.0  # a read from the API server is its latest state

    @property
    def timeout_s(self) -> float:
        return self.http.timeout_s

    def _url(self, call: ActionCall) -> str:
        p = call.params
        kind = str(p.get("workload") or "deployment").lower()
        if kind not in WORKLOADS:
            raise PermanentVendorError(f"{call.tool}: params field 'workload' must be one of "
                                       f"{', '.join(WORKLOADS)}, got {kind[:40]!r}")
        target = _name(call, p.get("deployment") or p.get("name") or p.get("service"), "service")
        namespace = _name(call, p.get("namespace") or self.api.namespace, "namespace")
        return f"/apis/apps/v1/namespaces/{quote(namespace)}/{WORKLOADS[kind]}/{quote(target)}"

    def _get(self, path: str) -> Mapping[str, Any]:
        return _raise_for_kubernetes("GET", self.http.url(path), self.http.request("GET", path,
                                                                                   headers=self._headers()))

    def _headers(self) -> dict[str, str]:
        return {**self.api.headers(), "Accept": "application/json"}

    def check(self, call: ActionCall) -> VendorResponse | None:
        return _found(call, self._get(self._url(call)))

    def perform(self, call: ActionCall) -> VendorResponse:
        path = self._url(call)
        current = self._get(path)
        done = _found(call, current)
        if done is not None:
            return done
        at = dt.datetime.now(dt.timezone.utc)
        now = at.strftime("%Y-%m-%dT%H:%M:%SZ")  # kubectl's RFC 3339, to the second
        ours = sorted(((v, k) for k, v in _annotations(current).items() if k.startswith(ACTION_ANNOTATION)),
                      reverse=True)
        stale: dict[str, str | None] = {k: None for _, k in ours[KEEP - 1:]}  # null removes, in a strategic merge
        # ours to the microsecond: the newest are kept, though restarts come faster than seconds
        mine = at.isoformat(timespec="microseconds").replace("+00:00", "Z")
        patch = {"spec": {"template": {"metadata": {"annotations": {RESTARTED_AT: now, annotation(call): mine,
                                                                    **stale}}}}}
        body = _raise_for_kubernetes("PATCH", self.http.url(path), self.http.request(
            "PATCH", f"{path}?{urlencode({'fieldManager': FIELD_MANAGER})}", json.dumps(patch).encode(),
            headers={**self._headers(), "Content-Type": STRATEGIC_MERGE}))
        generation = (body.get("metadata") or {}).get("generation")
        return VendorResponse(_ref(path, mine), f"rollout restarted (generation {generation})")

    def probe(self) -> str:
        """Whether these credentials may patch deployments in their namespace: a
        SelfSubjectAccessReview, which every authenticated user may create."""
        path = "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews"
        review = {"apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectAccessReview",
                  "spec": {"resourceAttributes": {"namespace": self.api.namespace, "verb": "patch",
                                                  "group": "apps", "resource": "deployments"}}}
        body = _raise_for_kubernetes("POST", self.http.url(path), self.http.request(
            "POST", path, json.dumps(review).encode(), headers={**self._headers(), "Content-Type": "application/json"}))
        status = body.get("status") or {}
        if not status.get("allowed"):
            # a probe that finds the credential cannot do the job fails: every restart would be refused
            why = f" ({status['reason']})" if status.get("reason") else ""
            raise PermanentVendorError(f"{self.api.source} may NOT patch deployments in namespace "
                                       f"{self.api.namespace}{why}: grant it verb patch on apps/deployments "
                                       f"(a Role and a RoleBinding)")
        return f"{self.api.source}: may patch deployments in namespace {self.api.namespace}"


def _annotations(workload: Mapping[str, Any]) -> Mapping[str, str]:
    template = (workload.get("spec") or {}).get("template") or {}
    return (template.get("metadata") or {}).get("annotations") or {}


def _found(call: ActionCall, workload: Mapping[str, Any]) -> VendorResponse | None:
    at = _annotations(workload).get(annotation(call))
    meta = workload.get("metadata") or {}
    if at is None:
        return None
    return VendorResponse(f"{meta.get('namespace')}/{meta.get('name')}@{at}", "already restarted")


def _ref(url: str, at: str) -> str:
    *_, namespace, _kind, name = url.split("/")
    return f"{namespace}/{name}@{at}"


def _raise_for_kubernetes(method: str, url: str, result: HttpResult) -> Mapping[str, Any]:
    body: Mapping[str, Any] = result.body if isinstance(result.body, dict) else {}
    if result.status < 400:
        return body
    said = f"{method} {url}: HTTP {result.status} {body.get('reason') or ''}: {body.get('message') or result.body}"
    if result.status == 401:
        raise PermanentVendorError(f"{said} (Kubernetes refused the credentials)")
    if result.status == 409:
        raise TransientVendorError(said)
    if result.status == 429:
        raise RateLimited(said, retry_after_seconds(result.headers.get("retry-after")))
    raise_for_status(method, url, result)
    return body


FIELDS = Spec("kubernetes", (
    Field("kubeconfig", FieldType.TEXT, "a kubeconfig file (one of `kubeconfig`, `in_cluster`, `server`)",
          optional=True),
    Field("context", FieldType.TEXT, "the kubeconfig's context, else its current one", optional=True),
    Field("in_cluster", FieldType.FLAG, "the pod's own service account", False),
    Field("service_account_dir", FieldType.TEXT, "where the pod's service account is mounted",
          str(SERVICE_ACCOUNT_DIR)),
    Field("server", FieldType.URL, "an API server, with `token` (and `ca_file`)", optional=True),
    Field("token", FieldType.SECRET, "the bearer token for `server`", optional=True),
    Field("namespace", FieldType.TEXT, "the namespace when an action names none; else the context's or "
                                       "the pod's", optional=True),
))


def from_config(fields: VendorFields) -> KubernetesConnector:
    """One of: ``kubeconfig`` (a path; ``context`` optional), ``in_cluster = true``, or ``server``
    with ``token`` (a secret) and ``ca_file``. ``namespace`` sets the default namespace."""
    kubeconfig, context = fields.text("kubeconfig"), fields.text("context") or None
    server = fields.url("server") if fields.given("server") else ""
    token = fields.optional_secret("token")
    cluster = fields.flag("in_cluster")
    sa_dir = Path(fields.text("service_account_dir"))
    if sum((bool(kubeconfig), cluster, bool(server))) != 1:
        raise fields.error("kubeconfig", "give one of kubeconfig (a path), in_cluster = true, or server with token")
    try:
        if kubeconfig:
            api = from_kubeconfig(Path(kubeconfig).expanduser(), context)
        elif cluster:
            api = in_cluster(fields.environ, sa_dir)
        else:
            if token is None:
                raise fields.error("token", 'is required with server: { env = "VAR" } or { file = "path" }')
            api = ApiServer(server, fields.tls(server), StaticBearer(token), "default", f"server {server}")
    except (KubeconfigError, OSError, ssl.SSLError) as exc:
        raise fields.error("kubeconfig" if kubeconfig else "in_cluster" if cluster else "server", str(exc)) from None
    namespace = fields.text("namespace")
    if namespace:
        api = ApiServer(api.url, api.tls, api.token, namespace, api.source)
    return KubernetesConnector(fields.name, api, api.http(fields.timeout_s), fields.tools(TOOLS))


KIND = Kind(FIELDS, from_config)
