"""The certificate for the simulator's HTTPS listener, so that kubectl works too.

kubectl (client-go) will not send a bearer token over plain HTTP; the drill's API therefore
also listens with TLS, and the kubeconfig the drill writes points there with the certificate
file as its CA bundle. The `trustme` library makes a throwaway CA and a server certificate it
issues (P-256 keys, valid 30 days, for 127.0.0.1 and localhost), the way a cluster's own CA
issues the apiserver's serving certificate. The CA's private key is never written: nothing
else can be issued under it.

Files, in `directory`: `apiserver.crt`, the server certificate followed by the CA (the chain
the listener presents, and a bundle holding the CA that the kubeconfig and curl can trust);
`apiserver.key` (mode 0600); `ca.crt`, the CA alone.
"""

from __future__ import annotations

import datetime
import os
import ssl
import time
from pathlib import Path

import trustme

VALID_FOR = datetime.timedelta(days=30)
RENEW_BEFORE = datetime.timedelta(days=1)
IDENTITIES = ("127.0.0.1", "localhost")


def make_certificate(directory: Path) -> tuple[Path, Path] | None:
    """(certificate chain, key) files in directory; None when they cannot be written.

    Made once and kept while valid: a drill directory keeps its certificate across `drill up`s,
    as a cluster keeps its CA, so that a kubeconfig already handed out stays valid. One made
    more than VALID_FOR - RENEW_BEFORE ago (the file's age: we write it) is made anew.
    """
    cert, key = directory / "apiserver.crt", directory / "apiserver.key"
    if cert.is_file() and key.is_file() and _younger_than(cert, VALID_FOR - RENEW_BEFORE):
        return cert, key
    now = datetime.datetime.now(datetime.UTC)
    ca = trustme.CA(organization_name="oncall drill", organization_unit_name="drill cluster CA")
    leaf = ca.issue_cert(
        *IDENTITIES,
        common_name="oncall-drill-apiserver",
        not_before=now - datetime.timedelta(minutes=5),  # tolerate a little clock skew
        not_after=now + VALID_FOR,
    )
    try:
        directory.mkdir(parents=True, exist_ok=True)
        # The key is created private, not made private after it was written.
        key.unlink(missing_ok=True)
        fd = os.open(key, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "wb") as out:
            out.write(leaf.private_key_pem.bytes())
        (directory / "ca.crt").write_bytes(ca.cert_pem.bytes())
        chain = b"".join(blob.bytes() for blob in leaf.cert_chain_pems) + ca.cert_pem.bytes()
        cert.write_bytes(chain)  # last: its presence says the set is complete
    except OSError:
        return None
    return cert, key


def _younger_than(path: Path, age: datetime.timedelta) -> bool:
    return time.time() - path.stat().st_mtime < age.total_seconds()


def server_context(cert: Path, key: Path) -> ssl.SSLContext:
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(cert, key)
    return context
