"""A self-signed certificate for the simulator's HTTPS listener, so that kubectl works too.

kubectl (client-go) will not send a bearer token over plain HTTP; the drill's API therefore
also listens with TLS, and the kubeconfig the drill writes points there with the certificate
as its CA. The certificate is made with the `openssl` command (argv, no shell): a P-256 key,
valid 30 days, for 127.0.0.1 and localhost. Without `openssl`, `make_certificate` returns None
and the drill keeps plain HTTP.
"""

from __future__ import annotations

import shutil
import ssl
import subprocess
from pathlib import Path

OPENSSL_TIMEOUT_S = 20


def make_certificate(directory: Path) -> tuple[Path, Path] | None:
    """(certificate, key) files in directory, made once; None when openssl is missing or fails."""
    openssl = shutil.which("openssl")
    if openssl is None:
        return None
    directory.mkdir(parents=True, exist_ok=True)
    cert, key = directory / "apiserver.crt", directory / "apiserver.key"
    if cert.is_file() and key.is_file():
        return cert, key
    argv = [
        openssl, "req", "-x509", "-nodes", "-newkey", "ec",
        "-pkeyopt", "ec_paramgen_curve:prime256v1",
        "-keyout", str(key), "-out", str(cert), "-days", "30",
        "-subj", "/CN=oncall-drill-apiserver",
        "-addext", "subjectAltName=IP:127.0.0.1,DNS:localhost",
    ]  # fmt: skip
    try:
        subprocess.run(argv, check=True, capture_output=True, timeout=OPENSSL_TIMEOUT_S)
    except (OSError, subprocess.SubprocessError):
        return None
    key.chmod(0o600)
    return cert, key


def server_context(cert: Path, key: Path) -> ssl.SSLContext:
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(cert, key)
    return context
