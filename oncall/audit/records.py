"""One audit record: its fields, its canonical hash, who is acting, and secret redaction.

A record is a plain JSON object, one per line of the log (docs/audit.md). `hash` is the
SHA-256 of the record's canonical JSON without `hash`; `prev` is the previous record's hash, so
any edit, deletion or reordering breaks the chain. Redaction runs before hashing: the hash
covers exactly the bytes that are stored, and a secret never reaches the file or a mirror.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import re
import secrets as _random
import socket
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from oncall.backends.identity import display_user, os_account
from oncall.errors import OncallError
from oncall.model.action_params import ACTION_PARAMS

if TYPE_CHECKING:
    from oncall.settings import Settings

Record = dict[str, Any]

GENESIS = "0" * 64
MASK = "***"

TRANSITIONS = (
    "proposed",
    "declined",
    "approved",
    "refused",
    "started",
    "succeeded",
    "failed",
    "verified",
    "rolled_back",
    "acknowledged",
    # A verified change undone afterwards by what owns the target (an operator's reconcile,
    # Helm, Argo CD, Flux): seen by the revert watch (oncall/remediation/revert_watch.py).
    "reverted",
    "noted",
)
#: A reviewer's sign-off on a scar in the chain (`oncall audit acknowledge`): not a remediation,
#: so it has an action of its own, allowed only with the `acknowledged` transition.
REVIEW_ACTION = "audit-review"
#: An approver refused for an id that names no pending request (unknown, expired): there is no
#: action to name, and the attempt is still recorded (docs/audit.md). Only with `refused`.
UNKNOWN_APPROVAL = "approval-of-unknown"
#: A person's note on an incident (`oncall note INCIDENT TEXT`): no remediation either, so an
#: action of its own, allowed only with the `noted` transition (docs/architecture.md §3).
NOTE_ACTION = "incident-note"
OUTCOMES = ("succeeded", "failed")

# The order fields are written in; the hash does not depend on it (canonical JSON sorts keys).
FIELDS = (
    "seq", "id", "ts", "action_id", "transition", "action", "target", "actor", "context",
    "alert", "evidence", "request", "dry_run", "outcome", "guard", "duration_s", "detail", "log",
    "prev", "hash",
)  # fmt: skip
# Set by the log itself, never by a caller. `log` names the log a record belongs to
# ({id, host, uid, path}): the team Stream keys its copies by log id + seq with it.
ASSIGNED = ("seq", "id", "ts", "log", "prev", "hash")
OPTIONAL = ("context", "alert", "evidence", "request", "dry_run", "outcome", "guard", "duration_s")

# Whole key names (after lower-casing, "-" → "_") whose values are always masked. Anchored on
# purpose: "tokens_per_s" or "max_tokens" are evidence, "bearer_token" is a secret.
_SECRET_KEY = re.compile(
    r"^(.*_)?(password|passwd|pwd|token|api_?key|authorization|secret|credentials?|cookie"
    r"|private_key)$"
)
_BEARER = re.compile(r"(?i)\b(bearer|basic)\s+[A-Za-z0-9._~+/=-]+")
_URL_PASSWORD = re.compile(r"(?i)\b([a-z][a-z0-9+.-]*://[^/\s:@]*):[^/\s@]+@")


class AuditError(OncallError):
    """The audit log cannot be written or read, or a record is malformed."""


class AuditWriteError(AuditError):
    """A record could not be written and fsynced: it is NOT on disk (write-ahead callers stop)."""


def canonical(obj: Mapping[str, Any]) -> bytes:
    """The bytes that are hashed: sorted keys, no spaces, UTF-8."""
    text = json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return text.encode("utf-8")


def record_hash(record: Mapping[str, Any]) -> str:
    """SHA-256 (hex) of the record's canonical JSON without its `hash` field."""
    body = {key: value for key, value in record.items() if key != "hash"}
    return hashlib.sha256(canonical(body)).hexdigest()


def line_of(record: Mapping[str, Any]) -> bytes:
    """The record as one line of the log, fields in `FIELDS` order."""
    ordered = {key: record[key] for key in FIELDS if key in record}
    ordered.update({key: value for key, value in record.items() if key not in ordered})
    text = json.dumps(ordered, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
    return text.encode("utf-8") + b"\n"


def now_iso() -> str:
    """The current time as ISO 8601 UTC with milliseconds: 2025-06-01T12:00:00.123Z."""
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def new_id(seq: int) -> str:
    """A short unique record id: the sequence number and random hex, e.g. 000007-3f9a1c2e."""
    return f"{seq:06d}-{_random.token_hex(4)}"


def new_action_id() -> str:
    """An id for one remediation's lifecycle; every transition of that action carries it."""
    return _random.token_hex(6)


def new_log_identity(path: str) -> dict[str, Any]:
    """A new log's identity, stable for the file's life: a random id, and the host, OS account
    (`getuid()`, not `$USER`) and path it lives at, so a deleted log is missed by its owner."""
    return {"id": _random.token_hex(8), "host": socket.gethostname(), "uid": os.getuid(),
            "path": path}  # fmt: skip


def actor_now() -> dict[str, Any]:
    """Who is acting: the OS account of the real uid (not $USER, which is display only), this
    host, the pid and the SSH client's IP (or null). The remediation executor adds the
    Kubernetes identity (`kube_user`, from SelfSubjectReview) when it has one."""
    account = os_account()
    ssh = os.environ.get("SSH_CLIENT", "").split()
    return {
        "user": account["os_user"],
        "uid": account["uid"],
        "display_user": display_user(),
        "host": socket.gethostname(),
        "pid": os.getpid(),
        "ssh_client": ssh[0] if ssh else None,
    }


def _secret_key(key: str) -> bool:
    return bool(_SECRET_KEY.match(key.lower().replace("-", "_")))


def _scrub(text: str, secrets: list[str]) -> str:
    for secret in secrets:
        if secret in text:
            text = text.replace(secret, MASK)
    text = _BEARER.sub(lambda m: f"{m.group(1)} {MASK}", text)
    text = _URL_PASSWORD.sub(lambda m: f"{m.group(1)}:{MASK}@", text)
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:  # lone surrogates (undecodable environment bytes)
        text = text.encode("utf-8", "backslashreplace").decode("utf-8")
    return text


def _redacted(value: Any, secrets: list[str]) -> Any:
    if isinstance(value, str):
        return _scrub(value, secrets)
    if value is None or isinstance(value, bool | int):
        return value
    if isinstance(value, float):
        # JSON has no NaN or infinities; Prometheus spells them like this.
        if math.isnan(value):
            return "NaN"
        if math.isinf(value):
            return "+Inf" if value > 0 else "-Inf"
        return value
    if isinstance(value, Mapping):
        out: dict[str, Any] = {}
        for key, item in value.items():
            name = _scrub(str(key), secrets)
            secret_value = _secret_key(str(key)) and item is not None
            out[name] = MASK if secret_value else _redacted(item, secrets)
        return out
    if isinstance(value, list | tuple | set | frozenset):
        return [_redacted(item, secrets) for item in value]
    # Anything else (a Path, a datetime, an enum) is stored as its text, scrubbed too.
    return _scrub(str(value), secrets)


def redact(value: Any, secrets: Iterable[str]) -> Any:
    """A deep, JSON-able copy of value with every secret replaced by "***".

    Each secret string is masked wherever it occurs, in values and in keys; values of keys
    named like password/token/api_key/authorization/secret are masked whatever they are;
    "Bearer …" credentials and URL passwords are masked too.
    """
    # Longest first, so a secret that contains another is masked whole.
    ordered = sorted({s for s in secrets if s}, key=len, reverse=True)
    return _redacted(value, ordered)


def secrets_of(settings: Settings) -> list[str]:
    """Every secret in the settings: SecretStr values and passwords inside URLs."""
    from pydantic import SecretStr

    found: list[str] = []

    def visit(value: Any) -> None:
        if isinstance(value, SecretStr):
            found.append(value.get_secret_value())
        elif isinstance(value, str) and "://" in value:
            try:
                password = urlsplit(value).password
            except ValueError:
                password = None
            if password:
                found.append(password)
        elif isinstance(value, list | tuple):
            for item in value:
                visit(item)
        elif hasattr(type(value), "model_fields"):
            for name in type(value).model_fields:
                visit(getattr(value, name))

    visit(settings)
    return [s for s in found if s]


def check_fields(fields: Mapping[str, Any]) -> None:
    """Raise AuditError when the fields a caller gives cannot make a record."""
    unknown = sorted(set(fields) - set(FIELDS))
    assigned = sorted(set(fields) & set(ASSIGNED))
    problems: list[str] = []
    if unknown:
        problems.append(f"unknown field(s) {', '.join(unknown)}")
    if assigned:
        problems.append(f"{', '.join(assigned)} are set by the log, not by the caller")
    action_id = fields.get("action_id")
    if not isinstance(action_id, str) or not action_id:
        problems.append("action_id must be a non-empty string")
    if fields.get("transition") not in TRANSITIONS:
        problems.append(f"transition must be one of {', '.join(TRANSITIONS)}")
    review = fields.get("transition") == "acknowledged"
    note = fields.get("transition") == "noted"
    if (fields.get("action") == NOTE_ACTION) != note:
        problems.append(f"{NOTE_ACTION} goes with the noted transition, and only it")
    unknown_approval = (
        fields.get("action") == UNKNOWN_APPROVAL and fields.get("transition") == "refused"
    )
    # ACTION_PARAMS, read now: the registry's names, an action registered after import too.
    if (fields.get("action") == REVIEW_ACTION) != review or (
        not review
        and not note
        and not unknown_approval
        and fields.get("action") not in ACTION_PARAMS
    ):
        problems.append(
            f"action must be one of {', '.join(ACTION_PARAMS)} ({REVIEW_ACTION} with acknowledged)"
        )
    if not isinstance(fields.get("target"), Mapping):
        problems.append("target must be an object, e.g. {kind, namespace, name, uid}")
    for name in ("alert", "detail", "actor"):
        value = fields.get(name)
        if value is not None and not isinstance(value, Mapping):
            problems.append(f"{name} must be an object or null")
    duration = fields.get("duration_s")
    is_number = isinstance(duration, int | float) and not isinstance(duration, bool)
    if duration is not None and not is_number:
        problems.append("duration_s must be a number or null")
    if problems:
        raise AuditError("bad audit record: " + "; ".join(problems))


def build_record(
    fields: Mapping[str, Any],
    *,
    seq: int,
    prev: str,
    secrets: Iterable[str] = (),
    log: Mapping[str, Any] | None = None,
) -> Record:
    """A complete, redacted, hashed record from the caller's fields and the chain head."""
    check_fields(fields)
    given: Record = {}
    for name in FIELDS:
        if name in ASSIGNED:
            continue
        if name in fields:
            given[name] = fields[name]
        elif name == "actor":
            given[name] = actor_now()
        elif name == "detail":
            given[name] = {}
        elif name in OPTIONAL:
            given[name] = None
    # Only what the caller gave is redacted: seq, id, ts and prev are ours and hold no secret.
    record: Record = {"seq": seq, "id": new_id(seq), "ts": now_iso(), **redact(given, secrets)}
    if log is not None:
        record["log"] = dict(log)
    record["prev"] = prev
    record["hash"] = record_hash(record)
    return record


def track_started(started: dict[str, Record], record: Record) -> None:
    """Keep, per action_id, its last `started` record until an outcome (succeeded/failed)."""
    action_id = record.get("action_id")
    if not isinstance(action_id, str):
        return
    transition = record.get("transition")
    if transition == "started":
        started[action_id] = record
    elif transition in OUTCOMES:
        started.pop(action_id, None)


def incomplete_text(action_id: str, record: Record) -> str:
    """How verify reports an action whose `started` record has no outcome after it."""
    actor = record.get("actor") or {}
    who = f"{actor.get('user')}@{actor.get('host')}" if isinstance(actor, dict) else "?"
    target = record.get("target") or {}
    name = target.get("name") if isinstance(target, dict) else None
    what = f"{record.get('action')} {name}" if name else str(record.get("action"))
    return (
        f"action {action_id}: {what} started at {record.get('ts')} by {who} "
        f"(record {record.get('seq')}), no outcome recorded (the process died?)"
    )
