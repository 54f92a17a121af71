"""The simulator's HTTPS listener: its certificate, and real clients that verify it.

The kubernetes client and kubectl (when on PATH) talk to a simulator served with the drill's
certificate through a kubeconfig whose CA is that certificate file, as `oncall drill up` writes
it; a client trusting another CA, or asking for another host name, is refused.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import ssl
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import trustme

from oncall_drill.kube_sim import OPERATOR_CONTEXT, write_kubeconfig
from oncall_drill.kube_sim.tls import VALID_FOR, make_certificate, server_context
from oncall_drill.netutil import LOOPBACK
from tests.drill.kube.conftest import NS, TlsSimulator


@pytest.fixture
def certificate(tmp_path: Path) -> tuple[Path, Path]:
    made = make_certificate(tmp_path / "tls")
    assert made is not None
    return made


@pytest.fixture
def simulator(certificate: tuple[Path, Path]) -> Iterator[TlsSimulator]:
    with TlsSimulator(server_context(*certificate)) as running:
        yield running


def _handshake(port: int, cafile: Path, server_hostname: str) -> None:
    context = ssl.create_default_context(cafile=str(cafile))
    with (
        socket.create_connection((LOOPBACK, port), timeout=5) as raw,
        context.wrap_socket(raw, server_hostname=server_hostname),
    ):
        pass


def test_certificate_files_are_made_once_with_a_private_key(
    certificate: tuple[Path, Path], tmp_path: Path
) -> None:
    cert, key = certificate
    assert key.stat().st_mode & 0o777 == 0o600
    pems = cert.read_text().count("-----BEGIN CERTIFICATE-----")
    assert pems == 2  # the server certificate, then the CA that issued it
    assert (tmp_path / "tls" / "ca.crt").read_text() in cert.read_text()
    before = cert.read_bytes(), key.read_bytes()
    assert make_certificate(tmp_path / "tls") == certificate
    assert (cert.read_bytes(), key.read_bytes()) == before


def test_a_certificate_near_its_end_is_made_anew(
    certificate: tuple[Path, Path], tmp_path: Path
) -> None:
    cert, key = certificate
    before = cert.read_bytes(), key.read_bytes()
    month_ago = time.time() - VALID_FOR.total_seconds()
    os.utime(cert, (month_ago, month_ago))
    assert make_certificate(tmp_path / "tls") == certificate
    after = cert.read_bytes(), key.read_bytes()
    assert after[0] != before[0] and after[1] != before[1]
    assert key.stat().st_mode & 0o777 == 0o600


@pytest.mark.parametrize("host", ["127.0.0.1", "localhost"])
def test_the_certificate_verifies_for_the_loopback_names(
    simulator: TlsSimulator, certificate: tuple[Path, Path], tmp_path: Path, host: str
) -> None:
    _handshake(simulator.tls_port, certificate[0], host)  # the chain file as CA bundle
    _handshake(simulator.tls_port, tmp_path / "tls" / "ca.crt", host)  # the CA alone


def test_another_ca_or_another_name_is_refused(
    simulator: TlsSimulator, certificate: tuple[Path, Path], tmp_path: Path
) -> None:
    other = tmp_path / "other-ca.crt"
    trustme.CA().cert_pem.write_to_path(other)
    with pytest.raises(ssl.SSLCertVerificationError, match="certificate verify failed"):
        _handshake(simulator.tls_port, other, "127.0.0.1")
    with pytest.raises(ssl.SSLCertVerificationError, match="Hostname mismatch"):
        _handshake(simulator.tls_port, certificate[0], "example.com")


def test_kubernetes_client_over_https(
    simulator: TlsSimulator, certificate: tuple[Path, Path], tmp_path: Path
) -> None:
    from kubernetes import client, config

    path = write_kubeconfig(
        tmp_path / "kubeconfig", simulator.tls_port, simulator.sim.users, ca_file=certificate[0]
    )
    api = config.new_client_from_config(config_file=str(path), context=OPERATOR_CONTEXT)
    try:
        assert api.configuration.host == f"https://{LOOPBACK}:{simulator.tls_port}"
        pods = client.CoreV1Api(api).list_namespaced_pod(NS, label_selector="app=vllm")
    finally:
        api.close()
    assert len(pods.items) == 2


KUBECTL = shutil.which("kubectl")


@pytest.mark.skipif(KUBECTL is None, reason="kubectl is not on PATH")
def test_kubectl_over_https(
    simulator: TlsSimulator, certificate: tuple[Path, Path], tmp_path: Path
) -> None:
    path = write_kubeconfig(
        tmp_path / "kubeconfig", simulator.tls_port, simulator.sim.users, ca_file=certificate[0]
    )
    proc = subprocess.run(
        [str(KUBECTL), "--kubeconfig", str(path), "get", "deployments", "-n", NS, "-o", "json"],
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
        env={"HOME": str(tmp_path)},  # no ~/.kube/config, no KUBECONFIG: only this file
    )
    assert proc.returncode == 0, proc.stderr
    names = [d["metadata"]["name"] for d in json.loads(proc.stdout)["items"]]
    assert "vllm" in names
