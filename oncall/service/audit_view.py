"""The audit log for its readers, the app's audit screen and `oncall audit`, in one place.

The screen asks an `AuditSource` for the records (newest first, filtered), for one record's
details, and for the chain's verification; `LiveAudit` reads `audit.path`, tests hand in fakes.
`oncall audit list|show|verify|export` calls the same `LiveAudit`'s blocking methods. Every
record and problem that leaves here is masked with the settings' secrets (`secrets_of`), and
for the screen every file read runs in a worker thread, never on the event loop (the log can
be large and the disk slow).

A filter is what the user types after `/`: words that must all appear (case-insensitive) in a
record's user, host, transition, action, target, alert or outcome, and optionally
`since:1h` (a duration back from now, or an ISO time). Unreadable lines always pass, so a
filter never hides evidence of tampering.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from dataclasses import dataclass, replace
from datetime import datetime
from pathlib import Path
from typing import Any, Protocol

from oncall.audit.chain import ChainBreak, VerifyReport
from oncall.audit.log import AuditLog, LogLine
from oncall.audit.query import (
    CSV_COLUMNS,
    AuditQuery,
    actor_field,
    alert_text,
    mask_text,
    outcome_text,
    parse_since,
    select,
    target_text,
    text_of,
    to_csv,
)
from oncall.audit.records import REVIEW_ACTION, Record, new_action_id, redact, secrets_of
from oncall.errors import BackendError, UsageError
from oncall.settings import Settings

__all__ = [
    "CSV_COLUMNS",
    "MAX_ROWS",
    "AuditPage",
    "AuditQuery",
    "AuditRow",
    "AuditSource",
    "ChainStatus",
    "LiveAudit",
    "LogLine",
    "VerifyReport",
    "chain_status",
    "parse_query",
    "parse_since",
    "row_of",
    "to_csv",
]

#: The newest records shown at most: a DataTable adds rows at ~0.2 ms each on the event loop.
MAX_ROWS = 2000

_SINCE = "since:"


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
    problem: str | None = None


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
    #: How many problems verify lists (the first is `where`/`problem`).
    problems: int = 0
    #: What the local chain was cross-checked against ("the team Stream oncall:audit: …").
    anchor: str | None = None
    #: Why only the local chain could be checked (the Stream unreachable), as `LOCAL ONLY:`.
    local_only: str | None = None


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
    seq = record.get("seq")
    return AuditRow(
        key=str(record.get("id") or f"line:{number}"),
        line=number,
        seq=seq if isinstance(seq, int) else None,
        time=str(record.get("ts") or "")[:19].replace("T", " "),
        user=actor_field(record, "user"),
        host=actor_field(record, "host"),
        transition=text_of(record.get("transition")),
        action=text_of(record.get("action")),
        target=target_text(record.get("target")),
        alert=alert_text(record.get("alert")),
        outcome=outcome_text(record),
    )


def cut(text: str, width: int | None) -> str:
    """A row's field as one line for a column `width` wide (None: any width), "…" where cut.

    The audit screen and `oncall audit list` cut the same way: one odd record (a long target, a
    multi-line outcome) must not push the other columns away.
    """
    text = " ".join(text.split())
    if width is not None and len(text) > width:
        return text[: width - 1] + "…"
    return text


def chain_status(path: str, exists: bool, report: VerifyReport) -> ChainStatus:
    """A `VerifyReport` (already masked) as the screen shows it."""
    first = report.breaks[0] if report.breaks else None
    return ChainStatus(
        path=path,
        exists=exists,
        ok=report.ok,
        count=report.count,
        where=first.where if first is not None else None,
        problem=first.message if first is not None else None,
        incomplete=tuple(report.incomplete),
        problems=len(report.breaks),
        anchor=report.anchor,
        local_only=report.incomplete_check,
    )


class LiveAudit:
    """The log at `audit.path`, read afresh on every call (another process may append).

    The async methods are the screen's `AuditSource`; the blocking ones serve the CLI.
    """

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.log = AuditLog(settings.audit.path.expanduser(), secrets=secrets_of(settings))

    @property
    def path(self) -> Path:
        return self.log.path

    @property
    def exists(self) -> bool:
        """Whether there is a log or a head file to read (a head alone is a cut log)."""
        return self.log.path.exists() or self.log.head_path.exists()

    async def records(self, query: AuditQuery) -> AuditPage:
        return await asyncio.to_thread(self._records, query)

    async def details(self, key: str) -> str | None:
        return await asyncio.to_thread(self._details, key)

    async def verify(self) -> ChainStatus:
        """The chain cross-checked against the team Stream, as `oncall audit verify` does."""
        return chain_status(str(self.log.path), self.exists, await self.check_anchored())

    # -- blocking: the CLI calls these directly, the screen in a worker thread -----------------

    def public(self, value: Any) -> Any:
        """`value` with every configured secret masked."""
        return redact(value, self.log.secrets)

    def masked(self, line: LogLine) -> LogLine:
        """The line with its record or its problem masked (its raw bytes are left for
        `export_lines`, which masks them as text)."""
        if line.record is not None:
            line = replace(line, record=self.public(line.record))
        if line.problem is not None:
            line = replace(line, problem=str(self.public(line.problem)))
        return line

    def lines(self, query: AuditQuery | None = None) -> list[LogLine]:
        """The lines whose records match `query` (all when None), masked, oldest first;
        unreadable lines always pass. A query's words are matched on the masked records."""
        lines = (self.masked(line) for line in self.log.lines())
        return list(lines if query is None else select(lines, query))

    def find(self, wanted: str) -> Record | None:
        """The record whose id is `wanted`, or whose seq it is; masked. None when none is."""
        # ASCII digits only: "³" and "٣" are digits to str.isdigit and no seq to int().
        seq = int(wanted) if wanted.isascii() and wanted.isdigit() else None
        for line in self.log.lines():
            record = line.record
            if line.problem is not None or record is None:
                continue
            if record.get("id") == wanted or (seq is not None and record.get("seq") == seq):
                return dict(self.public(record))
        return None

    def check(self) -> VerifyReport:
        """Verify the whole chain (the local file only); problems and incomplete actions
        masked."""
        return self._masked_report(self.log.verify())

    async def check_anchored(self) -> VerifyReport:
        """Verify the chain and cross-check it against the team Stream (`oncall audit
        verify`); `incomplete_check` says so when the Stream could not be read."""
        from oncall.audit.anchor import verify_anchored
        from oncall.backends.from_settings import redis_client

        stream = self.settings.audit.redis_stream
        if not stream:
            return self._masked_report(await verify_anchored(self.log, None, None))
        async with redis_client(self.settings.redis) as client:
            return self._masked_report(await verify_anchored(self.log, client, stream))

    async def acknowledge(self, scar: ChainBreak, reason: str) -> tuple[Record, str | None]:
        """Append a reviewer's sign-off of `scar` (an `acknowledged` record) and copy it to
        the team Stream; the record, and why the copy failed (None when it did not)."""
        from oncall.backends.from_settings import redis_client
        from oncall.remediation.audit_mirror import mirror_with_client

        identity = await asyncio.to_thread(self.log.identity) or {}
        record = await asyncio.to_thread(
            self.log.append,
            action_id=new_action_id(),
            transition="acknowledged",
            action=REVIEW_ACTION,
            target={"kind": "AuditLog", "name": identity.get("id") or str(self.log.path),
                    "path": str(self.log.path)},
            detail={"scar": scar.scar, "problem": str(scar), "reason": reason},
        )  # fmt: skip
        stream = self.settings.audit.redis_stream
        if not stream:
            return record, "audit.redis_stream is off"
        try:
            async with redis_client(self.settings.redis) as client:
                await mirror_with_client(client, stream, record)
        except BackendError as exc:
            return record, str(self.public(str(exc)))
        return record, None

    def _masked_report(self, report: VerifyReport) -> VerifyReport:
        def mask(item: ChainBreak) -> ChainBreak:
            return replace(item, message=str(self.public(item.message)))

        return replace(
            report,
            breaks=[mask(b) for b in report.breaks],
            acknowledged=[
                replace(a, scar=mask(a.scar), reason=str(self.public(a.reason)))
                for a in report.acknowledged
            ],
            incomplete=[str(self.public(item)) for item in report.incomplete],
            notes=[str(self.public(note)) for note in report.notes],
            incomplete_check=None
            if report.incomplete_check is None
            else str(self.public(report.incomplete_check)),
        )

    def export_lines(self, lines: list[LogLine]) -> Iterator[tuple[LogLine, bytes, bool]]:
        """Each line's raw bytes for a verbatim export, newline-terminated, with any secret
        masked, and whether one was (that line then no longer matches its hash)."""
        for line in lines:
            raw = line.raw if line.raw.endswith(b"\n") else line.raw + b"\n"
            text, masked = mask_text(raw.decode("utf-8", "replace"), self.log.secrets)
            yield line, (text.encode("utf-8") if masked else raw), masked

    def _records(self, query: AuditQuery) -> AuditPage:
        exists = self.log.path.exists()
        lines = [self.masked(line) for line in self.log.lines()]
        matched = [row_of(line.number, line.record, line.problem) for line in select(lines, query)]
        matched.reverse()
        return AuditPage(
            path=str(self.log.path),
            exists=exists,
            rows=tuple(matched[:MAX_ROWS]),
            matched=len(matched),
            total=len(lines),
        )

    def _details(self, key: str) -> str | None:
        for line in self.log.lines():
            if line.problem is not None or line.record is None:
                if key == f"line:{line.number}":
                    raw, _ = mask_text(line.raw.decode("utf-8", "replace"), self.log.secrets)
                    return f"line {line.number}: {line.problem}\n\n{raw.rstrip()}"
                continue
            if line.record.get("id") == key or key == f"line:{line.number}":
                record = self.public(line.record)
                return json.dumps(record, indent=2, ensure_ascii=False)
        return None
