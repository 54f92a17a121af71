"""Threat: one old scar in the audit log (a torn line from a crash) hides every later edit.

Issue 12, item 10: `audit verify` stopped at the first break forever, so after one torn line
a later edit went unreported, and there was no way to record that a scar was reviewed. Now
verification goes on past a break and lists every one, each with its scar id; a reviewer
signs one off (`oncall audit acknowledge SCAR --reason …`, typed on a terminal, audited as an
`acknowledged` record and copied to the team Stream), after which verify lists it as
acknowledged and still reports anything new.
"""

from __future__ import annotations

import json
import re
import uuid
from pathlib import Path

from oncall.audit.log import AuditLog
from tests.cli_runner import Result, run_oncall
from tests.harness.servers import RunningServer
from tests.harness.terminal import TerminalRun, run_on_terminal

POD = {"kind": "Pod", "namespace": "ai", "name": "vllm-0", "uid": "6f1c"}
REASON = "torn by the bastion crash of 30 Nov; reviewed with the on-call lead"


def settings(log: Path, stream: str | None, url: str | None) -> list[str]:
    out = ["--set", f"audit.path={log}", "--set", f"audit.redis_stream={stream or ''}"]
    return out + (["--set", f"redis.url={url}"] if url else [])


def verify(log: Path, stream: str | None = None, url: str | None = None) -> Result:
    return run_oncall("audit", "verify", *settings(log, stream, url), cwd=log.parent)


def acknowledge(
    log: Path, scar: str, stream: str | None = None, url: str | None = None, typed: str = ""
) -> TerminalRun:
    return run_on_terminal(
        ["audit", "acknowledge", scar, "--reason", REASON, *settings(log, stream, url)],
        [("to sign it off as reviewed", typed or scar)],
        timeout=60,
    )


def scars(output: str) -> list[str]:
    return re.findall(r"\(scar ([0-9a-f]{8})\)$", output, flags=re.MULTILINE)


def torn_then_edited(log: AuditLog) -> None:
    """Three records, a write torn by a crash, four more, then record 6 edited by hand."""
    for transition in ("proposed", "approved", "started"):
        log.append(action_id="a", transition=transition, action="rebuild-pod", target=POD)
    line = log.path.read_bytes().splitlines(keepends=True)[-1]
    with log.path.open("ab") as handle:
        handle.write(line[: len(line) // 2])  # the crash: half a record, no newline
    log.append(action_id="a", transition="failed", action="rebuild-pod", target=POD)
    for transition in ("proposed", "approved", "declined"):
        log.append(action_id="b", transition=transition, action="rebuild-pod", target=POD)
    lines = log.path.read_bytes().splitlines(keepends=True)
    record = json.loads(lines[6])  # line 7: record 6
    record["transition"] = "refused"
    lines[6] = json.dumps(record).encode() + b"\n"
    log.path.write_bytes(b"".join(lines))


def test_every_break_is_listed_past_a_torn_line(tmp_path: Path) -> None:
    log = AuditLog(tmp_path / "audit.jsonl")
    torn_then_edited(log)
    result = verify(log.path)
    assert result.code == 1
    out = result.stdout.splitlines()
    assert out[0].startswith("line 4: not JSON — truncated or edited (scar ")
    assert out[1].startswith("record 6 (line 7): hash does not match its content — edited (scar ")
    assert len(scars(result.stdout)) == 2


def test_a_reviewer_acknowledges_a_scar_and_new_problems_still_show(tmp_path: Path) -> None:
    log = AuditLog(tmp_path / "audit.jsonl")
    torn_then_edited(log)
    torn, edited = scars(verify(log.path).stdout)

    run = acknowledge(log.path, torn)
    assert run.code == 0, run.output
    assert f"scar {torn}: line 4: not JSON" in run.output
    assert f"acknowledged: scar {torn} (record 8, " in run.output
    ack = json.loads(log.path.read_bytes().splitlines()[-1])
    assert (ack["transition"], ack["action"]) == ("acknowledged", "audit-review")
    assert ack["detail"]["scar"] == torn and ack["detail"]["reason"] == REASON

    result = verify(log.path)
    assert result.code == 1  # the edit is still a break
    assert f"(scar {edited})" in result.stdout
    assert f"(scar {torn})" not in result.stdout
    (line,) = [x for x in result.stdout.splitlines() if x.startswith("ACKNOWLEDGED: ")]
    assert line.startswith("ACKNOWLEDGED: line 4: not JSON — truncated or edited — acknowledged by")
    assert line.endswith(f"(record 8): {REASON}")

    # Both signed off: verify is clean again. Then a new edit is a new break.
    assert acknowledge(log.path, edited).code == 0
    result = verify(log.path)
    assert result.code == 3, result.stdout  # clean, but no Stream here: never "OK" (docs/audit.md)
    assert result.stdout.startswith("LOCAL CHAIN INTACT: 9 records; not anchored")
    assert result.stdout.count("ACKNOWLEDGED: ") == 2
    lines = log.path.read_bytes().splitlines(keepends=True)
    lines[1] = lines[1].replace(b'"approved"', b'"declined"')
    log.path.write_bytes(b"".join(lines))
    result = verify(log.path)
    assert result.code == 1
    assert "record 2 (line 2): hash does not match its content — edited" in result.stdout


def test_an_acknowledged_line_edited_again_is_a_new_scar(tmp_path: Path) -> None:
    log = AuditLog(tmp_path / "audit.jsonl")
    torn_then_edited(log)
    torn, _ = scars(verify(log.path).stdout)
    assert acknowledge(log.path, torn).code == 0
    lines = log.path.read_bytes().splitlines(keepends=True)
    lines[3] = b"{" + lines[3][2:]  # the torn fragment, changed
    log.path.write_bytes(b"".join(lines))
    result = verify(log.path)
    assert result.stdout.startswith("line 4: not JSON")
    assert torn not in scars(result.stdout)


def test_acknowledging_needs_the_scar_typed_on_a_terminal(tmp_path: Path) -> None:
    log = AuditLog(tmp_path / "audit.jsonl")
    torn_then_edited(log)
    torn, _ = scars(verify(log.path).stdout)
    size = log.path.stat().st_size
    piped = run_oncall("audit", "acknowledge", torn, "--reason", REASON, *settings(log.path, None,
                       None), cwd=tmp_path)  # fmt: skip
    assert piped.code == 2 and "needs a typed confirmation on a terminal" in piped.stderr
    wrong = acknowledge(log.path, torn, typed="yes")
    assert wrong.code == 1 and "cancelled: nothing was recorded" in wrong.output
    unknown = run_oncall("audit", "acknowledge", "0badc0de", "--reason", REASON,
                         *settings(log.path, None, None), cwd=tmp_path)  # fmt: skip
    assert unknown.code == 2 and "no scar '0badc0de'" in unknown.stderr
    assert log.path.stat().st_size == size  # nothing was written


def test_an_acknowledgement_is_anchored_in_the_team_stream(
    tmp_path: Path, redis_srv: RunningServer
) -> None:
    """A torn line is a scar locally; its sign-off goes to the Stream like every record, so
    the cross-check finds it there and a forged local sign-off would not be."""
    stream = f"oncall:audit:test:{uuid.uuid4().hex[:8]}"
    log = AuditLog(tmp_path / "audit.jsonl")
    log.append(action_id="a", transition="proposed", action="rebuild-pod", target=POD)
    with log.path.open("ab") as handle:
        handle.write(b'{"seq":2,"id":')  # torn
    result = verify(log.path, stream, redis_srv.url)
    # Record 1 was written without a Stream copy (no mirror here): that is a scar too.
    assert result.code == 1
    assert "record 1 of log" in result.stdout and "not in the team Stream" in result.stdout
    torn, unanchored = scars(result.stdout)
    assert acknowledge(log.path, torn, stream, redis_srv.url).code == 0
    assert acknowledge(log.path, unanchored, stream, redis_srv.url).code == 0
    result = verify(log.path, stream, redis_srv.url)
    assert result.code == 0, result.stdout
    assert result.stdout.count("ACKNOWLEDGED: ") == 2
    assert f"ANCHOR: the team Stream {stream}: 2 copies of log" in result.stdout
