"""`python -m tests.security.full_disk_child LOG MODE ARGS…`: `oncall ARGS…` whose audit disk
fills up at the `started` record, for tests/security/test_audit_write_failure.py.

The remediator is the real executor over the test action `set-note` and the fakes of
tests/remediation (no cluster, no Redis), with the real `AuditLog` at LOG. MODE
`before-started`: the file may not grow by the `started` record; `after-started`: it may not
grow past it; `head-full`: the `started` line fits, the head file after it does not (ENOSPC,
as a disk with a few bytes left fails; issue 29: that left a false INCOMPLETE). The limit is
the kernel's (RLIMIT_FSIZE, SIGXFSZ ignored, so write() fails with
EFBIG as it fails with ENOSPC on a full disk), set on this process only. At exit the note's
writes are printed, so the test knows whether the change ran.
"""

from __future__ import annotations

import errno
import os
import resource
import signal
import sys
from pathlib import Path
from typing import Any

from oncall.audit.log import AuditLog
from oncall.cli.main import main as oncall_main
from oncall.model.action_params import ACTION_PARAMS
from oncall.remediation import registry
from oncall.remediation.executor import Remediator
from tests.remediation.fakes import ACTOR, make_world
from tests.remediation.note_action import NoteParams, NoteStore, SetNote


class DiskFillsUp:
    """The real audit log; the disk is full from the `started` record on (or after it)."""

    def __init__(self, path: Path, mode: str) -> None:
        self.log = AuditLog(path)
        self.path = self.log.path
        self.mode = mode

    def _fill(self) -> None:
        size = self.path.stat().st_size if self.path.exists() else 0
        _soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
        resource.setrlimit(resource.RLIMIT_FSIZE, (size, hard))

    def append(self, **fields: Any) -> dict[str, Any]:
        started = fields.get("transition") == "started"
        if started and self.mode == "before-started":
            self._fill()
        if started and self.mode == "head-full":
            return self._head_full(fields)
        record = self.log.append(**fields)
        if started and self.mode == "after-started":
            self._fill()
        return record

    def _head_full(self, fields: dict[str, Any]) -> dict[str, Any]:
        def no_space(*_args: Any) -> None:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

        self.log._write_head = no_space  # type: ignore[method-assign,assignment]
        try:
            return self.log.append(**fields)
        finally:
            del self.log._write_head

    def records(self) -> Any:
        return self.log.records()


def run(path: Path, mode: str, argv: list[str]) -> int:
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    action = SetNote(NoteStore({"main": "all quiet"}))
    registry.ACTIONS[action.name] = action
    ACTION_PARAMS[action.name] = NoteParams

    def from_settings(cls: type[Remediator], /, settings: Any, **options: Any) -> Remediator:
        world = make_world()
        base = world.remediator
        return cls(base.clients, DiskFillsUp(path, mode), base.guards, actor=ACTOR, **options)

    Remediator.from_settings = classmethod(from_settings)  # type: ignore[method-assign,assignment]
    try:
        return oncall_main(argv)
    finally:
        print(f"NOTE WRITES: {action.store.writes}", flush=True)


if __name__ == "__main__":
    sys.exit(run(Path(sys.argv[1]), sys.argv[2], sys.argv[3:]))
