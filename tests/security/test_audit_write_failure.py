"""Threat: the audit disk fills up (or is made to) around a change, so it goes unrecorded.

Issue 12, item 8: with the disk full after `started`, the level was changed and the CLI said
only "cannot write the audit log" (exit 2): no verification, no word that something changed;
and a failure before execution could leave a `started` for an action that never ran. Now,
write-ahead: no `started` on disk, no execution; an outcome that cannot be written after the
change is shown loudly, verified anyway, and the command exits 1 with "audit incomplete".

`oncall remediate set-note` runs on a pseudo-terminal (the typed confirmation needs one) in a
child whose audit file the kernel stops growing (RLIMIT_FSIZE): tests/security/full_disk_child.
"""

from __future__ import annotations

import json
from pathlib import Path

from oncall.audit.log import AuditLog
from tests.harness.terminal import run_on_terminal

CONFIRM = ("Type yes to confirm", "yes")


def remediate(log: Path, mode: str) -> tuple[int, str]:
    run = run_on_terminal(
        [str(log), mode, "remediate", "set-note", "rollout paused", "--set",
         f"audit.path={log}"],
        [CONFIRM],
        module="tests.security.full_disk_child",
        timeout=60,
    )  # fmt: skip
    return run.code, run.output


def transitions(log: Path) -> list[str]:
    return [json.loads(line)["transition"] for line in log.read_bytes().splitlines()]


def test_a_started_record_that_cannot_be_written_refuses_the_action(tmp_path: Path) -> None:
    log = tmp_path / "audit.jsonl"
    code, output = remediate(log, "before-started")
    assert "NOTE WRITES: []" in output, output  # nothing ran
    assert "refused (audit): nothing was changed" in output
    assert "File too large" in output  # the reason the OS gave, shown
    assert code == 1
    assert transitions(log) == ["proposed", "approved"]  # no `started` for an action not run
    assert "Traceback" not in output


def test_an_outcome_that_cannot_be_written_is_loud_verified_and_exits_1(tmp_path: Path) -> None:
    log = tmp_path / "audit.jsonl"
    code, output = remediate(log, "after-started")
    assert "NOTE WRITES: [('main', 'rollout paused')]" in output, output  # the change ran
    assert code == 1
    assert "AUDIT INCOMPLETE: the succeeded record of action" in output
    assert "reading back the note of main" in output  # verification ran anyway
    assert "verified: the note reads 'rollout paused' — audit incomplete" in output
    assert "oncall: AUDIT INCOMPLETE: the verified record" in output
    assert transitions(log) == ["proposed", "approved", "started"]
    # What the log says afterwards: an action started without an outcome.
    report = AuditLog(log).verify()
    assert report.ok and len(report.incomplete) == 1
    assert "Traceback" not in output


def test_a_started_record_whose_head_cannot_be_written_leaves_no_false_incomplete(
    tmp_path: Path,
) -> None:
    """Issue 29, item 9: the `started` line reached the disk, its head file did not (disk
    full): the action was refused, yet the line stayed, and verify said INCOMPLETE for an
    action that never ran. The line is taken back with the refusal."""
    log = tmp_path / "audit.jsonl"
    code, output = remediate(log, "head-full")
    assert "NOTE WRITES: []" in output, output  # nothing ran
    assert "refused (audit): nothing was changed" in output
    assert code == 1
    assert transitions(log) == ["proposed", "approved"]
    report = AuditLog(log).verify()
    assert report.ok and report.incomplete == [], report
