"""Kubernetes exec credential plugins (`users[].user.exec`): run one, read its ExecCredential.

The protocol of client.authentication.k8s.io/v1 and v1beta1 (kubernetes docs, "client-go
credential plugins"; client-go `plugin/pkg/client/auth/exec/exec.go`; the official Python
client's `config/exec_provider.py`):

- `command` (a bare name: looked up on PATH; a relative path: against the kubeconfig's
  directory, which is also the working directory), `args`, `env` added to ours.
- `KUBERNETES_EXEC_INFO`: `{"apiVersion", "kind": "ExecCredential", "spec": {"interactive":
  false}}`, with `spec.cluster` when `provideClusterInfo` is set. oncall never hands the plugin
  a terminal (it runs under a TUI, or in scripts): stdin is closed, so `interactiveMode:
  Always` is refused and `IfAvailable` runs non-interactively; v1 requires the field, as
  client-go does.
- Its stdout: an ExecCredential of the same apiVersion whose `status` has `token` and/or
  `clientCertificateData` + `clientKeyData` (PEM text; both sent, as client-go sends them),
  and maybe `expirationTimestamp`; the credential is kept until then (for ever without one)
  and after a 401.

A plugin that is missing, fails, hangs past `EXEC_TIMEOUT_S` or prints something else is a
`KubeConfigError` naming the command (and its `installHint` when it is missing); the plugin's
output never appears in a message (it holds the token), its stderr's last line does.
"""

from __future__ import annotations

import base64
import json
import os
import shutil
import subprocess
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from oncall.backends.kube_config import Credential, CredentialSource, KubeConfigError

if TYPE_CHECKING:
    from oncall.backends.kube_config import _Entry

API_VERSIONS = ("client.authentication.k8s.io/v1", "client.authentication.k8s.io/v1beta1")
#: The cluster extension a plugin gets as `spec.cluster.config` (client-go's name).
EXEC_EXTENSION = "client.authentication.k8s.io/exec"
#: A plugin that asks a cloud for a token answers in seconds; one that waits for a browser
#: login would wait for ever without a terminal.
EXEC_TIMEOUT_S = 30.0


class ExecPlugin(CredentialSource):
    """One `exec` stanza of a kubeconfig user; `current()` runs it when needed."""

    def __init__(self, spec: dict[str, Any], where: str, base: Path, cluster: dict[str, Any]):
        self.where = where
        self.api_version = str(spec.get("apiVersion") or "")
        if self.api_version not in API_VERSIONS:
            raise KubeConfigError(
                f"{where}.apiVersion: {self.api_version or 'missing'}; "
                f"supported: {', '.join(API_VERSIONS)}"
            )
        command = spec.get("command")
        if not isinstance(command, str) or not command:
            raise KubeConfigError(f"{where}.command: missing")
        mode = spec.get("interactiveMode")
        if mode is None and self.api_version.endswith("/v1"):
            raise KubeConfigError(f"{where}.interactiveMode: required by {self.api_version}")
        if mode == "Always":
            raise KubeConfigError(
                f"{where}: {command} needs a terminal (interactiveMode: Always), and oncall "
                "gives plugins none; log in with it first, or use a non-interactive mode"
            )
        args = spec.get("args") or []
        env_items = spec.get("env") or []
        if not isinstance(args, list) or not isinstance(env_items, list):
            raise KubeConfigError(f"{where}: args and env must be lists")
        self.command = command
        self.hint = str(spec.get("installHint") or "").strip()
        self.argv = [self._resolve(command, base), *(str(a) for a in args)]
        self.env = dict(os.environ)
        for item in env_items:
            if not isinstance(item, dict) or "name" not in item:
                raise KubeConfigError(f"{where}.env: each entry needs a name and a value")
            self.env[str(item["name"])] = str(item.get("value", ""))
        self.base = base
        info: dict[str, Any] = {"interactive": False}
        if spec.get("provideClusterInfo"):
            info["cluster"] = cluster
        self.exec_info = {"apiVersion": self.api_version, "kind": "ExecCredential", "spec": info}
        super().__init__(Credential(expires=0.0))  # made on first use

    @classmethod
    def from_kubeconfig(cls, user: _Entry, cluster: _Entry) -> ExecPlugin:
        spec = user.body.get("exec")
        if not isinstance(spec, dict):
            raise KubeConfigError(f"{user.where}.exec: not a mapping")
        return cls(spec, f"{user.where}.exec", user.path.parent, _cluster_info(cluster))

    def _resolve(self, command: str, base: Path) -> str:
        if os.sep in command and not Path(command).is_absolute():
            return str(base / command)
        return command

    def make(self) -> Credential:
        env = {**self.env, "KUBERNETES_EXEC_INFO": json.dumps(self.exec_info)}
        missing = self.argv[0] if shutil.which(self.argv[0], path=env.get("PATH")) is None else ""
        if missing:
            hint = f"; {self.hint}" if self.hint else ""
            raise KubeConfigError(f"{self.where}: exec plugin {self.command!r} not found{hint}")
        try:
            done = subprocess.run(  # the kubeconfig's own plugin, no shell
                self.argv,
                stdin=subprocess.DEVNULL,
                capture_output=True,
                env=env,
                cwd=self.base,
                timeout=EXEC_TIMEOUT_S,
                check=False,
            )
        except subprocess.TimeoutExpired as exc:
            raise self._failed(f"no answer within {EXEC_TIMEOUT_S:g}s") from exc
        except OSError as exc:
            raise self._failed(exc.strerror or str(exc)) from exc
        if done.returncode != 0:
            lines = done.stderr.decode("utf-8", errors="replace").strip().splitlines()
            tail = f": {lines[-1][:200]}" if lines else ""
            raise self._failed(f"exit status {done.returncode}{tail}")
        return self._credential_of(done.stdout)

    def _failed(self, why: str) -> KubeConfigError:
        return KubeConfigError(f"{self.where}: exec plugin {self.command!r} failed: {why}")

    def _credential_of(self, stdout: bytes) -> Credential:
        try:
            answer = json.loads(stdout)
        except ValueError as exc:
            raise self._failed("its output is not an ExecCredential (not JSON)") from exc
        if not isinstance(answer, dict) or answer.get("kind") != "ExecCredential":
            raise self._failed("its output is not an ExecCredential")
        if answer.get("apiVersion") != self.api_version:
            raise self._failed(f"it answered {answer.get('apiVersion')}, not {self.api_version}")
        status = answer.get("status")
        if not isinstance(status, dict):
            raise self._failed("its ExecCredential has no status")
        token, cert, key = (
            status.get(k) for k in ("token", "clientCertificateData", "clientKeyData")
        )
        if bool(cert) != bool(key):
            raise self._failed(
                "its status has a client certificate without its key, or a key alone"
            )
        if not token and not cert:
            raise self._failed("its status has neither token nor client certificate and key")
        # client-go sends both when a plugin answers both (the certificate for the handshake).
        credential = Credential(authorization=f"Bearer {token}" if token else None)
        if cert and key:
            credential.cert_pem, credential.key_pem = str(cert).encode(), str(key).encode()
        stamp = status.get("expirationTimestamp")
        if stamp:
            try:
                credential.expires = datetime.fromisoformat(str(stamp)).timestamp()
            except ValueError as exc:
                raise self._failed(f"expirationTimestamp {stamp!r} is not RFC 3339") from exc
        return credential

    def invalidate(self) -> None:
        with self._lock:
            self._credential.expires = 0.0  # client-go runs the plugin again after a 401


def _cluster_info(cluster: _Entry) -> dict[str, Any]:
    """`spec.cluster` of KUBERNETES_EXEC_INFO (client-go's clientauthentication Cluster)."""
    info: dict[str, Any] = {"server": cluster.body.get("server", "")}
    for key in ("tls-server-name", "insecure-skip-tls-verify", "proxy-url"):
        if cluster.body.get(key):
            info[key] = cluster.body[key]
    ca = cluster.file_or_data("certificate-authority", "certificate-authority-data")
    if ca is not None:
        info["certificate-authority-data"] = base64.b64encode(ca).decode("ascii")
    for extension in cluster.body.get("extensions") or []:
        if isinstance(extension, dict) and extension.get("name") == EXEC_EXTENSION:
            info["config"] = extension.get("extension")
    return info
