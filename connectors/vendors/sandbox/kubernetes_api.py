"""The sandbox's Kubernetes API server, the part ``kubectl rollout restart`` uses, written from
the Kubernetes API reference and its OpenAPI description (``apis/apps/v1``):

* ``GET /apis/apps/v1/namespaces/<ns>/{deployments,statefulsets,daemonsets}/<name>``: the
  workload. Every workload named exists (created on first sight, generation 1), except names
  beginning with ``missing`` and namespaces beginning with ``nowhere``: 404 ``NotFound``.
* ``PATCH`` of the same path: as ``application/strategic-merge-patch+json`` or
  ``application/merge-patch+json`` (a JSON patch, or plain JSON, is 415 here), with the query
  parameters the API takes (``dryRun``, ``fieldManager``, ``fieldValidation``, ``force``,
  ``pretty``); maps merge, ``null`` removes a key. An annotation key must be a qualified name
  (else 422 ``Invalid``). A change to the pod template rolls the pods: one effect in the ledger
  (vendor ``kubernetes``), with the generation bumped.
* ``POST /apis/authorization.k8s.io/v1/selfsubjectaccessreviews``: allowed for the token, in
  every namespace but those beginning with ``readonly`` (as a Role that grants ``get`` only).

Every call needs ``Authorization: Bearer`` with the cluster's token, else 401 ``Unauthorized``
as a ``Status``.
"""

from __future__ import annotations

import copy
import hmac
import re
import threading
from typing import Any, Mapping

from runonce.connectors.vendors.sandbox.ledger import Effect, Ledger

RESOURCES = {"deployments": "Deployment", "statefulsets": "StatefulSet", "daemonsets": "DaemonSet"}
PATCH_TYPES = frozenset({"application/strategic-merge-patch+json", "application/merge-patch+json"})
PATCH_QUERY = frozenset({"dryRun", "fieldManager", "fieldValidation", "force", "pretty"})
#: an annotation key: an optional DNS-subdomain prefix and '/', then a name of 63 characters at most
_QUALIFIED = re.compile(r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?"
                        r"[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$")


def status(code: int, reason: str, message: str) -> dict[str, Any]:
    """The API's error body: a ``Status``."""
    return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure", "message": message,
            "reason": reason, "code": code}


def _merge(target: dict[str, Any], patch: Mapping[str, Any]) -> None:
    for key, value in patch.items():
        if value is None:
            target.pop(key, None)
        elif isinstance(value, dict) and isinstance(target.get(key), dict):
            _merge(target[key], value)
        else:
            target[key] = copy.deepcopy(value)


class KubernetesApi:
    def __init__(self, ledger: Ledger, token: str) -> None:
        self.ledger = ledger
        self.token = token
        self._lock = threading.Lock()
        #: (namespace, resource, name) -> the workload
        self.workloads: dict[tuple[str, str, str], dict[str, Any]] = {}

    def handle(self, method: str, parts: list[str], query: Mapping[str, list[str]], body: Any,
               headers: Mapping[str, str]) -> tuple[int, Any]:
        """``parts``: the path's segments, from ``apis``."""
        given = headers.get("Authorization") or ""
        if not hmac.compare_digest(given, f"Bearer {self.token}"):
            return 401, status(401, "Unauthorized", "Unauthorized")
        if parts == ["apis", "authorization.k8s.io", "v1", "selfsubjectaccessreviews"] and method == "POST":
            review = body if isinstance(body, dict) else {}
            asked = ((review.get("spec") or {}).get("resourceAttributes") or {}).get("namespace") or ""
            if asked.startswith("readonly"):
                return 201, {**review, "status": {"allowed": False, "reason": "no RBAC policy matched"}}
            return 201, {**review, "status": {"allowed": True}}
        if len(parts) != 7 or parts[:4] != ["apis", "apps", "v1", "namespaces"] or parts[5] not in RESOURCES:
            return 404, status(404, "NotFound", "the server could not find the requested resource")
        namespace, resource, name = parts[4], parts[5], parts[6]
        if namespace.startswith("nowhere") or name.startswith("missing"):
            return 404, status(404, "NotFound", f'{resource}.apps "{name}" not found')
        if method == "GET":
            with self._lock:
                return 200, copy.deepcopy(self._workload(namespace, resource, name))
        if method == "PATCH":
            return self._patch(namespace, resource, name, query, body, headers.get("Content-Type") or "")
        return 405, status(405, "MethodNotAllowed", f"the server does not allow this method on {resource}")

    def _workload(self, namespace: str, resource: str, name: str) -> dict[str, Any]:
        return self.workloads.setdefault((namespace, resource, name), {
            "apiVersion": "apps/v1", "kind": RESOURCES[resource],
            "metadata": {"name": name, "namespace": namespace, "generation": 1, "resourceVersion": "1"},
            "spec": {"replicas": 2, "template": {"metadata": {"labels": {"app": name}},
                                                 "spec": {"containers": [{"name": name, "image": f"{name}:1"}]}}}})

    def _patch(self, namespace: str, resource: str, name: str, query: Mapping[str, list[str]], body: Any,
               content_type: str) -> tuple[int, Any]:
        if content_type.split(";")[0].strip() not in PATCH_TYPES:
            return 415, status(415, "UnsupportedMediaType", f"the body of the request was in an unknown format - "
                               f"accepted media types include: {', '.join(sorted(PATCH_TYPES))}")
        unknown = sorted(set(query) - PATCH_QUERY)
        if unknown:
            return 400, status(400, "BadRequest", f'unknown query parameter "{unknown[0]}"')
        if not isinstance(body, dict):
            return 400, status(400, "BadRequest", "the patch is not a JSON object")
        annotations = (((body.get("spec") or {}).get("template") or {}).get("metadata") or {}).get("annotations")
        for key in annotations or {}:
            if not _QUALIFIED.match(key):
                return 422, status(422, "Invalid", f'{RESOURCES[resource]}.apps "{name}" is invalid: '
                                   f'spec.template.metadata.annotations: Invalid value: "{key}": '
                                   f"name part must consist of alphanumeric characters, '-', '_' or '.'")
        with self._lock:
            workload = self._workload(namespace, resource, name)
            before = copy.deepcopy(workload["spec"]["template"])
            _merge(workload, body)
            rolled = workload["spec"]["template"] != before
            meta = workload["metadata"]
            meta["resourceVersion"] = str(int(meta["resourceVersion"]) + 1)
            if rolled:
                meta["generation"] += 1
            answer = copy.deepcopy(workload)
        if rolled:
            restarted = (workload["spec"]["template"].get("metadata") or {}).get("annotations", {})
            self.ledger.record(Effect("kubernetes", f"{namespace}/{resource}/{name}", "rollout restart",
                                      {"generation": answer["metadata"]["generation"],
                                       "restartedAt": restarted.get("kubectl.kubernetes.io/restartedAt")}))
        return 200, answer
