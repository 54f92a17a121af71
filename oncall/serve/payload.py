"""Alertmanager's webhook notification (`webhook_configs`, version "4"), checked.

The shape is Alertmanager's `notify/webhook.Message` (fixtures/alertmanager/webhook-*.json):
`version`, `groupKey`, `truncatedAlerts`, `status`, `receiver`, `groupLabels`, `commonLabels`,
`commonAnnotations`, `externalURL`, and `alerts[]` with `status`, `labels`, `annotations`,
`startsAt`, `endsAt`, `generatorURL`, `fingerprint`. Fields Alertmanager may add later are
ignored; the ones read here are typed. An alert instance whose label names are not Prometheus
label names, or whose labels or annotations hold control characters (a NUL, a terminal escape
sequence), is refused alone, with its reason: nothing of it is stored or shown.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from oncall.model.verdicts import Firing

SUPPORTED_VERSION = "4"
LABEL_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,199}")
#: C0 and C1 controls but tab and newline (annotations are prose with line breaks).
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")
MAX_TEXT = 16_384


class _Loose(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True)


class WebhookAlert(_Loose):
    status: Literal["firing", "resolved"]
    labels: dict[str, str]
    annotations: dict[str, str] = Field(default_factory=dict)
    startsAt: str = Field(max_length=64)
    endsAt: str = Field("", max_length=64)
    generatorURL: str = Field("", max_length=MAX_TEXT)
    fingerprint: str = Field(max_length=64)


class Notification(_Loose):
    version: str
    groupKey: str = ""
    status: Literal["firing", "resolved"]
    receiver: str = ""
    alerts: list[WebhookAlert]


class PayloadError(Exception):
    """The body is no notification we read; `reason` is the metric label, the text says why."""

    def __init__(self, reason: str, text: str) -> None:
        super().__init__(text)
        self.reason = reason


@dataclass
class Parsed:
    firings: list[Firing] = field(default_factory=list)
    refused: list[dict[str, Any]] = field(default_factory=list)  # {index, reason}


def parse(body: bytes, *, context: str, received_at: float) -> Parsed:
    """The notification's alert instances, or PayloadError (a 400 with the reason)."""
    try:
        data = json.loads(body)
    except (ValueError, UnicodeDecodeError) as exc:
        raise PayloadError("bad_json", f"the body is not JSON: {exc}") from None
    if not isinstance(data, dict):
        raise PayloadError("bad_payload", "the body is not a JSON object")
    version = data.get("version")
    if version != SUPPORTED_VERSION:
        shown = repr(version)[:40]
        raise PayloadError(
            "unsupported_version",
            f"payload version {shown} is not supported: Alertmanager's webhook version 4",
        )
    try:
        note = Notification.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        raise PayloadError("bad_payload", f"{where}: {first['msg']}") from None
    parsed = Parsed()
    for index, alert in enumerate(note.alerts):
        problem = _problem(alert)
        if problem:
            parsed.refused.append({"index": index, "reason": problem})
            continue
        parsed.firings.append(
            Firing(
                context=context,
                alert=alert.labels.get("alertname", ""),
                fingerprint=alert.fingerprint,
                starts_at=alert.startsAt,
                status=alert.status,
                labels=dict(alert.labels),
                annotations=dict(alert.annotations),
                ends_at=alert.endsAt,
                generator_url=alert.generatorURL,
                received_at=received_at,
                group_key=note.groupKey,
            )
        )
    return parsed


def _problem(alert: WebhookAlert) -> str | None:
    if not LABEL_NAME.fullmatch(alert.labels.get("alertname", "")):
        return "no alertname label, or not an alert name"
    for name, value in alert.labels.items():
        if not LABEL_NAME.fullmatch(name):
            return f"label name {name[:40]!r} is not a Prometheus label name"
        if _CONTROL.search(value) or len(value) > MAX_TEXT:
            return f"label {name} holds a control character or is too long"
    for name, value in alert.annotations.items():
        if _CONTROL.search(name + value) or len(value) > MAX_TEXT:
            return f"annotation {name[:40]!r} holds a control character or is too long"
    if _CONTROL.search(alert.fingerprint + alert.startsAt + alert.generatorURL):
        return "fingerprint, startsAt or generatorURL holds a control character"
    return None
