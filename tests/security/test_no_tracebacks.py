"""Threat: tracebacks instead of errors (issue 12, item 11). Each case the issue found is fixed
at its cause — hostile YAML, malformed URLs, odd arguments, a reader that goes away — and what
is left is caught by a last-resort handler: one line naming the error and where to report it,
exit 70, never a trace."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from oncall.errors import EXIT_BROKEN_PIPE, EXIT_INTERNAL, EXIT_USAGE
from tests.security.hostile_cli import run_inprocess

FILES = {
    "deep nesting": "a: " + "[" * 3000 + "]" * 3000 + "\n",
    "huge integer": "guards:\n  rate_limit_actions: " + "9" * 5000 + "\n",
    "huge integer in range": "guards:\n  rate_limit_actions: " + "9" * 400 + "\n",
    "bad tag": "context:\n  name: !!python/name:os.system\n",
    "bad int tag": "context:\n  name: !!int x\n",
    "tab indentation": "context:\n\tname: x\n",
    "binary junk": "\x00\x01\x02\xff",
}


def _no_trace(text: str) -> None:
    assert "Traceback" not in text and "internal error" not in text, text


@pytest.mark.parametrize("case", list(FILES))
@pytest.mark.parametrize("command", [["config", "show"], ["alerts"], ["check", "X"]])
def test_hostile_settings_files_are_located_errors(
    tmp_path: Path, case: str, command: list[str]
) -> None:
    path = tmp_path / "oncall.yaml"
    path.write_bytes(FILES[case].encode("utf-8", "surrogateescape"))
    ran = run_inprocess("--config", str(path), *command)
    assert ran.code == EXIT_USAGE, ran.output
    assert f"{path}:" in ran.stderr and ran.stderr.count(f"{path}:") >= 1
    _no_trace(ran.output)


@pytest.mark.parametrize(
    "url", ["http://127.0.0.1:99999", "http://[::1", "http://[::1]:x/", "ftp://127.0.0.1", "//h"]
)
@pytest.mark.parametrize("key", ["prometheus.url", "vllm.urls", "redis.url"])
@pytest.mark.parametrize(
    "command", [["config", "show"], ["alerts"], ["check", "LLMHighP99Latency"]]
)
def test_malformed_urls_are_settings_errors(url: str, key: str, command: list[str]) -> None:
    ran = run_inprocess("--set", f"{key}={url}", *command)
    assert ran.code == EXIT_USAGE, ran.output
    assert f"flag --set {key}" in ran.stderr
    _no_trace(ran.output)


@pytest.mark.parametrize(
    "argv",
    [
        ["check", ""],
        ["check", "../../../etc/passwd"],
        ["check", "a\x00b"],
        ["check", "/"],
        ["check", "x" * 5000],
        ["audit", "show", ""],
        ["audit", "show", "-1"],
        ["audit", "show", "9" * 400],
        ["audit", "show", "\x00"],
        ["audit", "list", "--since", "99999999999d"],
        ["audit", "list", "--since", "9" * 400 + "s"],
        ["audit", "list", "--since", "2026-13-45"],
        ["audit", "list", "--since", "\x00"],
        ["audit", "list", "--since", "١٢h"],
        ["audit", "acknowledge", "", "--reason", "x"],
        ["audit", "acknowledge", "x" * 5000, "--reason", "x"],
        ["audit", "acknowledge", "3f9a1c2e", "--reason", " "],
        ["audit", "export", "--since", "-1"],
        ["runbook", "lint", "x" * 300],
        ["runbook", "test", "x" * 300],
        ["--config", "x" * 300, "config", "show"],
        ["--config", "a\x00b", "config", "show"],
    ],
)
def test_odd_arguments_are_usage_errors_not_traces(tmp_path: Path, argv: list[str]) -> None:
    ran = run_inprocess("--set", f"audit.path={tmp_path / 'audit.jsonl'}", *argv)
    assert ran.code in (0, 1, EXIT_USAGE), ran.output
    _no_trace(ran.output)


#: Backends that are not there: a remediation must be stopped by its argument, before any.
NOWHERE = {
    "ONCALL_PROMETHEUS__URL": "http://127.0.0.1:1",
    "ONCALL_REDIS__URL": "redis://127.0.0.1:1/0",
    "ONCALL_VLLM__URLS": "http://127.0.0.1:1",
}


@pytest.mark.parametrize("verb", ["rollback", "approve"])
@pytest.mark.parametrize("action_id", ["", " ", "-", "../x", "x:alive", "*", "٣", "x" * 5000])
def test_an_action_id_that_oncall_never_printed_is_a_usage_error(
    tmp_path: Path, verb: str, action_id: str
) -> None:
    """`oncall remediate rollback ''` reached the last-resort handler (it planned an action
    named "rollback"); an id is oncall's hex or a usage error, before it is a Redis key or a
    lookup, and nothing is audited."""
    audit = tmp_path / "audit.jsonl"
    env = {**NOWHERE, "ONCALL_AUDIT__PATH": str(audit)}
    ran = run_inprocess("remediate", verb, action_id, env=env)
    assert ran.code == EXIT_USAGE, ran.output
    assert "is not an audit action id" in ran.stderr
    assert not audit.exists()
    _no_trace(ran.output)


def test_a_record_file_that_cannot_be_written_is_a_usage_error(tmp_path: Path) -> None:
    """`oncall check ALERT --record FOLDER`: the checklist runs (every backend down), then the
    record cannot be written; one line naming the path, not an IsADirectoryError trace."""
    ran = run_inprocess(
        "--set", f"audit.path={tmp_path / 'audit.jsonl'}", "check", "LLMHighP99Latency",
        "--record", str(tmp_path), env=NOWHERE,
    )  # fmt: skip
    assert ran.code == EXIT_USAGE, ran.output
    assert f"--record {tmp_path}: cannot write it" in ran.stderr
    _no_trace(ran.output)


def test_a_bug_is_one_line_with_where_to_report_it_and_exit_70(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import oncall.cli.config_cmd

    def broken(_args: object) -> int:
        raise RuntimeError("boom at http://bob:hunter2@h:1\nsecond line")

    monkeypatch.setattr(oncall.cli.config_cmd, "show", broken)
    ran = run_inprocess("config", "show")
    assert ran.code == EXIT_INTERNAL
    lines = ran.stderr.splitlines()
    assert len(lines) == 1, ran.stderr
    assert lines[0].startswith("oncall: internal error: RuntimeError: boom at http://bob:")
    assert "please report it" in lines[0]
    assert "hunter2" not in ran.output and "Traceback" not in ran.output


@pytest.mark.parametrize("argv", [["config", "show", "-o", "json"], ["--help"]])
def test_a_reader_that_goes_away_is_not_a_traceback(argv: list[str]) -> None:
    """`oncall config show | head -c0`: the pipe is closed before oncall writes."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "oncall", *argv],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env={"PATH": "/usr/bin:/bin"},
    )
    assert proc.stdout is not None
    proc.stdout.close()  # the reader leaves at once
    _out, err = proc.communicate(timeout=60)
    _no_trace(err.decode())
    assert "BrokenPipeError" not in err.decode()
    if argv[0] != "--help":  # argparse prints help itself, outside main's handlers
        assert proc.returncode in (0, EXIT_BROKEN_PIPE)
