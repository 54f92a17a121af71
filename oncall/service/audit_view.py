"""What the app's audit screen needs from the audit log, behind one small seam.

The screen asks an `AuditSource` for the records (newest first, filtered), for one record's
details, and for the chain's verification; `LiveAudit` reads `audit.path`, tests hand in fakes.
Everything that leaves here is masked with the settings' secrets (`secrets_of`), like
`oncall audit list|show|verify`, and every file read runs in a worker thread, never on the
event loop (the log can be large and the disk slow).

A filter is what the user types after `/`: words that must all appear (case-insensitive) in a
record's user, host, transition, action, target, alert or outcome, and optionally
`since:1h` (a duration back from now, or an ISO time). Unreadable lines always pass, so a
filter never hides evidence of tampering.
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, Protocol

from oncall.audit.chain import VerifyReport
from oncall.audit.log import AuditLog, LogLine
from oncall.audit.query import (
    alert_text,
    mask_text,
    parse_since,
    parse_time,
    target_text,
    text_of,
)
from oncall.audit.records import Record, redact, secrets_of
from oncall.errors import UsageError
from oncall.settings import Settings

__all__ = [
    "MAX_ROWS",
    "AuditPage",
    "AuditQuery",
    "AuditRow",
    "AuditSource",
    "ChainStatus",
    "LiveAudit",
    "chain_status",
    "parse_query",
    "row_of",
]

#: The newest records shown at most: a DataTable adds rows at ~0.2 ms each on the event loop.
MAX_ROWS = 2000

_SINCE = "since:"


@dataclass(frozen=True)
class AuditQuery:
    """Which records to list: words that must all appear, and the oldest time wanted."""

    words: tuple[str, ...] = ()
    since: datetime | None = None

    def matches(self, row: AuditRow) -> bool:
        if row.problem is not None:
            return True  # an unreadable line is shown whatever the filter
        if self.since is not None and (row.when is None or row.when < self.since):
            return False
        haystack = row.haystack()
        return all(word in haystack for word in self.words)


def parse_query(text: str, now: datetime) -> AuditQuery:
    """'since:1h vllm-0 failed' → words ('vllm-0', 'failed'), since one hour before `now`.

    Raises UsageError when `since:` holds neither a duration nor an ISO time.
    """
    words: list[str] = []
    since: datetime | None = None
    for word in text.split():
        if word.lower().startswith(_SINCE):
            value = word[len(_SINCE) :]
            try:
                since = parse_since(value, now)
            except UsageError:
                raise UsageError(
                    f"{word!r}: expected since:DURATION (30m, 1h, 2d) or since:ISO-TIME"
                ) from None
        else:
            words.append(word.lower())
    return AuditQuery(tuple(words), since)


@dataclass(frozen=True)
class AuditRow:
    """One line of the log as the screen lists it: a record, or a line that is not one.

    `key` finds it again for `details`: the record's id, or `line:N` for an unreadable line.
    """

    key: str
    line: int
    seq: int | None
    time: str
    user: str
    host: str
    transition: str
    action: str
    target: str
    alert: str
    outcome: str
    when: datetime | None = None
    problem: str | None = None

    def haystack(self) -> str:
        fields = (self.user, self.host, self.transition, self.action, self.target)
        return " ".join((*fields, self.alert, self.outcome)).lower()


@dataclass(frozen=True)
class AuditPage:
    """The rows to show, newest first, and how many there were before the filter and cap."""

    path: str
    exists: bool
    rows: tuple[AuditRow, ...]
    matched: int
    total: int


@dataclass(frozen=True)
class ChainStatus:
    """The chain's verification: intact, or where it first breaks; actions left unfinished.

    `where` is "record 7" or "line 5" when the break is at a line of the log, None when it is
    the head file (records cut off the end); `problem` is what is wrong there.
    """

    path: str
    exists: bool
    ok: bool
    count: int
    where: str | None = None
    problem: str | None = None
    incomplete: tuple[str, ...] = ()


class AuditSource(Protocol):
    """Where the audit screen's records and verification come from."""

    async def records(self, query: AuditQuery) -> AuditPage:
        """The records matching `query`, newest first, at most `MAX_ROWS` of them."""
        ...

    async def details(self, key: str) -> str | None:
        """One record (by `AuditRow.key`) as indented JSON; None when it is gone."""
        ...

    async def verify(self) -> ChainStatus:
        """Check the whole chain, as `oncall audit verify` does."""
        ...


def _parse_ts(value: Any) -> datetime | None:
    try:
        return parse_time(str(value))
    except ValueError:
        return None


def row_of(number: int, record: Record | None, problem: str | None = None) -> AuditRow:
    """Line `number` of the log as a row: its record (already masked), or its problem."""
    if problem is not None or record is None:
        problem = problem or "not a record"
        return AuditRow(
            key=f"line:{number}",
            line=number,
            seq=None,
            time="",
            user="",
            host="",
            transition="",
            action="",
            target="",
            alert="",
            outcome=f"line {number}: {problem}",
            problem=problem,
        )
    actor = record.get("actor")
    actor = actor if isinstance(actor, dict) else {}
    guard = record.get("guard")
    outcome = text_of(record.get("outcome")) or (f"guard: {text_of(guard)}" if guard else "")
    seq = record.get("seq")
    ts = record.get("ts")
    return AuditRow(
        key=str(record.get("id") or f"line:{number}"),
        line=number,
        seq=seq if isinstance(seq, int) else None,
        time=str(ts or "")[:19].replace("T", " "),
        user=text_of(actor.get("user")),
        host=text_of(actor.get("host")),
        transition=text_of(record.get("transition")),
        action=text_of(record.get("action")),
        target=target_text(record.get("target")),
        alert=alert_text(record.get("alert")),
        outcome=outcome,
        when=_parse_ts(ts),
    )


def chain_status(path: str, exists: bool, report: VerifyReport, secrets: list[str]) -> ChainStatus:
    """A `VerifyReport` as the screen shows it, secrets masked."""
    first = report.breaks[0] if report.breaks else None
    where = first.where if first is not None else None
    problem = str(redact(first.message, secrets)) if first is not None else None
    return ChainStatus(
        path=path,
        exists=exists,
        ok=report.ok,
        count=report.count,
        where=where,
        problem=problem,
        incomplete=tuple(str(redact(item, secrets)) for item in report.incomplete),
    )


class LiveAudit:
    """The log at `audit.path`, read afresh on every call (another process may append)."""

    def __init__(self, settings: Settings) -> None:
        self.log = AuditLog(settings.audit.path.expanduser(), secrets=secrets_of(settings))

    @property
    def path(self) -> Path:
        return self.log.path

    async def records(self, query: AuditQuery) -> AuditPage:
        return await asyncio.to_thread(self._records, query)

    async def details(self, key: str) -> str | None:
        return await asyncio.to_thread(self._details, key)

    async def verify(self) -> ChainStatus:
        return await asyncio.to_thread(self._verify)

    # -- in a worker thread ----------------------------------------------------------------

    def _row(self, line: LogLine) -> AuditRow:
        record = None if line.record is None else redact(line.record, self.log.secrets)
        return row_of(line.number, record, line.problem)

    def _records(self, query: AuditQuery) -> AuditPage:
        exists = self.log.path.exists()
        rows = [self._row(line) for line in self.log.lines()]
        rows.reverse()
        matched = [row for row in rows if query.matches(row)]
        return AuditPage(
            path=str(self.log.path),
            exists=exists,
            rows=tuple(matched[:MAX_ROWS]),
            matched=len(matched),
            total=len(rows),
        )

    def _details(self, key: str) -> str | None:
        for line in self.log.lines():
            if line.problem is not None or line.record is None:
                if key == f"line:{line.number}":
                    raw, _ = mask_text(line.raw.decode("utf-8", "replace"), self.log.secrets)
                    return f"line {line.number}: {line.problem}\n\n{raw.rstrip()}"
                continue
            if line.record.get("id") == key or key == f"line:{line.number}":
                record = redact(line.record, self.log.secrets)
                return json.dumps(record, indent=2, ensure_ascii=False)
        return None

    def _verify(self) -> ChainStatus:
        exists = self.log.path.exists() or self.log.head_path.exists()
        report = self.log.verify()
        return chain_status(str(self.log.path), exists, report, self.log.secrets)
