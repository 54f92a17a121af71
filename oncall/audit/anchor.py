"""The team Stream as the audit log's anchor: what a copy looks like, and the cross-check.

Every record also goes to one team-wide Redis Stream (`audit.redis_stream`, append-only for
operators by the shipped ACL, `deploy/redis/`): the record's fields as text, plus `log_id`,
so a copy is known by log id + seq (seqs alone collide between operators' logs). Who can
write the file can rewrite a whole chain and its head so that it checks out locally; the
Stream still holds the original hashes. `cross_check` compares the two and names:

- a record the Stream has that the file lost (truncation with a rewritten head, a deletion);
- a record the file has with another hash than the Stream's copy (an edit, chain recomputed);
- a record the file has that the Stream never got (forged locally, or its copy failed then);
- a log of this account on this host (OS uid from `getuid()`, host name) that the Stream
  knows and that is gone from disk (log and head deleted, or replaced by a new log);
- entries removed from the Stream itself (XINFO STREAM: entries-added > length), which
  only XDEL/XTRIM/XADD MAXLEN can do: the ACL denies the first two to operators, and the
  counter shows the third.

A record's copy is the first to reach the Stream after (LATE_S before) the record's time:
any operator can XADD, so a later copy with other content is someone's forgery, shown as a
note and never a break of this log (docs/audit.md: one operator could make another's verify fail);
an edit of one's own log still differs from the copy written at the time. What the Stream
cannot tell: a record appended by hand and XADDed at once by its author (README: threat model).

Reading is bounded: pages of `PAGE` entries, `MAX_ENTRIES` at most, each page one command
under the client's timeout.
"""

from __future__ import annotations

import asyncio
import json
import os
import socket
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from typing import Any

from oncall.audit.chain import (
    ChainBreak,
    VerifyReport,
    acks_of,
    verify_lines,
    with_acknowledgements,
)
from oncall.audit.log import AuditLog
from oncall.audit.query import parse_time
from oncall.audit.records import Record
from oncall.backends.redis import RedisClient
from oncall.errors import BackendError

PAGE = 1000
MAX_ENTRIES = 2_000_000
#: A copy is XADDed right after the fsync (within the mirror's 2 s timeout). One that reached
#: the Stream much later than its record's time was written later than it claims.
LATE_S = 300.0


def stream_fields(record: Record) -> dict[str, str]:
    """A record as one Stream entry: every field as text (JSON for non-strings), plus
    `log_id` on its own so `redis-cli XRANGE` readers and the cross-check find it."""
    fields = {k: v if isinstance(v, str) else json.dumps(v, sort_keys=True, default=str)
              for k, v in record.items()}  # fmt: skip
    log = record.get("log")
    if isinstance(log, dict) and isinstance(log.get("id"), str):
        fields["log_id"] = log["id"]
    return fields


@dataclass(frozen=True)
class StreamEntry:
    """One copy in the Stream, as far as the cross-check needs it."""

    entry_id: str
    log_id: str
    seq: int
    hash: str
    ts: str
    host: str | None
    uid: int | None
    path: str | None

    @property
    def arrived_ms(self) -> int:
        """When Redis took it: the millisecond part of an auto-generated entry id."""
        try:
            return int(self.entry_id.split("-", 1)[0])
        except ValueError:
            return 0


def parse_entry(entry_id: str, fields: dict[str, str]) -> StreamEntry | None:
    """A copy written with a log id; None for anything else (older copies, other writers)."""
    try:
        log = json.loads(fields.get("log", "null"))
        seq = int(fields["seq"])
    except (ValueError, KeyError):
        return None
    log = log if isinstance(log, dict) else {}
    log_id = fields.get("log_id") or log.get("id")
    if not isinstance(log_id, str) or not log_id or "hash" not in fields:
        return None
    uid = log.get("uid")
    return StreamEntry(
        entry_id=entry_id,
        log_id=log_id,
        seq=seq,
        hash=fields["hash"],
        ts=fields.get("ts", ""),
        host=log.get("host") if isinstance(log.get("host"), str) else None,
        uid=uid if isinstance(uid, int) and not isinstance(uid, bool) else None,
        path=log.get("path") if isinstance(log.get("path"), str) else None,
    )


@dataclass(frozen=True)
class StreamState:
    """What the Stream held when read: the parsed copies, and XINFO's counters."""

    name: str
    entries: list[StreamEntry]
    length: int
    entries_added: int
    max_deleted: str
    truncated: bool = False


async def read_stream(client: RedisClient, name: str) -> StreamState:
    """Every copy in the Stream, oldest first (`XRANGE name - + COUNT 1000`, page by page)."""
    info = await client.xinfo_stream(name)
    if info is None:
        return StreamState(name, [], 0, 0, "0-0")
    entries: list[StreamEntry] = []
    start, seen = "-", 0
    for _page in range(MAX_ENTRIES // PAGE):
        rows = await client.xrange(name, PAGE, start=start)
        for entry_id, fields in rows:
            parsed = parse_entry(entry_id, fields)
            if parsed is not None:
                entries.append(parsed)
        seen += len(rows)
        if len(rows) < PAGE:
            break
        start = f"({rows[-1][0]}"  # exclusive: the page after the last entry read
    else:
        return StreamState(name, entries, seen, seen, "0-0", truncated=True)
    return StreamState(
        name,
        entries,
        length=_int(info.get("length")),
        entries_added=_int(info.get("entries-added", info.get("length"))),
        max_deleted=str(info.get("max-deleted-entry-id") or "0-0"),
    )


def _int(value: Any) -> int:
    try:
        return int(value)
    except (TypeError, ValueError):
        return 0


def _ranges(seqs: Iterable[int]) -> list[tuple[int, int]]:
    """[1, 2, 3, 7] → [(1, 3), (7, 7)]."""
    out: list[tuple[int, int]] = []
    for seq in sorted(set(seqs)):
        if out and seq == out[-1][1] + 1:
            out[-1] = (out[-1][0], seq)
        else:
            out.append((seq, seq))
    return out


def _records(low: int, high: int) -> str:
    return f"record {low}" if low == high else f"records {low}–{high}"


def cross_check(
    records: Iterable[Record],
    log_id: str | None,
    state: StreamState,
    *,
    host: str,
    uid: int,
    log_id_at: Callable[[str], str | None],
) -> tuple[list[ChainBreak], list[str]]:
    """Every disagreement between the file's well-formed `records` (of log `log_id`; None:
    no log, or one from before ids) and the Stream's copies, and notes of copies forged by
    others; `log_id_at(path)` reads another log's id from disk, to tell a log that moved from
    one that is gone."""
    breaks: list[ChainBreak] = []
    if state.truncated:
        breaks.append(ChainBreak(f"the team Stream {state.name} holds more than "
                                 f"{MAX_ENTRIES} entries: only those were compared"))  # fmt: skip
    lost = state.entries_added - state.length
    if lost > 0:
        message = (
            f"the team Stream {state.name} has lost {lost} of its {state.entries_added} entries "
            f"(last deleted entry {state.max_deleted}): trimmed or deleted — an operator's "
            "XADD MAXLEN, or an administrator"
        )
        breaks.append(ChainBreak(message, key=f"stream-lost:{state.max_deleted}:{lost}"))
    ours: dict[int, list[StreamEntry]] = {}
    for entry in state.entries:
        if entry.log_id == log_id:
            ours.setdefault(entry.seq, []).append(entry)
    local: dict[int, Record] = {}
    for record in records:
        named = record.get("log")
        if isinstance(named, dict) and named.get("id") == log_id and log_id is not None:
            local.setdefault(record["seq"], record)
    compared, notes = _compare(local, ours, log_id)
    breaks += compared
    breaks += _other_logs(state, log_id, host=host, uid=uid, log_id_at=log_id_at)
    return breaks, notes


def _first_copy(record: Record, copies: list[StreamEntry]) -> StreamEntry | None:
    """The copy written with `record`: the first to arrive no earlier than LATE_S before the
    record's time (one XADDed ahead of the record is a forgery lying in wait)."""
    try:
        written = parse_time(str(record.get("ts"))).timestamp() * 1000
    except ValueError:
        return copies[0] if copies else None
    return next((c for c in copies if c.arrived_ms >= written - LATE_S * 1000), None)


def _compare(
    local: dict[int, Record], ours: dict[int, list[StreamEntry]], log_id: str | None
) -> tuple[list[ChainBreak], list[str]]:
    breaks: list[ChainBreak] = []
    notes: list[str] = []
    missing = [seq for seq in local if seq not in ours]
    lost = [seq for seq in ours if seq not in local]
    differ, late = [], []
    for seq, record in local.items():
        copies = ours.get(seq, [])
        if not copies:
            continue
        first = _first_copy(record, copies)
        if first is None or first.hash != record["hash"]:
            differ.append(seq)
        elif _late(record, first):
            late.append(seq)
        forged = [c.entry_id for c in copies if c.hash != record["hash"] and c is not first]
        if forged and first is not None and first.hash == record["hash"]:
            notes.append(
                f"record {seq} of log {log_id}: the team Stream also holds {len(forged)} "
                f"other cop{'y' if len(forged) == 1 else 'ies'} ({', '.join(forged[:5])}) "
                "XADDed by someone with the operators' credentials; this log matches the copy "
                "written at the time"
            )
    kinds = (
        (lost, "in the team Stream but not in the file — deleted or cut off (the head "
               "rewritten to match)", "lost"),
        (differ, "not as the team Stream has it: its hash differs from the copy written at the "
                 "time — edited, and the chain after it recomputed", "differ"),
        (missing, "in the file but not in the team Stream — written by hand, or its copy "
                  "failed when it was written (remediate said so then)", "missing"),
        (late, f"reached the team Stream more than {LATE_S:g}s after its time — written later "
               "than it claims", "late"),
    )  # fmt: skip
    for seqs, text, kind in kinds:
        for low, high in _ranges(seqs):
            hashes = ",".join(
                str(local[s]["hash"] if s in local else ours[s][0].hash)
                for s in range(low, high + 1)
                if s in local or s in ours
            )
            breaks.append(
                ChainBreak(
                    f"{_records(low, high)} of log {log_id}: {text}",
                    key=f"stream-{kind}:{log_id}:{low}-{high}:{hashes}",
                )
            )
    return breaks, notes


def _late(record: Record, entry: StreamEntry) -> bool:
    try:
        written = parse_time(str(record.get("ts"))).timestamp() * 1000
    except ValueError:
        return False
    return entry.arrived_ms - written > LATE_S * 1000


def _other_logs(
    state: StreamState,
    log_id: str | None,
    *,
    host: str,
    uid: int,
    log_id_at: Callable[[str], str | None],
) -> list[ChainBreak]:
    """Logs this OS account on this host wrote to the Stream that are no longer on disk."""
    logs: dict[str, list[StreamEntry]] = {}
    for entry in state.entries:
        if entry.log_id != log_id and entry.host == host and entry.uid == uid:
            logs.setdefault(entry.log_id, []).append(entry)
    breaks: list[ChainBreak] = []
    for other, entries in logs.items():
        path = entries[-1].path
        if path is not None and log_id_at(path) == other:
            continue  # it lives on at its own path (another settings file's audit.path)
        last = max(entries, key=lambda e: e.seq)
        message = (
            f"log {other} of this account (uid {uid}) on {host}, {len(entries)} records up to "
            f"record {last.seq} at {last.ts}, was at {path}: the team Stream has it, the disk "
            "does not — deleted or replaced"
        )
        breaks.append(ChainBreak(message, key=f"stream-gone:{other}:{last.seq}:{last.hash}"))
    return breaks


async def verify_anchored(
    log: AuditLog, client: RedisClient | None, stream: str | None
) -> VerifyReport:
    """The local chain's verification, cross-checked against the team Stream `stream`.

    Without a Stream (`audit.redis_stream: null`, or no client) the report says so in
    `anchor`; with the Stream unreachable, `incomplete_check` says why only the local chain
    was checked, and the caller exits 3 unless the local chain alone shows a problem.
    """
    lines, head, head_problem = await asyncio.to_thread(log.snapshot)
    report = verify_lines(lines, head, head_problem, log.head_path)
    if not stream or client is None:
        # Never "OK" on the local chain alone (docs/audit.md): who can write the file can rewrite
        # it so that it checks out; without the Stream nothing outside the file says otherwise.
        return replace(report, incomplete_check="audit.redis_stream is off: no team anchor")
    try:
        state = await read_stream(client, stream)
    except BackendError as exc:
        return replace(report, incomplete_check=f"the team Stream {stream} is unreachable: {exc}")
    records = [line.record for line in lines if line.problem is None and line.record is not None]
    breaks, notes = cross_check(
        records,
        report.log_id,
        state,
        host=socket.gethostname(),
        uid=os.getuid(),
        log_id_at=_log_id_at,
    )
    ours = sum(1 for entry in state.entries if entry.log_id == report.log_id)
    anchor = f"the team Stream {stream}: {ours} copies of log {report.log_id or '(none)'}"
    merged = replace(report, breaks=[*report.breaks, *breaks], anchor=anchor, notes=notes)
    return with_acknowledgements(merged, acks_of(lines))


def _log_id_at(path: str) -> str | None:
    found = AuditLog(path).identity()
    return None if found is None else str(found["id"])
