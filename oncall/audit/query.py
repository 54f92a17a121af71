"""Choosing and exporting audit records for reviewers: `oncall audit`, and the audit screen.

One query (`AuditQuery`) for both: words (the screen's `/` filter), since (a duration back
from now, "1h", or an ISO timestamp; without a zone it is UTC, like the log), actor (substring
of the user), action (exact) and target (substring of the target's name). Exports: JSONL (the
log's own lines, verbatim) or CSV (flattened columns).
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from oncall.audit.log import LogLine
from oncall.audit.records import MASK, Record
from oncall.errors import UsageError
from oncall.settings.durations import parse_duration

#: `context` (the settings context the action ran in, empty for a log of one cluster) before
#: `target`, which it scopes, as in `oncall audit list`'s table.
CSV_COLUMNS = (
    "seq", "id", "ts", "action_id", "transition", "action", "context", "target", "actor_user",
    "actor_host", "ssh_client", "alert", "guard", "outcome", "duration_s", "hash",
)  # fmt: skip


def parse_time(text: str) -> datetime:
    """An ISO 8601 timestamp as an aware datetime (UTC when it names no zone)."""
    moment = datetime.fromisoformat(text.strip())
    return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment


def parse_since(text: str, now: datetime | None = None) -> datetime:
    """`--since`: a duration back from now ("90m", "1h", "2d") or an ISO timestamp."""
    now = now or datetime.now(UTC)
    try:
        seconds = parse_duration(text)
    except ValueError:
        seconds = None
    if isinstance(seconds, float):
        return now - timedelta(seconds=seconds)
    try:
        return parse_time(text)
    except ValueError as exc:
        raise UsageError(
            f"--since {text!r}: expected a duration (30m, 1h, 2d) or an ISO time "
            "(2025-06-01T12:00:00Z)"
        ) from exc


@dataclass(frozen=True)
class AuditQuery:
    """Which records a reviewer asked for, on the command line or the audit screen alike.

    Every criterion that is set must hold: `words` (lower case) must all appear in the
    record's `search_text`; `since`, its time at or after; `actor`, within its user
    (case-insensitive); `action`, exactly its action; `target`, within its target's name;
    `context`, exactly the context it acted in (`contexts:`).
    """

    words: tuple[str, ...] = ()
    since: datetime | None = None
    actor: str | None = None
    action: str | None = None
    target: str | None = None
    context: str | None = None

    def matches(self, record: Record) -> bool:
        if self.context is not None and record.get("context") != self.context:
            return False
        if self.since is not None:
            try:
                if parse_time(str(record.get("ts"))) < self.since:
                    return False
            except ValueError:
                return False
        if not _within(self.actor, record.get("actor"), "user"):
            return False
        if self.action is not None and record.get("action") != self.action:
            return False
        if not _within(self.target, record.get("target"), "name"):
            return False
        if self.words:
            haystack = search_text(record)
            return all(word in haystack for word in self.words)
        return True


def _within(wanted: str | None, part: Any, key: str) -> bool:
    """Whether `wanted` (None: anything) is in `part[key]`, case-insensitive; False when that
    is not text (a record edited by hand)."""
    if wanted is None:
        return True
    value = part.get(key) if isinstance(part, dict) else None
    return isinstance(value, str) and wanted.lower() in value.lower()


def select(lines: Iterable[LogLine], query: AuditQuery) -> Iterator[LogLine]:
    """The lines whose records match; unreadable lines always pass, so none goes unseen."""
    for line in lines:
        if line.problem is not None or line.record is None or query.matches(line.record):
            yield line


def actor_field(record: Record, key: str) -> str:
    """One field of the record's actor ("user", "host") as text; empty when there is none."""
    actor = record.get("actor")
    return text_of(actor.get(key)) if isinstance(actor, dict) else ""


def outcome_text(record: Record) -> str:
    """The outcome, or the refusing guard when there is no outcome."""
    guard = record.get("guard")
    return text_of(record.get("outcome")) or (f"guard: {text_of(guard)}" if guard else "")


def search_text(record: Record) -> str:
    """What the words of a query are looked for in: who, what, on what, why, how it ended."""
    fields = (
        actor_field(record, "user"),
        actor_field(record, "host"),
        text_of(record.get("transition")),
        text_of(record.get("action")),
        target_text(record.get("target")),
        alert_text(record.get("alert")),
        outcome_text(record),
    )
    return " ".join(fields).lower()


def target_text(target: Any) -> str:
    """A target in one short phrase: "Pod ai/vllm-0", "Redis key ai-gateway:degradation-level"."""
    if not isinstance(target, dict):
        return "" if target is None else str(target)
    name = str(target.get("name", ""))
    namespace = target.get("namespace")
    where = f"{namespace}/{name}" if namespace else name
    kind = target.get("kind")
    return f"{kind} {where}" if kind else where


def alert_text(alert: Any) -> str:
    """An alert by its name, or its JSON when it has none."""
    if isinstance(alert, dict) and isinstance(alert.get("name"), str):
        return str(alert["name"])
    return text_of(alert)


def text_of(value: Any) -> str:
    """A value as one cell: text as is, null as empty, anything else as compact JSON."""
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    return json.dumps(value, sort_keys=True, ensure_ascii=False, separators=(",", ":"))


def csv_row(record: Record) -> list[str]:
    """One record as the CSV columns of `CSV_COLUMNS`."""
    actor = record.get("actor")
    actor = actor if isinstance(actor, dict) else {}
    values: dict[str, Any] = {
        **{key: record.get(key) for key in CSV_COLUMNS},
        "target": target_text(record.get("target")),
        "alert": alert_text(record.get("alert")),
        "actor_user": actor.get("user"),
        "actor_host": actor.get("host"),
        "ssh_client": actor.get("ssh_client"),
    }
    return [text_of(values[key]) for key in CSV_COLUMNS]


def to_csv(records: Iterable[Record]) -> str:
    """A header and one row per record; parses with Python's csv module and spreadsheets."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(CSV_COLUMNS)
    for record in records:
        writer.writerow(csv_row(record))
    return out.getvalue()


def mask_text(text: str, secrets: Iterable[str]) -> tuple[str, bool]:
    """Text with each secret replaced by "***", and whether any was there.

    Export is verbatim, but a secret must never be printed: a line written by hand or by an
    older version that holds one is masked (and then no longer matches its hash).
    """
    found = False
    for secret in sorted({s for s in secrets if s}, key=len, reverse=True):
        if secret in text:
            text, found = text.replace(secret, MASK), True
    return text, found
