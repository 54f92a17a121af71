"""Verifying the audit log's hash chain: where it first breaks, and why, as values.

`AuditLog.verify` reads the head file and the lines under a shared lock and hands them here.
A break names its line and record as fields (`ChainBreak`), so that a screen shows "at record
7" without reading it back out of the text `oncall audit verify` prints.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from oncall.audit.records import GENESIS, Record, incomplete_text, record_hash, track_started

if TYPE_CHECKING:
    from oncall.audit.log import LogLine


@dataclass(frozen=True)
class Head:
    """What the head file holds: the last record's seq and hash."""

    seq: int
    hash: str


@dataclass(frozen=True)
class ChainBreak:
    """Where the chain breaks and what is wrong there.

    `line` is the line of the log, `seq` the record's seq when that line is a record; both are
    None when the break is in the head file (records cut off the end, a stale head).
    """

    message: str
    line: int | None = None
    seq: int | None = None

    @property
    def where(self) -> str | None:
        """'record 7' or 'line 5' at a line of the log; None for the head file."""
        if self.seq is not None:
            return f"record {self.seq}"
        return None if self.line is None else f"line {self.line}"

    def __str__(self) -> str:
        if self.seq is not None:
            return f"record {self.seq} (line {self.line}): {self.message}"
        return self.message if self.line is None else f"line {self.line}: {self.message}"


@dataclass(frozen=True)
class VerifyReport:
    """What `verify` found: the first break in the chain, and actions left without an outcome."""

    ok: bool
    count: int
    breaks: list[ChainBreak] = field(default_factory=list)
    incomplete: list[str] = field(default_factory=list)

    @property
    def problems(self) -> list[str]:
        """The breaks as `oncall audit verify` prints them."""
        return [str(item) for item in self.breaks]


def verify_lines(
    lines: Iterable[LogLine], head: Head | None, head_problem: str | None, head_path: Path
) -> VerifyReport:
    """Judge the log's lines in order and then the head file (unreadable: `head_problem`)."""
    problems: list[ChainBreak] = []
    last: Record | None = None
    last_line = 0
    broken = False
    count = 0
    started: dict[str, Record] = {}
    head_hash_at_seq: str | None = None

    for line in lines:
        record = line.record
        if record is not None and line.problem is None:
            count += 1
            track_started(started, record)
        if broken:
            continue
        problem = _judge(line, last, last_line)
        if problem is not None:
            problems.append(problem)
            broken = True
            continue
        assert record is not None
        last, last_line = record, line.number
        if head is not None and record["seq"] == head.seq:
            head_hash_at_seq = record["hash"]

    if not broken:
        head_break = _judge_head(head_path, head, head_problem, last, head_hash_at_seq)
        if head_break is not None:
            problems.append(ChainBreak(head_break))
    incomplete = [incomplete_text(action_id, rec) for action_id, rec in started.items()]
    return VerifyReport(ok=not problems, count=count, breaks=problems, incomplete=incomplete)


def _judge_head(
    head_path: Path,
    head: Head | None,
    head_problem: str | None,
    last: Record | None,
    at_seq: str | None,
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
    if at_seq is not None and at_seq != head.hash:
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


def _judge(line: LogLine, last: Record | None, last_line: int) -> ChainBreak | None:
    """The problem with this line given the last good record, or None when it chains on."""
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
    if record["prev"] != last["hash"]:
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
