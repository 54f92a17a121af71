"""The append-only, hash-chained audit log on disk: append, read back, verify.

One JSON record per line (`records.py`), fsynced before `append` returns; when the write or
the fsync fails, `append` raises `AuditWriteError` and the record must be taken as not written
(write-ahead: the executor runs nothing then). A sidecar `PATH.head` file holds the last seq
and hash and the log's id, rewritten atomically after each append, so cutting records off the
end is detected too. Every record carries the log's identity (`log`: id, host, uid, path),
fixed by its first record: the team Stream keys its copies by log id + seq. Appends from
several processes on one host are serialised by an exclusive `flock` on `PATH.lock`. Copies
to a Redis Stream or a Kubernetes Event are mirrors injected by the caller; a mirror that
fails never loses the local record.
"""

from __future__ import annotations

import contextlib
import copy
import errno
import fcntl
import json
import logging
import os
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from oncall.audit.chain import Head, VerifyReport, verify_lines
from oncall.audit.records import (
    GENESIS,
    AuditError,
    AuditWriteError,
    Record,
    build_record,
    check_fields,
    line_of,
    new_log_identity,
    redact,
)
from oncall.settings.files import not_regular

log = logging.getLogger(__name__)

Mirror = Callable[[Record], object]

_NOT_JSON = "not JSON — truncated or edited"
_REQUIRED = {"seq": int, "hash": str, "prev": str}


def open_own_file(path: Path, flags: int, *, owned: bool = False, follow: bool = False) -> int:
    """`os.open` of a log, head or lock file that is a regular file and (unless `follow`, for
    reading) not a symbolic link (docs/audit.md: a FIFO hung oncall, a link had records appended to
    whatever it named); with `owned`, also one of this account. OSError naming it otherwise."""
    nofollow = 0 if follow else os.O_NOFOLLOW
    try:
        fd = os.open(path, flags | nofollow | os.O_NONBLOCK | os.O_CLOEXEC, 0o600)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise OSError(errno.ELOOP, "a symbolic link: refused", str(path)) from exc
        raise
    info = os.fstat(fd)
    kind = not_regular(info.st_mode)
    if kind is None and owned and info.st_uid != os.geteuid():
        kind = f"owned by uid {info.st_uid}, not this account ({os.geteuid()})"
    if kind is not None:
        os.close(fd)
        raise OSError(errno.EINVAL, f"{kind}: refused", str(path))
    return fd


@dataclass(frozen=True)
class LogLine:
    """One physical line of the log: its number, its bytes, and the record or the problem."""

    number: int
    raw: bytes
    record: Record | None
    problem: str | None = None


class _DuplicateKey(Exception):
    pass


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise _DuplicateKey(repr(key))
        out[key] = value
    return out


def _parse(number: int, raw: bytes) -> LogLine:
    body = raw.rstrip(b"\n")
    if not body.strip():
        return LogLine(number, raw, None, "empty line — edited")
    try:
        value = json.loads(body, object_pairs_hook=_no_duplicates)
    except _DuplicateKey as exc:
        # Parsers keep the last of two equal keys and the hash would match, while a person
        # reading the line may see the first: the line was edited.
        return LogLine(number, raw, None, f"key {exc} appears twice — edited")
    except ValueError:  # UnicodeDecodeError included
        return LogLine(number, raw, None, _NOT_JSON)
    if not isinstance(value, dict):
        return LogLine(number, raw, None, _NOT_JSON)
    for name, kind in _REQUIRED.items():
        item = value.get(name)
        if not isinstance(item, kind) or isinstance(item, bool):
            return LogLine(number, raw, value, f"not an audit record (no valid {name}) — edited")
    return LogLine(number, raw, value)


def _log_of(record: Record | None) -> dict[str, Any] | None:
    """A record's `log` identity when it has a usable one."""
    value = record.get("log") if record is not None else None
    if isinstance(value, dict) and isinstance(value.get("id"), str) and value["id"]:
        return dict(value)
    return None


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _make_dirs(path: Path) -> None:
    """Create path and any missing parents, each 0o700 (mkdir(parents=True) ignores mode)."""
    missing: list[Path] = []
    while not path.exists():
        missing.append(path)
        path = path.parent
    for folder in reversed(missing):
        with contextlib.suppress(FileExistsError):
            folder.mkdir(mode=0o700)


def _last_line(fd: int) -> tuple[bytes, bool]:
    """The last non-empty line of an open file, and whether the file ends with a newline."""
    size = os.fstat(fd).st_size
    if size == 0:
        return b"", True
    chunk = 8192
    data = b""
    pos = size
    while pos > 0:
        step = min(chunk, pos)
        pos -= step
        data = os.pread(fd, step, pos) + data
        if data.rstrip(b"\n").count(b"\n") >= 1:
            break
    ends_with_newline = data.endswith(b"\n")
    lines = [line for line in data.split(b"\n") if line.strip()]
    return (lines[-1] if lines else b""), ends_with_newline


class AuditLog:
    """The audit log at `path`; secrets given here never reach the file or a mirror."""

    def __init__(
        self, path: Path | str, *, secrets: Iterable[str] = (), mirrors: Sequence[Mirror] = ()
    ) -> None:
        self.path = Path(path).expanduser()
        self.head_path = self.path.with_name(self.path.name + ".head")
        self.lock_path = self.path.with_name(self.path.name + ".lock")
        self.secrets = [s for s in secrets if s]
        self.mirrors = list(mirrors)
        self.mirror_errors: list[str] = []

    # -- writing ---------------------------------------------------------------------------

    def append(self, **fields: Any) -> Record:
        """Write one record (fsynced, head updated), then hand a copy to each mirror."""
        check_fields(fields)  # a malformed record creates no file at all
        try:
            record = self._append_locked(fields)
        except OSError as exc:
            raise AuditWriteError(f"cannot write the audit log {self.path}: {exc}") from exc
        for mirror in self.mirrors:
            try:
                mirror(copy.deepcopy(record))
            except Exception as exc:  # a failing mirror must never lose the local record
                name = getattr(mirror, "__name__", type(mirror).__name__)
                text = redact(f"{name}: {type(exc).__name__}: {exc}", self.secrets)
                self.mirror_errors.append(f"record {record['seq']}: {text}")
                log.warning("audit mirror failed for record %s: %s", record["seq"], text)
        return record

    def _append_locked(self, fields: dict[str, Any]) -> Record:
        _make_dirs(self.path.parent)
        lock_fd = open_own_file(self.lock_path, os.O_RDWR | os.O_CREAT)
        try:
            fcntl.flock(lock_fd, fcntl.LOCK_EX)
            created = not self.path.exists()
            fd = open_own_file(self.path, os.O_RDWR | os.O_APPEND | os.O_CREAT, owned=True)
            size = os.fstat(fd).st_size
            try:
                last, ends_with_newline = _last_line(fd)
                head = self._current_head(last)
                record = build_record(
                    fields,
                    seq=head.seq + 1 if head else 1,
                    prev=head.hash if head else GENESIS,
                    secrets=self.secrets,
                    log=self._identity(last),
                )
                data = line_of(record)
                if not ends_with_newline:
                    # A write torn by a crash: keep its fragment on its own line, where
                    # verify reports it, rather than gluing this record onto it.
                    data = b"\n" + data
                try:
                    view = memoryview(data)
                    while view:
                        view = view[os.write(fd, view) :]
                    os.fsync(fd)
                    if created:
                        _fsync_dir(self.path.parent)
                    self._write_head(Head(record["seq"], record["hash"], record["log"]["id"]))
                except OSError:
                    # Disk full (or the head unwritable): a record the caller is told was not
                    # written must not stay, whole or torn (a `started` left so reads as an
                    # action that began and never ended).
                    with contextlib.suppress(OSError):
                        os.ftruncate(fd, size)
                        os.fsync(fd)
                    raise
            finally:
                os.close(fd)
            return record
        finally:
            os.close(lock_fd)  # releases the flock

    def _current_head(self, last_line: bytes) -> Head | None:
        """The chain head: the head file, unless the log's last record is newer.

        The log is newer after a crash between writing a record and rewriting the head; the
        head file is newer when records were cut off the end (verify reports that).
        """
        try:
            head = self.read_head()
        except AuditError as exc:  # verify reports it; appending must not stop because of it
            log.warning("%s; continuing from the log's last record", exc)
            head = None
        tail = _parse(0, last_line) if last_line else None
        if tail is not None and (tail.problem is not None or tail.record is None) and head is None:
            # No head file and a torn last line: the last good record anywhere is the head,
            # so the chain goes on instead of restarting at seq 1.
            good = [line.record for line in self.lines() if line.problem is None and line.record]
            tail = _parse(0, line_of(good[-1])) if good else None
        if tail is not None and tail.problem is None and tail.record is not None:
            seq, digest = tail.record["seq"], tail.record["hash"]
            if head is None or seq > head.seq:
                return Head(seq, digest)
        return head

    def _identity(self, last_line: bytes) -> dict[str, Any]:
        """The log's identity as its last record (else its first, else the head) names it; a
        new one for a new log, or for a log written before logs had ids."""
        tail = _parse(0, last_line) if last_line else None
        found = _log_of(tail.record) if tail is not None and tail.problem is None else None
        if found is None:
            found = self.identity()
        return found or new_log_identity(str(self.path))

    def identity(self) -> dict[str, Any] | None:
        """The log's identity ({id, host, uid, path}) from its first record that names one, or
        the head file's id alone; None when neither does (no log, or one from before ids)."""
        for line in self.lines():
            found = _log_of(line.record) if line.problem is None else None
            if found is not None:
                return found
        try:
            head = self.read_head()
        except AuditError:
            head = None
        if head is not None and head.log_id:
            return {"id": head.log_id}
        return None

    def _write_head(self, head: Head) -> None:
        tmp = self.head_path.with_name(self.head_path.name + ".tmp")
        fd = open_own_file(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
        body = {"seq": head.seq, "hash": head.hash, "log_id": head.log_id}
        try:
            os.write(fd, json.dumps(body).encode() + b"\n")
            os.fsync(fd)
        finally:
            os.close(fd)
        tmp.replace(self.head_path)
        _fsync_dir(self.head_path.parent)

    # -- reading ---------------------------------------------------------------------------

    def read_head(self) -> Head | None:
        """The head file's seq and hash; None when there is none. AuditError when unreadable."""
        try:
            with os.fdopen(open_own_file(self.head_path, os.O_RDONLY, follow=True), "rb") as fh:
                text = fh.read(1 << 16).decode("utf-8", errors="replace")
        except FileNotFoundError:
            return None
        except OSError as exc:
            raise AuditError(f"cannot read {self.head_path}: {exc}") from exc
        try:
            value = json.loads(text)
            seq, digest = value["seq"], value["hash"]
        except (ValueError, TypeError, KeyError) as exc:
            raise AuditError(f"{self.head_path}: not a head file ({exc}) — edited") from exc
        log_id = value.get("log_id")
        if not isinstance(seq, int) or not isinstance(digest, str):
            raise AuditError(f"{self.head_path}: not a head file — edited")
        return Head(seq, digest, log_id if isinstance(log_id, str) else None)

    def lines(self) -> Iterator[LogLine]:
        """Every line of the log, numbered from 1, parsed; nothing is skipped."""
        try:
            handle = os.fdopen(open_own_file(self.path, os.O_RDONLY, follow=True), "rb")
        except FileNotFoundError:
            return
        except OSError as exc:
            raise AuditError(f"cannot read the audit log {self.path}: {exc}") from exc
        with handle:
            # Binary iteration splits on b"\n" only; U+2028 inside a string stays in its line.
            for number, raw in enumerate(handle, start=1):
                yield _parse(number, raw)

    def records(self) -> Iterator[Record]:
        """Every record, for listing; a bad line comes as {"line": N, "problem": "…"}."""
        for line in self.lines():
            if line.problem is not None:
                yield {"line": line.number, "problem": line.problem}
            elif line.record is not None:
                yield line.record

    # -- verifying -------------------------------------------------------------------------

    def verify(self) -> VerifyReport:
        """Check the whole chain and the head file; list actions started without an outcome."""
        lines, head, head_problem = self.snapshot()
        return verify_lines(lines, head, head_problem, self.head_path)

    def snapshot(self) -> tuple[list[LogLine], Head | None, str | None]:
        """Every line and the head file, read as one (appends held off), and what is wrong
        with the head file when it cannot be read."""
        with self._shared_lock():
            try:
                head, head_problem = self.read_head(), None
            except AuditError as exc:
                head, head_problem = None, str(exc)
            return list(self.lines()), head, head_problem

    @contextlib.contextmanager
    def _shared_lock(self) -> Iterator[None]:
        """Hold appends off while reading head and log, so they are judged as one snapshot.

        A reviewer may have no write access: without a lock file there is nothing to wait for.
        """
        try:
            fd = open_own_file(self.lock_path, os.O_RDONLY, follow=True)
        except OSError:
            yield
            return
        try:
            fcntl.flock(fd, fcntl.LOCK_SH)
            yield
        finally:
            os.close(fd)
