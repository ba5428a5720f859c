"""Where a Kubernetes API server is and how to prove who we are to it, as kubectl finds out:
a kubeconfig file (its current context, or one named), or the pod's own service account
(in-cluster: ``KUBERNETES_SERVICE_HOST``/``_PORT`` and the token, CA and namespace files under
``/var/run/secrets/kubernetes.io/serviceaccount``).

Supported credentials: a bearer token (``token``, ``tokenFile``, the service account's token,
re-read on every call because the kubelet rotates it) and a client certificate
(``client-certificate``/``client-key``, or their ``-data``). An ``exec`` plugin (``aws eks
get-token``, ``gke-gcloud-auth-plugin``) or an ``auth-provider`` is refused by name: runonce runs
no program named in a file; give the executor a service account's token instead.
``insecure-skip-tls-verify`` is refused too: the server's certificate is always verified."""

from __future__ import annotations

import base64
import os
import ssl
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping
from urllib.parse import urlsplit

from runonce.connectors.toolkit.bearer import BearerSource, StaticBearer
from runonce.connectors.toolkit.errors import TransientVendorError
from runonce.connectors.toolkit.secrets import Secret
from runonce.connectors.toolkit.tls import is_loopback
from runonce.connectors.toolkit.transport import VendorHttp

SERVICE_ACCOUNT_DIR = Path("/var/run/secrets/kubernetes.io/serviceaccount")


class KubeconfigError(ValueError):
    """The kubeconfig (or the pod's service account) cannot give a server and credentials."""


@dataclass(frozen=True, slots=True)
class TokenFile:
    """A token file, read on every call: a projected service-account token is rotated in place."""

    path: Path

    @property
    def source(self) -> str:
        return f"token file {self.path}"

    def bearer(self) -> str:
        try:
            return self.path.read_text(encoding="utf-8").strip()
        except OSError as exc:  # nothing was sent: a rotation may be under way
            raise TransientVendorError(f"cannot read the token file {self.path}: {exc.strerror}") from None


@dataclass(frozen=True, slots=True)
class ApiServer:
    url: str
    tls: ssl.SSLContext | None
    #: None: the client certificate in ``tls`` is the credential
    token: BearerSource | None
    namespace: str
    #: where this came from, for messages: never a credential
    source: str

    def headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token.bearer()}"} if self.token is not None else {}

    def http(self, timeout_s: float) -> VendorHttp:
        """The connector's HTTP seam to this server, with its TLS (a client certificate included)."""
        return VendorHttp(self.url, timeout_s=timeout_s, tls=self.tls)


def _server(url: str, where: str) -> str:
    parts = urlsplit(url)
    if parts.scheme not in ("https", "http") or not parts.hostname:
        raise KubeconfigError(f"{where}: server must be an https:// URL, got {url!r}")
    if parts.scheme == "http" and not is_loopback(parts.hostname):
        raise KubeconfigError(f"{where}: plain http is refused except to loopback ({url!r})")
    return url.rstrip("/")


def _named(items: Any, name: str, what: str, where: str) -> Mapping[str, Any]:
    for item in items or []:
        if isinstance(item, dict) and item.get("name") == name and isinstance(item.get(what), dict):
            return item[what]  # type: ignore[no-any-return]
    raise KubeconfigError(f"{where}: no {what} named {name!r}")


def from_kubeconfig(path: Path, context: str | None = None) -> ApiServer:
    """The server, credentials and namespace of ``context`` (else the current context)."""
    import yaml  # the ``kubernetes`` extra's: only a kubeconfig needs it

    where = f"kubeconfig {path}"
    try:
        doc = yaml.safe_load(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise KubeconfigError(f"cannot read {where}: {exc.strerror}") from None
    except yaml.YAMLError as exc:
        # PyYAML's message quotes the offending line, which may be a token's: its place only
        mark = exc.problem_mark if isinstance(exc, yaml.MarkedYAMLError) else None
        problem = exc.problem if isinstance(exc, yaml.MarkedYAMLError) and exc.problem else type(exc).__name__
        at = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
        raise KubeconfigError(f"{where} is not YAML{at}: {problem}") from None
    if not isinstance(doc, dict):
        raise KubeconfigError(f"{where} is not a kubeconfig")
    name = context or doc.get("current-context")
    if not name:
        raise KubeconfigError(f"{where}: no current-context; name one with context = \"...\"")
    ctx = _named(doc.get("contexts"), str(name), "context", where)
    where = f"{where}, context {name}"
    cluster = _named(doc.get("clusters"), str(ctx.get("cluster")), "cluster", where)
    user = _named(doc.get("users"), str(ctx.get("user")), "user", where)
    base = path.parent
    if cluster.get("insecure-skip-tls-verify"):
        raise KubeconfigError(f"{where}: insecure-skip-tls-verify is refused: give the cluster's CA")
    for refused in ("exec", "auth-provider"):
        if user.get(refused):
            raise KubeconfigError(f"{where}: user {ctx.get('user')!r} authenticates with {refused!r}, which "
                                  f"runonce does not run; give it a service account's token (token or tokenFile)")
    url = _server(str(cluster.get("server") or ""), where)
    tls = None
    if url.startswith("https"):
        tls = _context(cluster, base)
        _client_certificate(tls, user, base, where)
    token: BearerSource | None = None
    if user.get("token"):
        token = StaticBearer(Secret(f"{where}, user {ctx.get('user')}", str(user["token"])))
    elif user.get("tokenFile"):
        token = TokenFile(base / str(user["tokenFile"]))
    if token is None and not user.get("client-certificate") and not user.get("client-certificate-data"):
        raise KubeconfigError(f"{where}: user {ctx.get('user')!r} has no token, tokenFile or client certificate")
    return ApiServer(url, tls, token, str(ctx.get("namespace") or "default"), where)


def in_cluster(environ: Mapping[str, str], folder: Path = SERVICE_ACCOUNT_DIR) -> ApiServer:
    """The pod's service account, as client-go's ``rest.InClusterConfig`` reads it."""
    host, port = environ.get("KUBERNETES_SERVICE_HOST"), environ.get("KUBERNETES_SERVICE_PORT")
    if not host or not port:
        raise KubeconfigError("not in a pod: KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT are not set")
    token = folder / "token"
    if not token.is_file():
        raise KubeconfigError(f"no service account token at {token}")
    ca = folder / "ca.crt"
    namespace_file = folder / "namespace"
    namespace = namespace_file.read_text(encoding="utf-8").strip() if namespace_file.is_file() else "default"
    url = _server(f"https://{host if ':' not in host else f'[{host}]'}:{port}", "in-cluster")
    tls = ssl.create_default_context(cafile=str(ca) if ca.is_file() else None)
    return ApiServer(url, tls, TokenFile(token), namespace, f"in-cluster service account ({folder})")


def _context(cluster: Mapping[str, Any], base: Path) -> ssl.SSLContext:
    if cluster.get("certificate-authority-data"):
        pem = base64.b64decode(str(cluster["certificate-authority-data"])).decode("ascii")
        return ssl.create_default_context(cadata=pem)
    if cluster.get("certificate-authority"):
        return ssl.create_default_context(cafile=str(base / str(cluster["certificate-authority"])))
    return ssl.create_default_context()


def _client_certificate(tls: ssl.SSLContext, user: Mapping[str, Any], base: Path, where: str) -> None:
    if user.get("client-certificate") and user.get("client-key"):
        tls.load_cert_chain(str(base / str(user["client-certificate"])), str(base / str(user["client-key"])))
    elif user.get("client-certificate-data") and user.get("client-key-data"):
        # ssl loads a certificate only from files: a private folder, removed once loaded
        with tempfile.TemporaryDirectory() as folder:
            cert, key = Path(folder) / "cert.pem", Path(folder) / "key.pem"
            for target, field in ((cert, "client-certificate-data"), (key, "client-key-data")):
                fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
                with os.fdopen(fd, "wb") as out:
                    out.write(base64.b64decode(str(user[field])))
            try:
                tls.load_cert_chain(str(cert), str(key))
            except ssl.SSLError as exc:
                raise KubeconfigError(f"{where}: the client certificate or key does not load: {exc}") from None
