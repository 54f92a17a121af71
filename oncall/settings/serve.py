"""The `serve:` section of the settings: `oncall serve`, the always-on webhook receiver.

Apart from `model.py` only for its size; the same rules: unknown keys are errors with their
file:line:col, secrets (the notification URLs) are `SecretStr`, and the bearer token and the
basic auth password are named by file, so that the secret is not in the settings file.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Annotated, Literal
from urllib.parse import urlsplit

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, SecretStr, field_validator

from oncall.settings.durations import Duration


class Section(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


def _no_targets() -> list[NotifySettings]:
    return []


_LISTEN = re.compile(r"(?P<host>\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9.-]+):(?P<port>[0-9]{1,5})")


def _checked_listen(value: str) -> str:
    match = _LISTEN.fullmatch(value)
    if match is None or not 0 < int(match["port"]) < 65536:
        raise ValueError("HOST:PORT, e.g. 127.0.0.1:9464 or [::1]:9464")
    return value


def _checked_path(value: str) -> str:
    if not value.startswith("/") or any(c in value for c in "?#% \t\r\n\0"):
        raise ValueError("an absolute URL path without query, spaces or escapes, e.g. /webhook")
    return value


class NotifySettings(Section):
    """One notification webhook `oncall serve` sends each verdict's summary to."""

    name: str = Field(..., min_length=1, max_length=64, description="Shown in /metrics and logs.")
    url: SecretStr = Field(
        ..., description="The webhook URL (a secret: Slack's holds its token in the path)."
    )
    format: Literal["slack", "json"] = Field(
        "slack",
        description="slack: text + blocks (Slack, Mattermost, Rocket.Chat incoming webhooks); "
        "json: the verdict summary as a JSON object.",
    )
    timeout: Duration = Field(3.0, description="Per-attempt timeout, connection included.")
    retries: int = Field(2, ge=0, le=5, description="Further attempts after a failed one.")

    @field_validator("url")
    @classmethod
    def _http(cls, value: SecretStr) -> SecretStr:
        parts = urlsplit(value.get_secret_value())
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError("an http:// or https:// URL")  # never the value: it is a secret
        return value


class ServeSettings(Section):
    """`oncall serve`: the always-on, read-only Alertmanager webhook receiver
    (docs/operating.md)."""

    listen: Annotated[str, AfterValidator(_checked_listen)] = Field(
        "127.0.0.1:9464", description="HOST:PORT to listen on (webhook, /healthz, /metrics)."
    )
    webhook_path: Annotated[str, AfterValidator(_checked_path)] = Field(
        "/alertmanager/webhook", description="Path Alertmanager's webhook_configs post to."
    )
    token_file: Path | None = Field(
        None,
        description="File holding the bearer token Alertmanager sends (http_config."
        "authorization.credentials_file); null: no bearer token.",
    )
    basic_auth_user: str | None = Field(
        None, description="Basic auth user (http_config.basic_auth); with a password file."
    )
    basic_auth_password_file: Path | None = Field(
        None, description="File holding the basic auth password."
    )
    tls_cert_file: Path | None = Field(None, description="Server certificate (PEM) for HTTPS.")
    tls_key_file: Path | None = Field(None, description="Its private key (PEM).")
    max_body_bytes: int = Field(
        1 << 20, ge=1024, le=64 << 20, description="Largest notification body accepted."
    )
    workers: int = Field(4, ge=1, le=64, description="Checklists run at once.")
    queue_size: int = Field(
        256, ge=1, le=100_000,
        description="Firings waiting for a worker; beyond: 'not checked: overloaded'.",
    )  # fmt: skip
    recheck_after: Duration = Field(
        3600.0,
        description="A repeated notification of a firing runs its checklist again only when "
        "the stored verdict is older than this.",
    )
    claim_ttl: Duration = Field(
        120.0, description="How long one replica's claim on a firing lasts (a dead one's ends)."
    )
    verdict_retention: Duration = Field(7 * 86400.0, description="How long a verdict is kept.")
    verdicts_per_alert: int = Field(
        100, ge=1, le=100_000, description="Most verdicts kept per alert name (newest kept)."
    )
    memory_buffer: int = Field(
        1000, ge=0, le=100_000,
        description="Verdicts kept in memory while Redis is down, written when it returns.",
    )  # fmt: skip
    notify: list[NotifySettings] = Field(
        default_factory=_no_targets, description="Webhooks each verdict's summary is sent to."
    )
