"""Verifying the audit log's hash chain: every place it breaks, and why, as values.

`AuditLog.verify` reads the head file and the lines under a shared lock and hands them here.
A break names its line and record as fields (`ChainBreak`), so that a screen shows "at record
7" without reading it back out of the text `oncall audit verify` prints. The check goes on
past a break (a torn line from a crash, an edit) and lists every one; a break a reviewer
signed off with an `acknowledged` record (`oncall audit acknowledge`) is listed apart.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING

from oncall.audit.records import GENESIS, Record, incomplete_text, record_hash, track_started

if TYPE_CHECKING:
    from oncall.audit.log import LogLine


@dataclass(frozen=True)
class Head:
    """What the head file holds: the last record's seq and hash, and the log's id."""

    seq: int
    hash: str
    log_id: str | None = None


@dataclass(frozen=True)
class ChainBreak:
    """Where the chain breaks and what is wrong there.

    `line` is the line of the log, `seq` the record's seq when that line is a record; both are
    None when the break is in the head file (records cut off the end, a stale head) or in the
    cross-check against the team Stream. `key` identifies the scar for as long as it stays the
    same (a line's number and bytes; a head's claim; the Stream's entries): `scar` is its
    short form, the name a reviewer acknowledges it by (`oncall audit acknowledge SCAR`).
    """

    message: str
    line: int | None = None
    seq: int | None = None
    key: str = ""

    @property
    def where(self) -> str | None:
        """'record 7' or 'line 5' at a line of the log; None for the head file."""
        if self.seq is not None:
            return f"record {self.seq}"
        return None if self.line is None else f"line {self.line}"

    @property
    def scar(self) -> str:
        """Eight hex digits naming this problem while it stays the same."""
        return hashlib.sha256((self.key or self.message).encode()).hexdigest()[:8]

    def __str__(self) -> str:
        if self.seq is not None:
            return f"record {self.seq} (line {self.line}): {self.message}"
        return self.message if self.line is None else f"line {self.line}: {self.message}"


@dataclass(frozen=True)
class Acknowledged:
    """A scar a reviewer signed off: the break, and the `acknowledged` record that says so."""

    scar: ChainBreak
    by: str
    at: str
    reason: str
    seq: int

    def __str__(self) -> str:
        return f"{self.scar} — acknowledged by {self.by} at {self.at} (record {self.seq}): " + (
            self.reason
        )


@dataclass(frozen=True)
class VerifyReport:
    """What `verify` found: every break in the chain (those a reviewer acknowledged apart),
    and actions left without an outcome. `anchor` says what the local chain was checked
    against ("the team Stream oncall:audit: 12 records of log 3f…"), `incomplete_check` why
    only the local chain could be checked (the Stream unreachable); None when it was not."""

    ok: bool
    count: int
    breaks: list[ChainBreak] = field(default_factory=list)
    incomplete: list[str] = field(default_factory=list)
    acknowledged: list[Acknowledged] = field(default_factory=list)
    log_id: str | None = None
    anchor: str | None = None
    incomplete_check: str | None = None
    #: What the Stream holds that does not break this log: copies forged into it by someone
    #: else with the operators' credentials (docs/audit.md), shown, not counted.
    notes: list[str] = field(default_factory=list)

    @property
    def problems(self) -> list[str]:
        """The breaks as `oncall audit verify` prints them."""
        return [str(item) for item in self.breaks]


def verify_lines(
    lines: Iterable[LogLine], head: Head | None, head_problem: str | None, head_path: Path
) -> VerifyReport:
    """Judge every line in order and then the head file (unreadable: `head_problem`).

    A break does not end the check: the next well-formed record is judged against the last
    one (whatever was wrong with it), so a torn line or one edit does not hide what follows.
    """
    problems: list[ChainBreak] = []
    last: Record | None = None
    last_line = 0
    skipped = 0
    count = 0
    started: dict[str, Record] = {}
    head_hash_at_seq: set[str] | None = None
    log_id: str | None = None
    lines_seen: list[LogLine] = []

    for line in lines:
        lines_seen.append(line)
        record = line.record
        well_formed = record is not None and line.problem is None
        if well_formed:
            assert record is not None
            count += 1
            track_started(started, record)
        problem = _judge(line, last, last_line, skipped)
        if problem is not None:
            problems.append(replace(problem, key=_line_key(line)))
        if not well_formed:
            skipped += 1
            continue  # the next is judged against the last record that is one
        skipped = 0
        assert record is not None
        named = _log_id(record)
        if log_id is None and named is not None:
            log_id = named
        elif named is not None and named != log_id and problem is None:
            problems.append(
                ChainBreak(
                    f"belongs to log {named}, not to this log {log_id} — spliced in from another",
                    line=line.number,
                    seq=record["seq"],
                    key=_line_key(line),
                )
            )
        last, last_line = record, line.number
        if head is not None and record["seq"] == head.seq:
            head_hash_at_seq = {record["hash"], record_hash(record)}

    head_break = _judge_head(head_path, head, head_problem, last, head_hash_at_seq)
    if head_break is not None:
        problems.append(ChainBreak(head_break, key=f"head:{head_break}"))
    if head is not None and head.log_id and log_id and head.log_id != log_id:
        message = f"the head file names log {head.log_id}, the records log {log_id} — replaced"
        problems.append(ChainBreak(message, key=f"head:{message}"))
    incomplete = [incomplete_text(action_id, rec) for action_id, rec in started.items()]
    report = VerifyReport(
        ok=not problems,
        count=count,
        breaks=problems,
        incomplete=incomplete,
        log_id=log_id or (head.log_id if head is not None else None),
    )
    return with_acknowledgements(report, acks_of(lines_seen))


def acks_of(lines: Iterable[LogLine]) -> list[Record]:
    """The reviewers' `acknowledged` records whose content matches their hash."""
    return [
        line.record
        for line in lines
        if line.problem is None
        and line.record is not None
        and line.record.get("transition") == "acknowledged"
        and record_hash(line.record) == line.record.get("hash")
    ]


def with_acknowledgements(report: VerifyReport, acks: Iterable[Record]) -> VerifyReport:
    """The report with each break a reviewer's intact `acknowledged` record names moved from
    `breaks` to `acknowledged`. An acknowledgement names a scar by its key's short form, and
    a scar that changes (more lines cut, the line edited again) is a new one, reported."""
    signed: dict[str, Record] = {}
    for record in acks:
        detail = record.get("detail")
        scar = detail.get("scar") if isinstance(detail, dict) else None
        if isinstance(scar, str):
            signed.setdefault(scar, record)
    breaks: list[ChainBreak] = []
    done = list(report.acknowledged)
    for item in report.breaks:
        found = signed.get(item.scar)
        if found is None:
            breaks.append(item)
            continue
        record = found
        detail = record.get("detail") or {}
        actor = record.get("actor")
        by = f"{actor.get('user')}@{actor.get('host')}" if isinstance(actor, dict) else "?"
        done.append(
            Acknowledged(item, by, str(record.get("ts")), str(detail.get("reason")), record["seq"])
        )
    return replace(report, ok=not breaks, breaks=breaks, acknowledged=done)


def _log_id(record: Record) -> str | None:
    value = record.get("log")
    if isinstance(value, dict) and isinstance(value.get("id"), str):
        return str(value["id"])
    return None


def _line_key(line: LogLine) -> str:
    """A line scar's identity: its number and its bytes (an acknowledged line edited again is
    a new scar)."""
    # Without its newline: the next append ends a torn last line, which is no new scar.
    digest = hashlib.sha256(line.raw.rstrip(b"\n")).hexdigest()
    return f"line:{line.number}:{digest}"


def _judge_head(
    head_path: Path,
    head: Head | None,
    head_problem: str | None,
    last: Record | None,
    at_seq: set[str] | None,
) -> str | None:
    """What is wrong with the head file given the log's last good record; None if nothing."""
    if head_problem is not None:
        return head_problem
    if head is None:
        if last is None:
            return None
        return f"the head file {head_path} is missing — truncation from the end cannot be ruled out"
    if last is None:
        return f"the log is empty but the head file says {head.seq} — records were removed"
    end = last["seq"]
    if end < head.seq:
        return (
            f"the log ends at record {end} but the head file says {head.seq} — "
            "records were truncated from the end"
        )
    if at_seq is not None and head.hash not in at_seq:
        return (
            f"record {head.seq}'s hash does not match the head file — "
            "it was rewritten, or the head file was"
        )
    if end > head.seq + 1:
        # One record past the head is a crash between the append and the head's rewrite.
        return (
            f"the log goes on to record {end} but the head file says {head.seq} — "
            "the head file is stale or was replaced"
        )
    return None


def _judge(
    line: LogLine, last: Record | None, last_line: int, skipped: int = 0
) -> ChainBreak | None:
    """The problem with this line given the last well-formed record (`skipped` unreadable
    lines after it), or None when it chains on."""
    if line.problem is not None or line.record is None:
        return ChainBreak(str(line.problem), line=line.number)
    record = line.record
    seq = record["seq"]

    def at(message: str) -> ChainBreak:
        return ChainBreak(message, line=line.number, seq=seq)

    if record_hash(record) != record["hash"]:
        return at("hash does not match its content — edited")
    if last is None:
        if record["prev"] != GENESIS:
            return at(
                "the first record does not start the chain (prev is not "
                f"{GENESIS[:8]}…) — records were deleted from the start"
            )
        if seq != 1:
            return at(f"the first record's seq is {seq}, not 1 — records were deleted")
        return None
    expected = last["seq"] + 1
    # The link may be the last record's stored hash (its content edited) or its true hash
    # (its hash field edited): that record is reported already, this one chains on.
    if record["prev"] not in (last["hash"], record_hash(last)):
        if skipped and seq == expected + skipped:
            return None  # the unreadable lines since `last` were records: reported as such
        if seq == expected:
            return at(
                f"prev does not match record {last['seq']}'s hash (line {last_line}) — "
                f"record {last['seq']} was rewritten or replaced"
            )
        return at(
            f"prev does not match record {last['seq']}'s hash — "
            "a record was deleted or reordered before it"
        )
    if seq != expected:
        return at(f"seq jumps from {last['seq']} to {seq}")
    return None
