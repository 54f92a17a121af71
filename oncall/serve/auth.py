"""Who may post notifications: the credentials Alertmanager's `http_config` sends.

A bearer token (`authorization: {credentials_file: …}`) and/or basic auth (`basic_auth:
{username, password_file}`), each read from a file named in the settings so that the secret is
not in the settings file. Compared in constant time. With neither configured, only a loopback
listener is allowed (`check_exposure`): anyone who can reach serve could make it run
checklists, which read the cluster.
"""

from __future__ import annotations

import base64
import binascii
import hmac
import ipaddress
from dataclasses import dataclass
from pathlib import Path

from oncall.errors import UsageError
from oncall.redaction import register_secret
from oncall.settings.serve import ServeSettings


@dataclass(frozen=True)
class Credentials:
    token: bytes | None = None
    basic: bytes | None = None  # "user:password"

    @property
    def required(self) -> bool:
        return self.token is not None or self.basic is not None

    def allows(self, header: str | None) -> bool:
        """Whether an Authorization header carries one of the configured credentials."""
        if not self.required:
            return True
        if not header:
            return False
        scheme, _, value = header.strip().partition(" ")
        value = value.strip()
        if scheme.lower() == "bearer" and self.token is not None:
            return hmac.compare_digest(value.encode("utf-8", "replace"), self.token)
        if scheme.lower() == "basic" and self.basic is not None:
            try:
                given = base64.b64decode(value, validate=True)
            except (binascii.Error, ValueError):
                return False
            return hmac.compare_digest(given, self.basic)
        return False


def _secret(path: Path, what: str) -> str:
    try:
        text = path.expanduser().read_text(encoding="utf-8").strip()
    except (OSError, UnicodeDecodeError) as exc:
        raise UsageError(f"serve.{what}: cannot read {path}: {exc}") from None
    if not text:
        raise UsageError(f"serve.{what}: {path} is empty")
    register_secret(text)  # never printed, whatever prints it
    return text


def load_credentials(settings: ServeSettings) -> Credentials:
    token = _secret(settings.token_file, "token_file") if settings.token_file else None
    basic = None
    if settings.basic_auth_user or settings.basic_auth_password_file:
        if not (settings.basic_auth_user and settings.basic_auth_password_file):
            raise UsageError("serve: basic auth needs basic_auth_user and basic_auth_password_file")
        password = _secret(settings.basic_auth_password_file, "basic_auth_password_file")
        basic = f"{settings.basic_auth_user}:{password}".encode()
    return Credentials(token.encode() if token else None, basic)


def split_listen(listen: str) -> tuple[str, int]:
    host, _, port = listen.rpartition(":")
    return host.strip("[]"), int(port)


def check_exposure(host: str, credentials: Credentials) -> None:
    """Refuse to listen beyond loopback without credentials."""
    if credentials.required:
        return
    try:
        loopback = ipaddress.ip_address(host).is_loopback
    except ValueError:
        loopback = host == "localhost"
    if not loopback:
        raise UsageError(
            f"serve.listen {host}: not a loopback address, and no serve.token_file or basic "
            "auth is set: anyone reaching it could make oncall run checklists"
        )
