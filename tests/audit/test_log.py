"""The audit log on disk: the chain, each way to tamper with it, crashes, concurrency, secrets."""

from __future__ import annotations

import itertools
import json
import re
import signal
import stat
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from oncall.audit.log import AuditLog
from oncall.audit.query import CSV_COLUMNS, AuditQuery, parse_since, select, to_csv
from oncall.audit.records import (
    FIELDS,
    GENESIS,
    AuditError,
    build_record,
    line_of,
    record_hash,
    redact,
)
from oncall.errors import UsageError

REPO = Path(__file__).resolve().parents[2]
POD = {"kind": "Pod", "namespace": "ai", "name": "vllm-0", "uid": "6f1c"}
ALERT = {"name": "LLMHighP99Latency", "labels": {"service": "chat"}, "value": 1.7}
CYCLE = ("proposed", "approved", "started", "succeeded", "verified")
N = 10


def fill(log: AuditLog, count: int = N) -> list[dict[str, Any]]:
    """count records, whole lifecycles of rebuild-pod (the last one may stop half-way)."""
    out = []
    for i in range(count):
        out.append(
            log.append(
                action_id=f"act-{i // len(CYCLE)}",
                transition=CYCLE[i % len(CYCLE)],
                action="rebuild-pod",
                target=POD,
                alert=ALERT,
                evidence=[{"step": "kv-cache", "value": 0.4 + i / 100}],
                outcome="replacement Ready" if CYCLE[i % len(CYCLE)] == "succeeded" else None,
            )
        )
    return out


def lines_of(path: Path) -> list[bytes]:
    return path.read_bytes().splitlines(keepends=True)


@pytest.fixture
def log(tmp_path: Path) -> AuditLog:
    return AuditLog(tmp_path / "state" / "audit.jsonl")


# -- the chain -----------------------------------------------------------------------------


def test_append_and_verify_round_trip(log: AuditLog) -> None:
    written = fill(log)
    report = log.verify()
    assert report.ok, report.problems
    assert report.count == N
    assert report.incomplete == []
    assert list(log.records()) == written
    assert [r["seq"] for r in written] == list(range(1, N + 1))
    assert written[0]["prev"] == GENESIS
    for before, after in itertools.pairwise(written):
        assert after["prev"] == before["hash"]
    assert all(r["hash"] == record_hash(r) for r in written)
    head = json.loads(log.head_path.read_text())
    assert head == {"seq": N, "hash": written[-1]["hash"], "log_id": written[0]["log"]["id"]}
    assert {r["log"]["id"] for r in written} == {head["log_id"]}


def test_a_record_has_every_field(log: AuditLog, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SSH_CLIENT", "10.1.2.3 53422 22")
    record = log.append(action_id="a", transition="proposed", action="rebuild-pod", target=POD)
    assert tuple(record) == FIELDS
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", record["ts"])
    assert re.fullmatch(r"000001-[0-9a-f]{8}", record["id"])
    assert record["actor"]["ssh_client"] == "10.1.2.3"
    assert record["actor"]["user"] and record["actor"]["host"]
    assert record["detail"] == {}
    assert record["alert"] is None and record["guard"] is None
    monkeypatch.delenv("SSH_CLIENT")
    assert (
        log.append(action_id="a", transition="declined", action="rebuild-pod", target=POD)["actor"][
            "ssh_client"
        ]
        is None
    )


@pytest.mark.parametrize(
    "bad",
    [
        {"transition": "exploded"},
        {"action": "rm-rf"},
        {"action_id": ""},
        {"seq": 9},
        {"hash": "0"},
        {"colour": "red"},
        {"target": "vllm-0"},
        {"duration_s": "long"},
    ],
)
def test_a_malformed_record_is_refused_and_nothing_written(
    log: AuditLog, bad: dict[str, Any]
) -> None:
    fields = {"action_id": "a", "transition": "proposed", "action": "rebuild-pod", "target": POD}
    with pytest.raises(AuditError, match="bad audit record"):
        log.append(**{**fields, **bad})
    assert not log.path.exists()


# -- tampering: each one makes verify fail and name the FIRST bad record ----------------------


def edit(line: bytes, dotted: str, value: Any) -> bytes:
    record = json.loads(line)
    node = record
    *parents, leaf = dotted.split(".")
    for part in parents:
        node = node[part]
    node[leaf] = value
    return line_of(record)


@pytest.mark.parametrize("position", [1, 5, N])
@pytest.mark.parametrize(
    ("dotted", "value"),
    [
        ("outcome", "nothing happened"),
        ("actor.user", "mallory"),
        ("ts", "2020-01-01T00:00:00.000Z"),
        ("transition", "declined"),
        ("target.name", "vllm-9"),
        ("alert.value", 0.1),
        ("evidence", []),
        ("action_id", "other"),
        ("prev", "e" * 64),
        ("hash", "f" * 64),
    ],
)
def test_editing_a_field_names_that_record(
    log: AuditLog, position: int, dotted: str, value: Any
) -> None:
    fill(log)
    lines = lines_of(log.path)
    lines[position - 1] = edit(lines[position - 1], dotted, value)
    log.path.write_bytes(b"".join(lines))
    report = log.verify()
    assert not report.ok
    assert report.problems == [
        f"record {position} (line {position}): hash does not match its content — edited"
    ]


@pytest.mark.parametrize("position", [1, 5, N])
def test_editing_bytes_in_place_names_that_record(log: AuditLog, position: int) -> None:
    fill(log)
    lines = lines_of(log.path)
    lines[position - 1] = lines[position - 1].replace(b'"vllm-0"', b'"vllm-1"')
    log.path.write_bytes(b"".join(lines))
    assert log.verify().problems[0].startswith(f"record {position} (line {position}): hash")


@pytest.mark.parametrize("position", [1, 5, N - 1])
def test_a_rewritten_record_with_a_recomputed_hash_breaks_the_next_link(
    log: AuditLog, position: int
) -> None:
    fill(log)
    lines = lines_of(log.path)
    record = json.loads(lines[position - 1])
    record["outcome"] = "forged"
    record["hash"] = record_hash(record)
    lines[position - 1] = line_of(record)
    log.path.write_bytes(b"".join(lines))
    problem = log.verify().problems[0]
    assert problem.startswith(
        f"record {position + 1} (line {position + 1}): prev does not match record {position}'s"
    )
    assert f"record {position} was rewritten" in problem


def test_rewriting_the_last_record_is_caught_by_the_head_file(log: AuditLog) -> None:
    fill(log)
    lines = lines_of(log.path)
    record = json.loads(lines[-1])
    record["outcome"] = "forged"
    record["hash"] = record_hash(record)
    lines[-1] = line_of(record)
    log.path.write_bytes(b"".join(lines))
    assert log.verify().problems == [
        f"record {N}'s hash does not match the head file — it was rewritten, or the head file was"
    ]


@pytest.mark.parametrize("position", [1, 2, 5, N - 1, N])
def test_deleting_a_record(log: AuditLog, position: int) -> None:
    fill(log)
    lines = lines_of(log.path)
    del lines[position - 1]
    log.path.write_bytes(b"".join(lines))
    report = log.verify()
    assert not report.ok
    if position == 1:
        expected = "record 2 (line 1): the first record does not start the chain"
    elif position == N:
        expected = (
            f"the log ends at record {N - 1} but the head file says {N} — "
            "records were truncated from the end"
        )
    else:
        expected = (
            f"record {position + 1} (line {position}): prev does not match record "
            f"{position - 1}'s hash — a record was deleted or reordered before it"
        )
    assert report.problems[0].startswith(expected), report.problems
    assert len(report.problems) == 1


@pytest.mark.parametrize("position", [1, 5, N - 1])
def test_swapping_two_records(log: AuditLog, position: int) -> None:
    fill(log)
    lines = lines_of(log.path)
    i = position - 1
    lines[i], lines[i + 1] = lines[i + 1], lines[i]
    log.path.write_bytes(b"".join(lines))
    report = log.verify()
    assert report.problems[0].startswith(f"record {position + 1} (line {position}): ")
    # Verification goes on past the first break: the swapped pair breaks up to three links.
    assert 1 < len(report.problems) <= 3


@pytest.mark.parametrize("cut", [1, 3, N])
def test_truncating_the_last_records(log: AuditLog, cut: int) -> None:
    fill(log)
    lines = lines_of(log.path)
    log.path.write_bytes(b"".join(lines[: N - cut]))
    report = log.verify()
    if cut == N:
        assert report.problems == [
            f"the log is empty but the head file says {N} — records were removed"
        ]
    else:
        assert report.problems == [
            f"the log ends at record {N - cut} but the head file says {N} — "
            "records were truncated from the end"
        ]


@pytest.mark.parametrize("position", [1, 5, N])
def test_truncating_mid_line(log: AuditLog, position: int) -> None:
    fill(log)
    lines = lines_of(log.path)
    kept = [*lines[: position - 1], lines[position - 1][: len(lines[position - 1]) // 2]]
    log.path.write_bytes(b"".join(kept))
    # The head file still names the record that was cut: both are reported.
    assert log.verify().problems == [
        f"line {position}: not JSON — truncated or edited",
        f"the log is empty but the head file says {N} — records were removed"
        if position == 1
        else f"the log ends at record {position - 1} but the head file says {N} — "
        "records were truncated from the end",
    ]


def test_a_duplicated_key_is_an_edit(log: AuditLog) -> None:
    """json.loads keeps the last of two equal keys, so the hash alone would not notice."""
    fill(log, 4)
    lines = lines_of(log.path)
    lines[2] = b'{"outcome":"forged",' + lines[2][1:]
    log.path.write_bytes(b"".join(lines))
    assert log.verify().problems == ["line 3: key 'outcome' appears twice — edited"]


def test_a_deleted_head_file_is_reported(log: AuditLog) -> None:
    fill(log)
    log.head_path.unlink()
    assert "head file" in log.verify().problems[0]
    assert "missing" in log.verify().problems[0]


def test_a_seq_jump_with_an_intact_link(tmp_path: Path) -> None:
    path = tmp_path / "audit.jsonl"
    fields = {"action_id": "a", "transition": "proposed", "action": "rebuild-pod", "target": POD}
    prev, out = GENESIS, b""
    for seq in (1, 2, 3, 4, 5, 7):
        record = build_record(fields, seq=seq, prev=prev)
        prev, out = record["hash"], out + line_of(record)
    path.write_bytes(out)
    assert AuditLog(path).verify().problems[0] == "record 7 (line 6): seq jumps from 5 to 7"


def test_an_empty_or_missing_log_verifies(tmp_path: Path) -> None:
    report = AuditLog(tmp_path / "none.jsonl").verify()
    assert report.ok and report.count == 0


# -- crashes -------------------------------------------------------------------------------


def test_a_started_action_without_outcome_is_incomplete(log: AuditLog) -> None:
    fill(log, 3)  # proposed, approved, started
    log.append(action_id="b", transition="started", action="set-degradation-level",
               target={"kind": "RedisKey", "name": "ai-gateway:degradation-level"})  # fmt: skip
    log.append(action_id="b", transition="failed", action="set-degradation-level",
               target={"kind": "RedisKey", "name": "ai-gateway:degradation-level"})  # fmt: skip
    report = log.verify()
    assert report.ok
    assert len(report.incomplete) == 1
    assert report.incomplete[0].startswith("action act-0: rebuild-pod vllm-0 started at ")
    assert report.incomplete[0].endswith("no outcome recorded (the process died?)")


def test_incomplete_actions_are_listed_even_after_a_break(log: AuditLog) -> None:
    fill(log, 3)
    lines = lines_of(log.path)
    lines[0] = edit(lines[0], "outcome", "x")
    log.path.write_bytes(b"".join(lines))
    report = log.verify()
    assert report.problems[0].startswith("record 1 (line 1)")
    assert len(report.incomplete) == 1


KILLED_CHILD = """
import sys
from oncall.audit.log import AuditLog
log = AuditLog(sys.argv[1])
target = {"kind": "Pod", "namespace": "ai", "name": "vllm-0"}
log.append(action_id="act-killed", transition="started", action="rebuild-pod", target=target)
print("started", flush=True)
sys.stdin.read()
log.append(action_id="act-killed", transition="succeeded", action="rebuild-pod", target=target)
"""


def test_a_process_killed_after_started_leaves_an_incomplete_action(log: AuditLog) -> None:
    fill(log, 2)
    child = subprocess.Popen(
        [sys.executable, "-c", KILLED_CHILD, str(log.path)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        cwd=REPO,
    )
    try:
        assert child.stdout is not None
        assert child.stdout.readline() == b"started\n"
        child.send_signal(signal.SIGKILL)
    finally:
        child.kill()
        child.wait(timeout=10)
    assert child.returncode == -signal.SIGKILL
    report = log.verify()
    assert report.ok, report.problems
    assert report.count == 3
    assert [line.split(" started at")[0] for line in report.incomplete] == [
        "action act-killed: rebuild-pod vllm-0"
    ]
    # The dead process's lock went with it: the next append goes through and chains on.
    log.append(action_id="act-killed", transition="failed", action="rebuild-pod", target=POD)
    after = log.verify()
    assert after.ok and after.count == 4 and after.incomplete == []


def test_a_crash_between_record_and_head_is_recovered(log: AuditLog) -> None:
    fill(log, 4)
    stale_head = log.head_path.read_bytes()
    fill(log, 1)
    log.head_path.write_bytes(stale_head)  # as if the process died before rewriting the head
    assert log.verify().ok
    record = log.append(action_id="z", transition="proposed", action="rebuild-pod", target=POD)
    assert record["seq"] == 6
    assert log.verify().ok


def test_an_append_after_a_torn_write_keeps_the_fragment_visible(log: AuditLog) -> None:
    fill(log, 3)
    log.path.write_bytes(log.path.read_bytes() + b'{"seq":4,"id":"0000')  # torn, no head update
    record = log.append(action_id="z", transition="proposed", action="rebuild-pod", target=POD)
    assert record["seq"] == 4
    lines = lines_of(log.path)
    assert len(lines) == 5 and json.loads(lines[-1]) == record
    assert log.verify().problems == ["line 4: not JSON — truncated or edited"]


APPENDER = """
import sys
from oncall.audit.log import AuditLog
log = AuditLog(sys.argv[1])
name, count = sys.argv[2], int(sys.argv[3])
sys.stdin.readline()  # start together
for i in range(count):
    log.append(action_id=f"{name}-{i}", transition="proposed", action="rebuild-pod",
               target={"kind": "Pod", "namespace": "ai", "name": name})
"""


def test_concurrent_appends_from_two_processes_keep_one_chain(log: AuditLog) -> None:
    children = [
        subprocess.Popen(
            [sys.executable, "-c", APPENDER, str(log.path), name, "50"],
            stdin=subprocess.PIPE,
            cwd=REPO,
        )
        for name in ("alpha", "beta")
    ]
    for child in children:
        assert child.stdin is not None
        child.stdin.write(b"go\n")
        child.stdin.close()
    for child in children:
        assert child.wait(timeout=60) == 0
    report = log.verify()
    assert report.ok, report.problems
    assert report.count == 100
    records = list(log.records())
    assert [r["seq"] for r in records] == list(range(1, 101))
    for name in ("alpha", "beta"):
        mine = [r["action_id"] for r in records if r["target"]["name"] == name]
        assert mine == [f"{name}-{i}" for i in range(50)]


# -- secrets, mirrors, permissions -----------------------------------------------------------

SECRETS = ("s3cr3t-Bearer-XYZ", "hunter2-pass")


def secret_fields() -> dict[str, Any]:
    return {
        "action_id": "act-s",
        "transition": "proposed",
        "action": "set-degradation-level",
        "target": {"kind": "RedisKey", "name": "ai-gateway:degradation-level"},
        "request": {
            "url": "redis://:hunter2-pass@127.0.0.1:6379/0",
            "headers": {"X-Api-Key": "unlisted-key-1", "Accept": "application/json"},
            "note": "auth with s3cr3t-Bearer-XYZ then SET",
        },
        "evidence": [{"tokens_per_s": 3.2, "password": "unlisted-pw-2"}],
        "detail": {"hunter2-pass": "a key that is a secret", "token": "unlisted-token-3"},
        "outcome": "Authorization: Bearer unlisted-token-4",
    }


UNLISTED = ("unlisted-key-1", "unlisted-pw-2", "unlisted-token-3", "unlisted-token-4")


def test_secrets_never_reach_the_file_or_a_mirror(tmp_path: Path) -> None:
    seen: list[dict[str, Any]] = []
    log = AuditLog(tmp_path / "audit.jsonl", secrets=SECRETS, mirrors=[seen.append])
    record = log.append(**secret_fields())
    for blob in (
        log.path.read_bytes(),
        log.head_path.read_bytes(),
        json.dumps(seen).encode(),
        json.dumps(record).encode(),
    ):
        for secret in (*SECRETS, *UNLISTED):
            assert secret.encode() not in blob
    assert record["evidence"][0]["tokens_per_s"] == 3.2  # evidence is not a secret
    assert record["request"]["headers"]["Accept"] == "application/json"
    assert log.verify().ok


def test_redact_masks_keys_values_and_nesting() -> None:
    value = {"a": ["x hunter2-pass y", ("hunter2-pass",)], "hunter2-pass": 1, "api_key": None}
    assert redact(value, ["hunter2-pass", ""]) == {
        "a": ["x *** y", ["***"]],
        "***": 1,
        "api_key": None,
    }
    assert redact({"v": float("nan"), "w": float("inf")}, []) == {"v": "NaN", "w": "+Inf"}


def test_a_failing_mirror_does_not_lose_the_record(tmp_path: Path) -> None:
    calls: list[int] = []

    def broken(record: dict[str, Any]) -> None:
        raise ConnectionError("redis down, password hunter2-pass")

    log = AuditLog(
        tmp_path / "audit.jsonl",
        secrets=SECRETS,
        mirrors=[broken, lambda r: calls.append(r["seq"])],
    )
    record = log.append(action_id="a", transition="proposed", action="rebuild-pod", target=POD)
    assert list(log.records()) == [record]
    assert calls == [1]  # the next mirror still ran
    assert len(log.mirror_errors) == 1
    assert "broken: ConnectionError: redis down" in log.mirror_errors[0]
    assert "hunter2-pass" not in log.mirror_errors[0]
    assert log.verify().ok


def test_a_mirror_gets_a_copy(tmp_path: Path) -> None:
    def vandal(record: dict[str, Any]) -> None:
        record["target"]["name"] = "changed"

    log = AuditLog(tmp_path / "audit.jsonl", mirrors=[vandal])
    record = log.append(action_id="a", transition="proposed", action="rebuild-pod", target=POD)
    assert record["target"]["name"] == "vllm-0"


def test_files_are_private(tmp_path: Path) -> None:
    log = AuditLog(tmp_path / "a" / "b" / "audit.jsonl")
    fill(log, 1)
    for path in (log.path, log.head_path, log.lock_path):
        assert stat.S_IMODE(path.stat().st_mode) == 0o600, path
    for folder in (tmp_path / "a", tmp_path / "a" / "b"):
        assert stat.S_IMODE(folder.stat().st_mode) == 0o700, folder


def test_line_separators_inside_strings_stay_in_their_line(log: AuditLog) -> None:
    log.append(action_id="a", transition="failed", action="rebuild-pod", target=POD,
               outcome="first\u2028second\x85third\nfourth")  # fmt: skip
    fill(log, 2)
    assert len(lines_of(log.path)) == 3
    assert log.verify().ok


def test_an_unwritable_log_is_an_audit_error(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("")
    log = AuditLog(tmp_path / "file" / "audit.jsonl")
    with pytest.raises(AuditError, match="cannot write the audit log"):
        fill(log, 1)


# -- query ---------------------------------------------------------------------------------


def dated(ts: datetime, **fields: Any) -> dict[str, Any]:
    base = {"ts": ts.isoformat(timespec="milliseconds").replace("+00:00", "Z"),
            "actor": {"user": "alice", "host": "h", "ssh_client": None},
            "action": "rebuild-pod", "target": POD}  # fmt: skip
    return {**base, **fields}


def test_filters() -> None:
    now = datetime(2025, 6, 1, 12, 0, tzinfo=UTC)
    old = dated(now - timedelta(hours=3))
    new = dated(now - timedelta(minutes=10), actor={"user": "bob"}, action="set-max-num-seqs",
                target={"kind": "Deployment", "name": "vllm-chat"})  # fmt: skip

    def matches(flt: AuditQuery) -> list[dict[str, Any]]:
        return [r for r in (old, new) if flt.matches(r)]

    assert matches(AuditQuery()) == [old, new]
    assert matches(AuditQuery(since=parse_since("1h", now))) == [new]
    assert matches(AuditQuery(since=parse_since("2025-06-01T08:00:00Z", now))) == [old, new]
    assert matches(AuditQuery(since=parse_since("2025-06-01T11:00", now))) == [new]
    assert matches(AuditQuery(actor="ALI")) == [old]
    assert matches(AuditQuery(action="set-max-num-seqs")) == [new]
    assert matches(AuditQuery(target="chat")) == [new]
    assert matches(AuditQuery(actor="bob", target="vllm-0")) == []
    with pytest.raises(UsageError, match="--since"):
        parse_since("yesterday")


def test_select_keeps_unreadable_lines(log: AuditLog) -> None:
    fill(log, 2)
    log.path.write_bytes(log.path.read_bytes() + b"garbage\n")
    kept = list(select(log.lines(), AuditQuery(actor="nobody-at-all")))
    assert [(line.number, line.problem) for line in kept] == [(3, "not JSON — truncated or edited")]


def test_csv_columns(log: AuditLog) -> None:
    import csv
    import io

    records = fill(log, 3)
    rows = list(csv.DictReader(io.StringIO(to_csv(records))))
    assert tuple(rows[0]) == CSV_COLUMNS
    assert [row["seq"] for row in rows] == ["1", "2", "3"]
    assert rows[0]["target"] == "Pod ai/vllm-0"
    assert rows[0]["alert"] == "LLMHighP99Latency"
    assert rows[2]["hash"] == records[2]["hash"]


def test_a_break_names_its_line_and_record_as_fields(log: AuditLog) -> None:
    fill(log)
    lines = lines_of(log.path)
    lines[4] = lines[4].replace(b'"vllm-0"', b'"vllm-1"')
    log.path.write_bytes(b"".join(lines))
    (edited,) = log.verify().breaks
    assert (edited.line, edited.seq, edited.where) == (5, 5, "record 5")
    assert edited.message == "hash does not match its content — edited"
    log.path.write_bytes(b"".join(lines[:3]))  # cut off the end: the head file says more
    (cut,) = log.verify().breaks
    assert (cut.line, cut.seq, cut.where) == (None, None, None)
    assert "records were truncated from the end" in cut.message
    log.path.write_bytes(b"".join(lines[:3]) + b"{not json\n")
    bad, _cut = log.verify().breaks
    assert (bad.line, bad.seq, bad.where) == (4, None, "line 4")
