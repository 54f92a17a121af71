"""Where the Kubernetes API is and how to authenticate to it: the kubeconfig, read as kubectl.

Replaces the official client's `kube_config.py` and `incluster_config.py` (kubernetes-client/
python, kubernetes/config/), with the same rules:

- Files: the setting, else `$KUBECONFIG` (a colon-separated list, missing files skipped), else
  `~/.kube/config`. Several files merge as kubectl merges them: the first file that names a
  cluster, user or context wins, and so does the first `current-context` (the official client
  lets a later file's current-context win; kubectl does not, and operators expect kubectl).
- The context: the named one, else `current-context`; its cluster and user by name.
- Cluster: `server`, `certificate-authority` / `-data`, `insecure-skip-tls-verify`,
  `tls-server-name`. User: `client-certificate` / `-key` (+ `-data`), `token`, `tokenFile`
  (re-read every minute, as client-go does; its token wins over `token` while the file
  reads, as in kubectl; the official Python client takes `token`), `exec` (a plugin,
  `oncall.backends.kube_exec`), `username`/`password` (basic). `auth-provider` (gcp, azure,
  oidc: removed from kubectl) is refused with the hint to use its exec plugin.
- A relative path resolves against the directory of the kubeconfig file that named it.
- No kubeconfig file at all but `KUBERNETES_SERVICE_HOST`: in-cluster, the pod's service account
  (`token`, `ca.crt`, `namespace` under `SERVICEACCOUNT_DIR`), the token re-read every minute
  (kubelet rotates it) as the official in-cluster loader does.

Every problem is a `KubeConfigError` naming the file and the key (`FILE: users[NAME].token-
File: …`), never a traceback; secrets (tokens, keys) are never part of a message.
"""

from __future__ import annotations

import base64
import binascii
import os
import ssl
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from oncall.settings.model import KubernetesSettings

SERVICEACCOUNT_DIR = Path("/var/run/secrets/kubernetes.io/serviceaccount")
#: client-go's cachingTokenSource and the official in-cluster loader re-read token files so often.
TOKEN_FILE_PERIOD_S = 60.0
IN_CLUSTER = "in-cluster"


class KubeConfigError(Exception):
    """A kubeconfig (or service account) that cannot be used; the message says where and why."""


@dataclass
class Credential:
    """What goes with each request: a header value and/or a client certificate (PEM bytes)."""

    authorization: str | None = None
    cert_pem: bytes | None = None
    key_pem: bytes | None = None
    expires: float | None = None  # time.time() after which it must be made again

    def fresh(self) -> bool:
        return self.expires is None or time.time() < self.expires


class CredentialSource:
    """Gives the current `Credential`; subclasses refresh it (token files, exec plugins)."""

    def __init__(self, credential: Credential | None = None) -> None:
        self._credential = credential or Credential()
        self._lock = threading.Lock()

    def stale(self) -> bool:
        """True when `current` would block (read a file, run a plugin): call it in a thread."""
        return not self._credential.fresh()

    def current(self) -> Credential:
        with self._lock:
            if not self._credential.fresh():
                self._credential = self.make()
            return self._credential

    def make(self) -> Credential:
        return self._credential

    def invalidate(self) -> None:
        """The server said 401: make the credential again on the next request."""
        with self._lock:
            if self._credential.expires is not None:
                self._credential.expires = 0.0


class TokenFile(CredentialSource):
    """A bearer token in a file, re-read every `TOKEN_FILE_PERIOD_S` (rotated tokens).

    As client-go's cachingTokenSource: a re-read that fails keeps the last token read; with
    none read yet, the user's own `token` is sent (kubectl's rule when a kubeconfig user has
    both: the file's token while it reads, the static one otherwise); with neither, the error
    stands. A client certificate beside the token file goes with every credential it makes."""

    def __init__(
        self,
        path: Path,
        where: str,
        *,
        token: str | None = None,
        cert_pem: bytes | None = None,
        key_pem: bytes | None = None,
    ) -> None:
        self.path, self.where = path, where
        self._static = None if token is None else f"Bearer {token}"
        self._cert = (cert_pem, key_pem)
        self._read: str | None = None  # the last token read from the file
        super().__init__(self.make())

    def make(self) -> Credential:
        try:
            token = read_file(self.path, self.where).decode("utf-8", errors="replace").strip()
            if not token:
                raise KubeConfigError(f"{self.where}: {self.path} is empty")
            self._read = f"Bearer {token}"
        except KubeConfigError:
            if self._read is None and self._static is None:
                raise
        authorization = self._read or self._static
        cert, key = self._cert
        expires = time.time() + TOKEN_FILE_PERIOD_S
        return Credential(authorization, cert_pem=cert, key_pem=key, expires=expires)


@dataclass
class KubeConnection:
    """One API server and the credentials to talk to it, as a context describes them."""

    server: str  # scheme://host:port, no trailing slash
    context: str  # the context's name, or "in-cluster"
    credentials: CredentialSource
    ca_pem: bytes | None = None  # None: the system's roots
    verify: bool = True
    tls_server_name: str | None = None
    namespace: str | None = None
    where: str = ""  # the kubeconfig path(s), for messages
    _contexts: dict[bytes | None, ssl.SSLContext] = field(default_factory=dict, repr=False)

    @property
    def https(self) -> bool:
        return self.server.startswith("https://")

    def ssl_context(self, credential: Credential) -> ssl.SSLContext:
        """The TLS settings for a credential (one per client certificate, made once)."""
        key = credential.cert_pem
        if key not in self._contexts:
            self._contexts[key] = _ssl_context(self, credential)
        return self._contexts[key]


def read_file(path: Path, where: str) -> bytes:
    try:
        return path.read_bytes()
    except OSError as exc:
        raise KubeConfigError(f"{where}: cannot read {path}: {exc.strerror or exc}") from exc


def _ssl_context(conn: KubeConnection, credential: Credential) -> ssl.SSLContext:
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    if not conn.verify:
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    elif conn.ca_pem is not None:
        try:
            context.load_verify_locations(cadata=conn.ca_pem.decode("ascii", errors="replace"))
        except ssl.SSLError as exc:
            raise KubeConfigError(f"{conn.where}: certificate-authority is no PEM: {exc}") from exc
    else:
        context.load_default_certs()
    if credential.cert_pem is not None and credential.key_pem is not None:
        # ssl loads a client certificate from files only: a private directory, removed at once.
        with tempfile.TemporaryDirectory(prefix="oncall-kube-") as tmp:
            cert, key = Path(tmp) / "client.crt", Path(tmp) / "client.key"
            for path, data in ((cert, credential.cert_pem), (key, credential.key_pem)):
                fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
                with os.fdopen(fd, "wb") as handle:
                    handle.write(data)
            try:
                context.load_cert_chain(cert, key)
            except ssl.SSLError as exc:
                detail = f"client-certificate / client-key do not load: {exc}"
                raise KubeConfigError(f"{conn.where}: {detail}") from exc
    return context


class _Entry:
    """One kubeconfig item (a cluster, user or context) and the file that defined it."""

    def __init__(self, kind: str, name: str, body: dict[str, Any], path: Path) -> None:
        self.kind, self.name, self.body, self.path = kind, name, body, path

    @property
    def where(self) -> str:
        return f"{self.path}: {self.kind}[{self.name}]"

    def text(self, key: str) -> str | None:
        value = self.body.get(key)
        if value is None or value == "":
            return None
        if not isinstance(value, str):
            raise KubeConfigError(f"{self.where}.{key}: expected a string")
        return value

    def file_or_data(self, file_key: str, data_key: str) -> bytes | None:
        """The bytes of `KEY-data` (base64) or of the file `KEY` (relative to this kubeconfig)."""
        data = self.text(data_key)
        if data is not None:
            try:
                return base64.b64decode("".join(data.split()), validate=True)
            except (binascii.Error, ValueError) as exc:
                raise KubeConfigError(f"{self.where}.{data_key}: not base64 ({exc})") from exc
        name = self.text(file_key)
        return None if name is None else read_file(self.resolve(name), f"{self.where}.{file_key}")

    def resolve(self, name: str) -> Path:
        path = Path(name).expanduser()
        return path if path.is_absolute() else self.path.parent / path


def kubeconfig_paths(settings: KubernetesSettings) -> list[Path]:
    """The kubeconfig files as kubectl picks them (the existing ones only)."""
    if settings.kubeconfig is not None:
        return [settings.kubeconfig.expanduser()]
    # Read now, not at import: a test or a wrapper may set KUBECONFIG after oncall is imported.
    listed = os.environ.get("KUBECONFIG") or str(Path("~/.kube/config").expanduser())
    files = [Path(p).expanduser() for p in listed.split(os.pathsep) if p]
    return [p for p in files if p.is_file()]


def _load_file(path: Path) -> dict[str, Any]:
    text = read_file(path, "kubeconfig")
    try:
        loaded = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        at = f":{mark.line + 1}:{mark.column + 1}" if mark is not None else ""
        raise KubeConfigError(f"{path}{at}: not YAML: {getattr(exc, 'problem', exc)}") from exc
    if loaded is None:
        raise KubeConfigError(f"{path}: the kubeconfig is empty")
    if not isinstance(loaded, dict):
        raise KubeConfigError(f"{path}: expected a mapping (apiVersion, clusters, users, …)")
    return loaded


def _merged(paths: list[Path]) -> tuple[dict[tuple[str, str], _Entry], str | None]:
    """kubectl's merge: the first file naming an item (or current-context) wins."""
    entries: dict[tuple[str, str], _Entry] = {}
    current: str | None = None
    for path in paths:
        doc = _load_file(path)
        current = current or (str(doc["current-context"]) if doc.get("current-context") else None)
        for kind, inner in (("clusters", "cluster"), ("users", "user"), ("contexts", "context")):
            items = doc.get(kind) or []
            if not isinstance(items, list):
                raise KubeConfigError(f"{path}: {kind}: expected a list")
            for index, item in enumerate(items):
                if not isinstance(item, dict) or not isinstance(item.get("name"), str):
                    raise KubeConfigError(f"{path}: {kind}[{index}]: expected name and {inner}")
                body = item.get(inner) or {}
                if not isinstance(body, dict):
                    raise KubeConfigError(f"{path}: {kind}[{item['name']}].{inner}: not a mapping")
                entries.setdefault((kind, item["name"]), _Entry(kind, item["name"], body, path))
    return entries, current


def load_connection(
    settings: KubernetesSettings,
    *,
    serviceaccount_dir: Path | None = None,
    exec_source: Callable[[_Entry, _Entry], CredentialSource] | None = None,
) -> KubeConnection:
    """The connection `settings` name (blocking: reads files, may run an exec plugin)."""
    paths = kubeconfig_paths(settings)
    if not paths and settings.kubeconfig is None and os.environ.get("KUBERNETES_SERVICE_HOST"):
        return in_cluster(serviceaccount_dir or SERVICEACCOUNT_DIR)
    if not paths:
        named = settings.kubeconfig or os.environ.get("KUBECONFIG") or "~/.kube/config"
        raise KubeConfigError(f"{named}: no kubeconfig file (and not in a cluster)")
    entries, current = _merged(paths)
    where = os.pathsep.join(str(p) for p in paths)
    name = settings.context or current
    if not name:
        raise KubeConfigError(f"{where}: no current-context, and no context configured")
    context = entries.get(("contexts", name))
    if context is None:
        raise KubeConfigError(f"{where}: no context named {name!r}")
    cluster_name = context.text("cluster")
    cluster = entries.get(("clusters", cluster_name or ""))
    if cluster is None:
        raise KubeConfigError(f"{context.where}.cluster: no cluster named {cluster_name!r}")
    server = cluster.text("server")
    if server is None:
        raise KubeConfigError(f"{cluster.where}.server: missing")
    user_name = context.text("user")
    user = entries.get(("users", user_name or "")) or _Entry("users", "", {}, context.path)
    if user_name and not user.name:
        raise KubeConfigError(f"{context.where}.user: no user named {user_name!r}")
    from oncall.backends.kube_exec import ExecPlugin

    make_exec = exec_source or ExecPlugin.from_kubeconfig
    conn = KubeConnection(
        server=server.rstrip("/"),
        context=name,
        credentials=_user_credentials(user, cluster, make_exec),
        ca_pem=cluster.file_or_data("certificate-authority", "certificate-authority-data"),
        verify=not bool(cluster.body.get("insecure-skip-tls-verify")),
        tls_server_name=cluster.text("tls-server-name"),
        namespace=context.text("namespace"),
        where=where,
    )
    if conn.https:
        conn.ssl_context(conn.credentials.current())  # bad CA or key: say so now, not per call
    return conn


def _user_credentials(
    user: _Entry, cluster: _Entry, make_exec: Callable[[_Entry, _Entry], CredentialSource]
) -> CredentialSource:
    """client-go's order: auth-provider (refused), tokenFile / token, exec, basic; plus certs."""
    if user.body.get("auth-provider"):
        provider = (user.body["auth-provider"] or {}).get("name", "?")
        raise KubeConfigError(
            f"{user.where}.auth-provider: {provider!r} is not supported (kubectl removed the "
            "auth providers): use its exec plugin (kubelogin, gke-gcloud-auth-plugin)"
        )
    cert = user.file_or_data("client-certificate", "client-certificate-data")
    key = user.file_or_data("client-key", "client-key-data")
    if (cert is None) != (key is None):
        raise KubeConfigError(f"{user.where}: client-certificate and client-key go together")
    static = Credential(cert_pem=cert, key_pem=key)
    token, token_file = user.text("token"), user.text("tokenFile")
    if token_file is not None:  # client-go: the file's token, while it reads, over `token`
        where = f"{user.where}.tokenFile"
        path = user.resolve(token_file)
        return TokenFile(path, where, token=token, cert_pem=cert, key_pem=key)
    if token is not None:
        static.authorization = f"Bearer {token}"
        return CredentialSource(static)
    if user.body.get("exec"):
        return make_exec(user, cluster)
    login, password = user.text("username"), user.text("password")
    if login is not None and password is not None:
        pair = base64.b64encode(f"{login}:{password}".encode()).decode("ascii")
        static.authorization = f"Basic {pair}"
    return CredentialSource(static)


def in_cluster(directory: Path) -> KubeConnection:
    """The pod's service account, as the official `load_incluster_config` reads it."""
    host, port = (
        os.environ.get("KUBERNETES_SERVICE_HOST"),
        os.environ.get("KUBERNETES_SERVICE_PORT"),
    )
    if not host or not port:
        raise KubeConfigError("in-cluster: KUBERNETES_SERVICE_HOST/PORT are not both set")
    host = f"[{host}]" if ":" in host else host  # an IPv6 address
    where = f"in-cluster ({directory})"
    ca = read_file(directory / "ca.crt", where)
    if not ca.strip():
        raise KubeConfigError(f"{where}: ca.crt is empty")
    namespace_file = directory / "namespace"
    namespace = namespace_file.read_text().strip() if namespace_file.is_file() else None
    conn = KubeConnection(
        server=f"https://{host}:{port}",
        context=IN_CLUSTER,
        credentials=TokenFile(directory / "token", f"{where} token"),
        ca_pem=ca,
        namespace=namespace,
        where=where,
    )
    conn.ssl_context(conn.credentials.current())
    return conn
