"""oncall's Kubernetes client (oncall.backends.kube*) authenticating to the drill's HTTPS API with
each kubeconfig credential it supports, as the official client and kubectl do: bearer token,
tokenFile (re-read), exec plugins (token or certificate, expiry, failures), client certificates,
in-cluster service accounts; and the TLS rules (CA, insecure-skip-tls-verify, tls-server-name).

The simulator authenticates bearer tokens only; a client certificate is checked by a listener
that requires one (the TLS handshake fails without it), the token still naming the user."""

from __future__ import annotations

import base64
import json
import os
import ssl
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import trustme

from oncall.backends import kube_config
from oncall.backends.kube import KubeReader
from oncall.errors import BackendError
from oncall.settings.model import KubernetesSettings
from tests.drill.kube.conftest import NS, Https, TlsSimulator, write_config

PLUGIN = """#!{python}
import json, os, sys
with open(os.environ["LOG"], "a") as log:
    info = json.loads(os.environ.get("KUBERNETES_EXEC_INFO") or "{{}}")
    log.write(json.dumps({{"info": info, "tty": os.isatty(0), "stdin": sys.stdin.read()}}) + "\\n")
if os.environ.get("FAIL"):
    print("error: the SSO session expired, run sso login", file=sys.stderr)
    sys.exit(1)
status = json.loads(os.environ["STATUS"])
print(json.dumps({{"apiVersion": os.environ["API"], "kind": "ExecCredential", "status": status}}))
"""
V1 = "client.authentication.k8s.io/v1"
V1BETA1 = "client.authentication.k8s.io/v1beta1"


async def _pod_names(path: Path, context: str | None = None) -> list[str]:
    settings = KubernetesSettings(kubeconfig=path, context=context, namespace=NS, timeout=5.0)
    reader = await KubeReader.open(settings)
    try:
        return sorted(p["metadata"]["name"] for p in await reader.list_pods(NS, "app=vllm"))
    finally:
        await reader.aclose()


async def _error(path: Path) -> BackendError:
    with pytest.raises(BackendError) as caught:
        await _pod_names(path)
    return caught.value


def _plugin(directory: Path, status: dict[str, Any] | None, api: str = V1, **env: str) -> Any:
    """An exec stanza running a Python plugin from the kubeconfig's directory (relative)."""
    script = directory / "plugin.py"
    script.write_text(PLUGIN.format(python=sys.executable), encoding="utf-8")
    script.chmod(0o755)
    values = {"LOG": str(directory / "runs.jsonl"), "API": api, "STATUS": json.dumps(status), **env}
    spec: dict[str, Any] = {"apiVersion": api, "command": "./plugin.py", "args": ["get-token"]}
    spec["env"] = [{"name": k, "value": v} for k, v in values.items()]
    if api == V1:
        spec["interactiveMode"] = "IfAvailable"
    return spec


def _runs(directory: Path) -> list[dict[str, Any]]:
    log = directory / "runs.jsonl"
    lines = log.read_text().splitlines() if log.exists() else []
    return [json.loads(line) for line in lines]


# -- tokens ------------------------------------------------------------------------------------


async def test_bearer_token_over_https(https: Https, tmp_path: Path) -> None:
    path = write_config(tmp_path / "kubeconfig", https.config())
    assert len(await _pod_names(path)) == 2


async def test_a_wrong_token_is_a_401(https: Https, tmp_path: Path) -> None:
    error = await _error(write_config(tmp_path / "kc", https.config(token="not-a-token")))
    assert (error.reason, error.http_status) == ("auth", 401)


async def test_token_file_is_relative_to_the_kubeconfig_and_re_read(
    https: Https, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(kube_config, "TOKEN_FILE_PERIOD_S", 0.0)  # re-read at every request
    (tmp_path / "token").write_text("stale\n")
    path = write_config(tmp_path / "kubeconfig", https.config(tokenFile="token"))
    settings = KubernetesSettings(kubeconfig=path, namespace=NS, timeout=5.0)
    reader = await KubeReader.open(settings)
    try:
        with pytest.raises(BackendError) as caught:
            await reader.list_pods(NS)
        assert caught.value.http_status == 401
        (tmp_path / "token").write_text(https.token + "\n")  # the token was rotated
        assert len(await reader.list_pods(NS, "app=vllm")) == 2
    finally:
        await reader.aclose()


async def test_a_missing_token_file_is_a_located_config_error(https: Https, tmp_path: Path) -> None:
    path = write_config(tmp_path / "kubeconfig", https.config(tokenFile="nowhere/token"))
    error = await _error(path)
    assert error.reason == "config"
    assert f"{path}: users[oncall-drill-operator].tokenFile" in error.detail
    assert str(tmp_path / "nowhere" / "token") in error.detail


async def test_token_file_wins_over_token_while_it_reads(
    https: Https, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """kubectl (client-go's clientcmd) with both: the file's token while the file reads (the
    last one read if a re-read fails), the user's `token` when it never read."""
    monkeypatch.setattr(kube_config, "TOKEN_FILE_PERIOD_S", 0.0)  # re-read at every request
    (tmp_path / "token").write_text(https.token + "\n")
    both = https.config(token="not-a-token", tokenFile="token")
    settings = KubernetesSettings(kubeconfig=write_config(tmp_path / "kc", both), namespace=NS)
    reader = await KubeReader.open(settings)
    try:
        assert len(await reader.list_pods(NS, "app=vllm")) == 2
        (tmp_path / "token").unlink()  # a re-read fails: the last token read stands
        assert len(await reader.list_pods(NS, "app=vllm")) == 2
    finally:
        await reader.aclose()
    never = https.config(token=https.token, tokenFile="nowhere/token")
    assert len(await _pod_names(write_config(tmp_path / "kc2", never))) == 2
    neither = https.config(token="not-a-token", tokenFile="token")  # the file is gone: 401
    error = await _error(write_config(tmp_path / "kc3", neither))
    assert (error.reason, error.http_status) == ("auth", 401)


# -- exec plugins ------------------------------------------------------------------------------


@pytest.mark.parametrize("api", [V1, V1BETA1])
async def test_exec_plugin_token_is_cached_until_it_expires(
    https: Https, tmp_path: Path, api: str
) -> None:
    status = {"token": https.token, "expirationTimestamp": "2999-01-01T00:00:00Z"}
    path = write_config(tmp_path / "kubeconfig", https.config(exec=_plugin(tmp_path, status, api)))
    settings = KubernetesSettings(kubeconfig=path, namespace=NS, timeout=5.0)
    reader = await KubeReader.open(settings)
    try:
        for _ in range(3):
            assert len(await reader.list_pods(NS, "app=vllm")) == 2
    finally:
        await reader.aclose()
    runs = _runs(tmp_path)
    assert len(runs) == 1
    assert runs[0]["info"] == {"apiVersion": api, "kind": "ExecCredential",
                               "spec": {"interactive": False}}  # fmt: skip
    assert runs[0]["tty"] is False and runs[0]["stdin"] == ""


async def test_an_expired_exec_credential_runs_the_plugin_again(
    https: Https, tmp_path: Path
) -> None:
    status = {"token": https.token, "expirationTimestamp": "2000-01-01T00:00:00Z"}
    path = write_config(tmp_path / "kubeconfig", https.config(exec=_plugin(tmp_path, status)))
    reader = await KubeReader.open(KubernetesSettings(kubeconfig=path, namespace=NS))
    try:
        await reader.list_pods(NS)
        await reader.list_pods(NS)
    finally:
        await reader.aclose()
    assert len(_runs(tmp_path)) == 3  # at open (as the official client), then per request


async def test_a_failing_plugin_names_its_command_and_its_error(
    https: Https, tmp_path: Path
) -> None:
    spec = _plugin(tmp_path, None, FAIL="1")
    error = await _error(write_config(tmp_path / "kubeconfig", https.config(exec=spec)))
    assert error.reason == "config"
    assert "exec plugin './plugin.py' failed: exit status 1" in error.detail
    assert "the SSO session expired" in error.detail
    assert https.token not in str(error)


async def test_a_missing_plugin_says_how_to_install_it(https: Https, tmp_path: Path) -> None:
    spec = {"apiVersion": V1, "command": "no-such-auth-plugin", "interactiveMode": "Never",
            "installHint": "install it with: brew install no-such-auth-plugin"}  # fmt: skip
    error = await _error(write_config(tmp_path / "kubeconfig", https.config(exec=spec)))
    assert error.reason == "config"
    assert "'no-such-auth-plugin' not found; install it with: brew install" in error.detail


@pytest.mark.parametrize(
    ("spec", "says"),
    [
        ({"apiVersion": V1, "command": "x"}, "interactiveMode: required"),
        ({"apiVersion": V1, "command": "x", "interactiveMode": "Always"}, "needs a terminal"),
        ({"apiVersion": "client.authentication.k8s.io/v1alpha1", "command": "x"}, "supported"),
    ],
)
async def test_exec_stanzas_the_plugin_protocol_refuses(
    https: Https, tmp_path: Path, spec: dict[str, Any], says: str
) -> None:
    error = await _error(write_config(tmp_path / "kubeconfig", https.config(exec=spec)))
    assert error.reason == "config" and says in error.detail


async def test_a_plugin_answering_nonsense_is_a_config_error(https: Https, tmp_path: Path) -> None:
    spec = _plugin(tmp_path, {"expirationTimestamp": "2999-01-01T00:00:00Z"})
    error = await _error(write_config(tmp_path / "kubeconfig", https.config(exec=spec)))
    assert "neither token nor client certificate" in error.detail


def test_auth_providers_are_refused_with_the_exec_hint(tmp_path: Path) -> None:
    doc = {"clusters": [{"name": "c", "cluster": {"server": "https://127.0.0.1:1"}}],
           "users": [{"name": "u", "user": {"auth-provider": {"name": "oidc"}}}],
           "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u"}}],
           "current-context": "x"}  # fmt: skip
    path = write_config(tmp_path / "kubeconfig", doc)
    with pytest.raises(kube_config.KubeConfigError, match=r"'oidc' is not supported.*exec plugin"):
        kube_config.load_connection(KubernetesSettings(kubeconfig=path))


# -- client certificates -------------------------------------------------------------------------


@pytest.fixture(scope="module")
def client_ca() -> trustme.CA:
    return trustme.CA()


@pytest.fixture(scope="module")
def mtls(https: Https, client_ca: trustme.CA) -> Iterator[TlsSimulator]:
    """The drill's certificate on a listener that requires a client certificate of client_ca.

    TLS 1.2 at most: there the server refuses a missing certificate inside the handshake (a
    "tls" error); under TLS 1.3 the refusal comes after it, and the client sees the server
    hang up ("disconnected"), as it would with any client."""
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.maximum_version = ssl.TLSVersion.TLSv1_2
    context.load_cert_chain(https.ca, https.key)
    context.verify_mode = ssl.CERT_REQUIRED
    context.load_verify_locations(cadata=client_ca.cert_pem.bytes().decode())
    with TlsSimulator(context) as running:
        running.sim.users = https.sim.sim.users
        yield running


def _mtls_config(https: Https, mtls: TlsSimulator, **user: Any) -> dict[str, Any]:
    doc = https.config(**user)
    doc["clusters"][0]["cluster"]["server"] = f"https://127.0.0.1:{mtls.tls_port}"
    return doc


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


async def test_client_certificate_data_passes_the_handshake(
    https: Https, mtls: TlsSimulator, client_ca: trustme.CA, tmp_path: Path
) -> None:
    issued = client_ca.issue_cert("operator@oncall")
    user = {
        "client-certificate-data": _b64(issued.cert_chain_pems[0].bytes()),
        "client-key-data": _b64(issued.private_key_pem.bytes()),
        "token": https.token,
    }
    assert (
        len(await _pod_names(write_config(tmp_path / "kc", _mtls_config(https, mtls, **user)))) == 2
    )
    without = _mtls_config(https, mtls, token=https.token)
    error = await _error(write_config(tmp_path / "kc2", without))
    assert error.reason == "tls", error


async def test_client_certificate_files_resolve_against_the_kubeconfig(
    https: Https, mtls: TlsSimulator, client_ca: trustme.CA, tmp_path: Path
) -> None:
    issued = client_ca.issue_cert("operator@oncall")
    (tmp_path / "pki").mkdir()
    issued.cert_chain_pems[0].write_to_path(str(tmp_path / "pki" / "me.crt"))
    issued.private_key_pem.write_to_path(str(tmp_path / "pki" / "me.key"))
    user = {"client-certificate": "pki/me.crt", "client-key": "pki/me.key", "token": https.token}
    path = write_config(tmp_path / "kubeconfig", _mtls_config(https, mtls, **user))
    assert len(await _pod_names(path)) == 2


async def test_a_re_read_token_file_keeps_the_client_certificate(
    https: Https,
    mtls: TlsSimulator,
    client_ca: trustme.CA,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """tokenFile beside a client certificate: each re-read credential still carries it (the
    listener refuses a handshake without one)."""
    monkeypatch.setattr(kube_config, "TOKEN_FILE_PERIOD_S", 0.0)  # re-read at every request
    issued = client_ca.issue_cert("operator@oncall")
    (tmp_path / "token").write_text(https.token)
    user = {
        "client-certificate-data": _b64(issued.cert_chain_pems[0].bytes()),
        "client-key-data": _b64(issued.private_key_pem.bytes()),
        "tokenFile": "token",
    }
    path = write_config(tmp_path / "kc", _mtls_config(https, mtls, **user))
    reader = await KubeReader.open(KubernetesSettings(kubeconfig=path, namespace=NS))
    try:
        for _ in range(3):  # the first credential, then two made from re-reads
            assert len(await reader.list_pods(NS, "app=vllm")) == 2
    finally:
        await reader.aclose()


async def test_exec_plugin_client_certificate(
    https: Https, mtls: TlsSimulator, client_ca: trustme.CA, tmp_path: Path
) -> None:
    """A plugin may answer a certificate instead of a token: the handshake passes with it (the
    simulator then wants a token: 401, where without the certificate the handshake fails)."""
    issued = client_ca.issue_cert("operator@oncall")
    status = {"clientCertificateData": issued.cert_chain_pems[0].bytes().decode(),
              "clientKeyData": issued.private_key_pem.bytes().decode()}  # fmt: skip
    doc = _mtls_config(https, mtls, exec=_plugin(tmp_path, status))
    error = await _error(write_config(tmp_path / "kubeconfig", doc))
    assert (error.reason, error.http_status) == ("auth", 401)


async def test_exec_plugin_token_and_certificate_go_together(
    https: Https, mtls: TlsSimulator, client_ca: trustme.CA, tmp_path: Path
) -> None:
    """client-go sends both when a plugin answers both: the certificate passes the handshake,
    the token names the user. Half a pair is refused, as client-go refuses it."""
    issued = client_ca.issue_cert("operator@oncall")
    status = {"token": https.token,
              "clientCertificateData": issued.cert_chain_pems[0].bytes().decode(),
              "clientKeyData": issued.private_key_pem.bytes().decode()}  # fmt: skip
    doc = _mtls_config(https, mtls, exec=_plugin(tmp_path, status))
    assert len(await _pod_names(write_config(tmp_path / "kubeconfig", doc))) == 2
    del status["clientKeyData"]
    half = _mtls_config(https, mtls, exec=_plugin(tmp_path, status))
    error = await _error(write_config(tmp_path / "half", half))
    assert error.reason == "config" and "certificate without its key" in error.detail


async def test_bad_certificate_data_is_a_located_error(https: Https, tmp_path: Path) -> None:
    user = {"client-certificate-data": "!!not base64!!", "client-key-data": "eA=="}
    error = await _error(write_config(tmp_path / "kubeconfig", https.config(**user)))
    assert error.reason == "config"
    assert "users[oncall-drill-operator].client-certificate-data: not base64" in error.detail


# -- TLS -----------------------------------------------------------------------------------------


async def test_another_ca_is_a_tls_error(https: Https, tmp_path: Path) -> None:
    doc = https.config(token=https.token)
    doc["clusters"][0]["cluster"]["certificate-authority-data"] = _b64(
        trustme.CA().cert_pem.bytes()
    )
    error = await _error(write_config(tmp_path / "kubeconfig", doc))
    assert error.reason == "tls"
    assert "certificate verify failed" in error.detail


async def test_insecure_skip_tls_verify_trusts_any_certificate(
    https: Https, tmp_path: Path
) -> None:
    doc = https.config(token=https.token)
    cluster = doc["clusters"][0]["cluster"]
    del cluster["certificate-authority-data"]
    cluster["insecure-skip-tls-verify"] = True
    assert len(await _pod_names(write_config(tmp_path / "kubeconfig", doc))) == 2


@pytest.mark.parametrize(("name", "reason"), [("localhost", None), ("example.com", "tls")])
async def test_tls_server_name_is_the_name_verified(
    https: Https, tmp_path: Path, name: str, reason: str | None
) -> None:
    doc = https.config(token=https.token)
    doc["clusters"][0]["cluster"]["tls-server-name"] = name
    path = write_config(tmp_path / "kubeconfig", doc)
    if reason is None:
        assert len(await _pod_names(path)) == 2
    else:
        error = await _error(path)
        assert error.reason == reason and "hostname" in error.detail.lower()


# -- kubeconfig files, in-cluster ----------------------------------------------------------------


async def test_kubeconfig_list_merges_as_kubectl(
    https: Https, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """$KUBECONFIG=a:b: the first file naming a user wins, the first current-context too."""
    first = https.config(token=https.token)
    first["clusters"] = []
    first["contexts"] = []
    second = https.config(token="overridden-by-the-first-file")
    second["current-context"] = "oncall-drill-readonly"
    a = write_config(tmp_path / "a", first)
    b = write_config(tmp_path / "b", second)
    monkeypatch.setenv("KUBECONFIG", f"{a}{os.pathsep}{tmp_path / 'missing'}{os.pathsep}{b}")
    settings = KubernetesSettings(namespace=NS)
    conn = kube_config.load_connection(settings)
    assert conn.context == "oncall-drill"
    assert conn.credentials.current().authorization == f"Bearer {https.token}"
    reader = await KubeReader.open(settings)
    try:
        assert len(await reader.list_pods(NS, "app=vllm")) == 2
    finally:
        await reader.aclose()


@pytest.mark.parametrize(
    ("text", "says"),
    [("clusters: [\n  - {name: a\n", ":2:3: not YAML"), ("", "is empty"), ("- 1\n", "a mapping")],
)
def test_a_broken_kubeconfig_is_located(tmp_path: Path, text: str, says: str) -> None:
    path = tmp_path / "kubeconfig"
    path.write_text(text)
    with pytest.raises(kube_config.KubeConfigError, match=says) as caught:
        kube_config.load_connection(KubernetesSettings(kubeconfig=path))
    assert str(caught.value).startswith(str(path))


async def test_in_cluster_service_account(
    https: Https, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    account = tmp_path / "serviceaccount"
    account.mkdir()
    (account / "token").write_text("expired-token")
    (account / "ca.crt").write_bytes(https.ca.read_bytes())
    (account / "namespace").write_text(NS)
    monkeypatch.setattr(kube_config, "SERVICEACCOUNT_DIR", account)
    monkeypatch.setattr(kube_config, "TOKEN_FILE_PERIOD_S", 0.0)
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "none"))
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "127.0.0.1")
    monkeypatch.setenv("KUBERNETES_SERVICE_PORT", str(https.sim.tls_port))
    reader = await KubeReader.open(KubernetesSettings(namespace=NS))
    try:
        assert reader.target == f"in-cluster (https://127.0.0.1:{https.sim.tls_port})"
        with pytest.raises(BackendError) as caught:
            await reader.list_pods(NS)
        assert caught.value.http_status == 401
        (account / "token").write_text(https.token)  # the kubelet rotated the projected token
        assert len(await reader.list_pods(NS, "app=vllm")) == 2
    finally:
        await reader.aclose()
    (account / "ca.crt").unlink()
    with pytest.raises(BackendError, match=r"cannot read .*ca\.crt"):
        await KubeReader.open(KubernetesSettings(namespace=NS))


async def test_provide_cluster_info_hands_the_plugin_the_cluster(
    https: Https, tmp_path: Path
) -> None:
    spec = _plugin(tmp_path, {"token": https.token})
    spec["provideClusterInfo"] = True
    doc = https.config(exec=spec)
    doc["clusters"][0]["cluster"]["extensions"] = [
        {"name": "client.authentication.k8s.io/exec", "extension": {"audience": "drill"}}
    ]
    assert len(await _pod_names(write_config(tmp_path / "kubeconfig", doc))) == 2
    cluster = _runs(tmp_path)[0]["info"]["spec"]["cluster"]
    assert cluster["server"] == f"https://127.0.0.1:{https.sim.tls_port}"
    assert base64.b64decode(cluster["certificate-authority-data"]) == https.ca.read_bytes()
    assert cluster["config"] == {"audience": "drill"}
