"""`oncall audit list|show|verify|export` as a reviewer runs them (real subprocesses)."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path
from typing import Any

import pytest

from oncall.audit.log import AuditLog
from oncall.audit.query import CSV_COLUMNS
from oncall.audit.records import GENESIS, build_record, line_of
from oncall.cli.main import build_parser
from oncall.model.action_params import ACTION_PARAMS
from tests.cli_runner import Result, run_oncall

SECRETS = ("s3cr3t-Bearer-XYZ", "hunter2-pass")
POD = {"kind": "Pod", "namespace": "ai", "name": "vllm-0", "uid": "6f1c"}
DEPLOY = {"kind": "Deployment", "namespace": "ai", "name": "vllm-chat"}
ALICE = {"user": "alice", "host": "bastion-1", "ssh_client": "10.0.0.7"}
BOB = {"user": "bob", "host": "bastion-2", "ssh_client": None}


# Without the team Stream, verify never says OK (docs/audit.md): exit 3.
def intact(count: str) -> str:
    return f"LOCAL CHAIN INTACT: {count}; not anchored, so not proven\n" + LOCAL


LOCAL = "LOCAL ONLY: audit.redis_stream is off: no team anchor; only the local chain was checked\n"


def audit(path: Path, *args: str, cwd: Path | None = None) -> Result:
    """The local log only: the cross-check with the team Stream is tests/security's."""
    return run_oncall(
        "audit", *args, "--set", f"audit.path={path}", "--set", "audit.redis_stream=",
        cwd=cwd or path.parent,
    )  # fmt: skip


@pytest.fixture
def log(tmp_path: Path) -> AuditLog:
    """Two actions by two people: alice rebuilt a pod, bob was refused a max-num-seqs change."""
    log = AuditLog(tmp_path / "audit.jsonl", secrets=SECRETS)
    alert = {"name": "LLMHighP99Latency", "labels": {"service": "chat"}, "value": 1.7}
    for transition, extra in (
        ("proposed", {"evidence": [{"step": "kv-cache", "value": 0.45}]}),
        ("approved", {}),
        ("started", {"request": {"headers": {"Authorization": "Bearer s3cr3t-Bearer-XYZ"}}}),
        ("succeeded", {"outcome": "replacement vllm-1 Ready (hunter2-pass)", "duration_s": 12.5}),
    ):
        log.append(
            action_id="act-a", transition=transition, action="rebuild-pod", target=POD,
            actor=ALICE, alert=alert, **extra,
        )  # fmt: skip
    log.append(
        action_id="act-b", transition="refused", action="set-max-num-seqs", target=DEPLOY,
        actor=BOB, guard="rate-limit", outcome="3 actions in 10m",
    )  # fmt: skip
    return log


def assert_no_secret(*texts: str) -> None:
    for text in texts:
        for secret in SECRETS:
            assert secret not in text


def test_list_table(log: AuditLog) -> None:
    result = audit(log.path, "list")
    assert result.code == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0].split() == [
        "SEQ", "TIME", "(UTC)", "USER", "TRANSITION", "ACTION", "TARGET", "ALERT", "OUTCOME"
    ]  # fmt: skip
    assert len(lines) == 6
    assert "alice" in lines[1] and "Pod ai/vllm-0" in lines[1] and "LLMHighP99Latency" in lines[1]
    assert "replacement vllm-1 Ready (***)" in lines[4]
    assert "bob" in lines[5] and "refused" in lines[5] and "3 actions in 10m" in lines[5]


def _with_contexts(log: AuditLog) -> None:
    """Settings with contexts eu and us next to the log; one eu record after the fixture's."""
    (log.path.parent / "oncall.yaml").write_text("contexts:\n  eu: {}\n  us: {}\n")
    log.append(
        action_id="act-c", transition="refused", action="rebuild-pod", target=POD,
        actor=BOB, context="eu", guard="context", outcome="plan of another context",
    )  # fmt: skip


def test_list_table_has_a_context_column_when_a_record_has_one(log: AuditLog) -> None:
    _with_contexts(log)
    result = audit(log.path, "list")
    assert result.code == 0, result.stderr
    lines = result.stdout.splitlines()
    header = lines[0]
    assert header.split() == [
        "SEQ", "TIME", "(UTC)", "USER", "TRANSITION", "ACTION", "CONTEXT", "TARGET", "ALERT",
        "OUTCOME",
    ]  # fmt: skip
    at, target = header.index("CONTEXT"), header.index("TARGET")
    assert lines[6][at:target].strip() == "eu"  # in its column, the records before: empty
    assert all(line[at:target].strip() == "" for line in lines[1:6])
    assert lines[6][target:].startswith("Pod ai/vllm-0")


def test_list_context_filters_the_table_and_json_is_the_records(log: AuditLog) -> None:
    _with_contexts(log)
    table = audit(log.path, "list", "--context", "eu")
    assert table.code == 0, table.stderr
    assert len(table.stdout.splitlines()) == 2 and "CONTEXT" in table.stdout
    assert table.stdout.splitlines()[1].split()[6] == "eu"
    listed = audit(log.path, "list", "--context", "eu", "-o", "json")
    assert listed.code == 0, listed.stderr
    records = [json.loads(line) for line in log.path.read_text().splitlines()]
    assert json.loads(listed.stdout) == [records[5]]  # the record as written, context and all
    assert audit(log.path, "list", "--context", "us", "-o", "json").stdout.strip() == "[]"


def test_export_csv_has_the_context_column(log: AuditLog) -> None:
    """As the table's CONTEXT: the context the action ran in, empty where a record has none."""
    _with_contexts(log)
    result = audit(log.path, "export", "-o", "csv")
    assert result.code == 0, result.stderr
    rows = list(csv.DictReader(io.StringIO(result.stdout)))
    assert [row["context"] for row in rows] == ["", "", "", "", "", "eu"]
    header = next(csv.reader(io.StringIO(result.stdout)))
    assert header.index("context") == header.index("target") - 1  # before what it scopes
    only = audit(log.path, "export", "-o", "csv", "--context", "eu")  # list's filter
    assert [row["context"] for row in csv.DictReader(io.StringIO(only.stdout))] == ["eu"]


@pytest.mark.parametrize(
    ("args", "seqs"),
    [
        ([], [1, 2, 3, 4, 5]),
        (["--actor", "bo"], [5]),
        (["--action", "rebuild-pod"], [1, 2, 3, 4]),
        (["--target", "CHAT"], [5]),
        (["--since", "1h"], [1, 2, 3, 4, 5]),
        (["--since", "2999-01-01T00:00:00Z"], []),
        (["--actor", "alice", "--action", "set-max-num-seqs"], []),
    ],
)
def test_list_filters_as_json(log: AuditLog, args: list[str], seqs: list[int]) -> None:
    result = audit(log.path, "list", "-o", "json", *args)
    assert result.code == 0, result.stderr
    assert [r["seq"] for r in json.loads(result.stdout)] == seqs


def test_list_rejects_a_bad_since(log: AuditLog) -> None:
    result = audit(log.path, "list", "--since", "last tuesday")
    assert result.code == 2
    assert "--since" in result.stderr and result.stdout == ""


def test_list_reports_unreadable_lines(log: AuditLog) -> None:
    log.path.write_bytes(log.path.read_bytes() + b"{oops\n")
    result = audit(log.path, "list", "-o", "json")
    assert result.code == 0
    assert json.loads(result.stdout)[-1] == {"line": 6, "problem": "not JSON — truncated or edited"}
    assert "line 6: not JSON" in result.stderr
    table = audit(log.path, "list")
    assert table.stdout.splitlines()[-1].endswith("line 6: not JSON — truncated or edited")


def test_show_by_seq_and_by_id(log: AuditLog) -> None:
    records = list(log.records())
    by_seq = audit(log.path, "show", "3")
    assert by_seq.code == 0, by_seq.stderr
    assert json.loads(by_seq.stdout) == records[2]
    assert by_seq.stdout.startswith('{\n  "seq": 3,')
    by_id = audit(log.path, "show", records[4]["id"])
    assert json.loads(by_id.stdout) == records[4]


def test_show_unknown_record_exits_2(log: AuditLog) -> None:
    result = audit(log.path, "show", "999")
    assert result.code == 2
    assert result.stdout == ""
    assert "no audit record with id or seq '999'" in result.stderr


def test_verify_ok(log: AuditLog) -> None:
    result = audit(log.path, "verify")
    assert (result.code, result.stdout) == (3, intact("5 records"))


def test_verify_names_the_first_break(log: AuditLog) -> None:
    lines = log.path.read_bytes().splitlines(keepends=True)
    record = json.loads(lines[1])
    record["actor"]["user"] = "mallory"
    lines[1] = line_of(record)
    log.path.write_bytes(b"".join(lines))
    result = audit(log.path, "verify")
    assert result.code == 1
    first, anchor = result.stdout.splitlines()
    assert first.startswith("record 2 (line 2): hash does not match its content — edited (scar ")
    assert anchor + "\n" == LOCAL
    assert "chain is broken" in result.stderr


def test_verify_truncated_end(log: AuditLog) -> None:
    lines = log.path.read_bytes().splitlines(keepends=True)
    log.path.write_bytes(b"".join(lines[:3]))
    result = audit(log.path, "verify")
    assert result.code == 1
    assert result.stdout.splitlines()[0].startswith(
        "the log ends at record 3 but the head file says 5 — records were truncated from the end"
        " (scar "
    )


def test_verify_incomplete_action_exits_1(log: AuditLog) -> None:
    redis_key = {"kind": "RedisKey", "name": "ai-gateway:degradation-level"}
    log.append(
        action_id="act-c", transition="started", action="set-degradation-level",
        target=redis_key, actor=BOB,
    )  # fmt: skip
    result = audit(log.path, "verify")
    assert result.code == 1
    out = result.stdout.splitlines()
    assert out[0] == "LOCAL CHAIN INTACT: 6 records; not anchored, so not proven"
    assert out[1].startswith("INCOMPLETE: action act-c: set-degradation-level")
    assert "by bob@bastion-2" in out[1] and "(the process died?)" in out[1]


def test_verify_without_a_log(tmp_path: Path) -> None:
    result = audit(tmp_path / "nothing.jsonl", "verify")
    assert (result.code, result.stdout) == (3, intact("0 records"))
    assert "no audit log" in result.stderr


def test_export_jsonl_is_verbatim(log: AuditLog) -> None:
    result = audit(log.path, "export", "-o", "jsonl")
    assert result.code == 0, result.stderr
    assert result.stdout.encode() == log.path.read_bytes()


def test_a_record_with_control_characters_is_shown_safe_and_exported_verbatim(
    log: AuditLog,
) -> None:
    """A record may hold a backend's text with escape sequences (C0 ones are JSON escapes in
    the log; C1 ones are stored as they came). `list` and `show` must not hand them to the
    reviewer's terminal; `export` is the log's bytes, so that each line still verifies."""
    hostile = "engine said \x9b31m \x85 \x1b[2J\x1b]0;pwned\x07"
    log.append(
        action_id="act-c", transition="failed", action="rebuild-pod", target=POD, actor=ALICE,
        outcome=hostile,
    )  # fmt: skip
    assert "\x9b".encode() in log.path.read_bytes()
    controls = ("\x1b", "\x07", "\x9b", "\x85")
    table = audit(log.path, "list")
    assert table.code == 0, table.stderr
    # (the table folds whitespace, and Python counts NEL, U+0085, as whitespace)
    assert "engine said ?31m ?[2J?]0;pwned?" in table.stdout
    listed = audit(log.path, "list", "-o", "json")
    record = next(r for r in json.loads(listed.stdout) if r.get("action_id") == "act-c")
    assert record["outcome"] == hostile  # the same JSON, its controls as escapes
    shown = audit(log.path, "show", record["id"])
    assert json.loads(shown.stdout)["outcome"] == hostile
    for text in (table.stdout, listed.stdout, shown.stdout):
        assert not [c for c in controls if c in text], repr(text)
    exported = audit(log.path, "export", "-o", "jsonl")
    assert exported.code == 0, exported.stderr
    assert exported.stdout.encode() == log.path.read_bytes()
    assert audit(log.path, "verify").code == 3  # intact, not anchored (no Stream here)


def test_export_jsonl_filtered(log: AuditLog) -> None:
    result = audit(log.path, "export", "--actor", "bob")
    assert [json.loads(line)["seq"] for line in result.stdout.splitlines()] == [5]


def test_export_csv_parses(log: AuditLog) -> None:
    result = audit(log.path, "export", "-o", "csv")
    assert result.code == 0, result.stderr
    rows = list(csv.DictReader(io.StringIO(result.stdout)))
    assert tuple(rows[0]) == CSV_COLUMNS
    assert [row["transition"] for row in rows] == [
        "proposed", "approved", "started", "succeeded", "refused"
    ]  # fmt: skip
    records = list(log.records())
    first, last = rows[0], rows[-1]
    assert (first["actor_user"], first["actor_host"], first["ssh_client"]) == (
        "alice", "bastion-1", "10.0.0.7"
    )  # fmt: skip
    assert first["target"] == "Pod ai/vllm-0" and first["alert"] == "LLMHighP99Latency"
    assert rows[3]["duration_s"] == "12.5"
    assert (last["guard"], last["outcome"], last["ssh_client"]) == (
        "rate-limit", "3 actions in 10m", ""
    )  # fmt: skip
    assert [row["hash"] for row in rows] == [r["hash"] for r in records]


def test_secrets_never_appear_in_any_output(log: AuditLog) -> None:
    raw = log.path.read_bytes() + log.head_path.read_bytes()
    for secret in SECRETS:
        assert secret.encode() not in raw
    outputs = [
        audit(log.path, *args)
        for args in (
            ["list"], ["list", "-o", "json"], ["show", "3"], ["show", "4"], ["verify"],
            ["export", "-o", "jsonl"], ["export", "-o", "csv"],
        )
    ]  # fmt: skip
    for result in outputs:
        assert result.code in (0, 3), result.stderr  # verify: 3, no Stream here
        assert_no_secret(result.stdout, result.stderr)


def test_a_settings_secret_in_a_hand_written_line_is_masked(tmp_path: Path) -> None:
    """Defence in depth: a line that holds the Redis password (never written by the log)."""
    path = tmp_path / "audit.jsonl"
    fields: dict[str, Any] = {"action_id": "x", "transition": "proposed", "action": "rebuild-pod",
                              "target": POD, "outcome": "used pw0rd-from-settings"}  # fmt: skip
    record = build_record(fields, seq=1, prev=GENESIS)
    path.write_bytes(line_of(record))
    args = ("--set", "redis.password=pw0rd-from-settings")
    for command in (["list"], ["list", "-o", "json"], ["show", "1"], ["export"],
                    ["export", "-o", "csv"]):  # fmt: skip
        result = audit(path, *command, *args)
        assert result.code == 0, result.stderr
        assert "pw0rd-from-settings" not in result.stdout + result.stderr
    assert "masked in this export" in audit(path, "export", *args).stderr


def test_audit_without_a_subcommand_is_usage(tmp_path: Path) -> None:
    result = run_oncall("audit", cwd=tmp_path)
    assert result.code == 2
    assert "usage: oncall audit" in result.stderr


def test_the_cli_knows_every_action() -> None:
    for name in ACTION_PARAMS:
        assert build_parser().parse_args(["audit", "list", "--action", name]).action == name


def test_the_path_setting_expands_home(tmp_path: Path) -> None:
    home = tmp_path / "home"
    AuditLog(home / "audit.jsonl").append(
        action_id="a", transition="proposed", action="rebuild-pod", target=POD
    )
    result = run_oncall(
        "audit",
        "verify",
        "--set",
        "audit.path=~/audit.jsonl",
        "--set",
        "audit.redis_stream=",
        env={"HOME": str(home)},
        cwd=tmp_path,
    )
    assert (result.code, result.stdout) == (3, intact("1 record"))
