"""Bad values for an action's arguments are usage errors, as argparse's own: exit 2, the
argument named, the value shown escaped and cut short; never a pydantic report."""

from __future__ import annotations

import pytest

from oncall.cli.main import build_parser
from tests.cli_runner import run_oncall
from tests.security.hostile_cli import run_inprocess

UUID = "6d1f2c7e-1b2a-4c3d-9e8f-0a1b2c3d4e5f"
LONG = 10_000


def _hostile(value: str) -> list[str]:
    return ["   ", "\t", "\x1b[31mA", value * LONG]


@pytest.mark.parametrize(
    ("command", "argument", "value"),
    [
        *((["ack"], "ALERT", v) for v in ("", *_hostile("A"))),
        *((["silence", "expire"], "ID", v) for v in ("", *_hostile("f"))),
        (["remediate", "rebuild-pod"], "pod", ""),
        (["ack", "KubePodNotReady", "--note"], "--note", "on it\x07"),
        (["silence", "add", '{alertname="X"}', "--comment"], "--comment", "c" * LONG),
    ],
)
def test_a_bad_argument_is_a_usage_error_naming_it(
    command: list[str], argument: str, value: str
) -> None:
    ran = run_inprocess(*command, value, "--dry-run")
    assert ran.code == 2, ran.output
    assert ran.stdout == ""
    assert f"error: argument {argument}: " in ran.stderr
    assert "validation error" not in ran.stderr and "Traceback" not in ran.stderr
    assert "\x1b" not in ran.stderr and "\x07" not in ran.stderr
    assert len(ran.stderr) < 1000  # a 10,000-character value is cut, not echoed


@pytest.mark.parametrize("command", [["ack"], ["silence", "expire"]])
def test_a_nul_byte_is_a_usage_error(command: list[str]) -> None:
    # Only an in-process caller can pass one (an exec'd command line cannot hold it).
    ran = run_inprocess(*command, "A\x00B")
    assert ran.code == 2, ran.output
    assert "an argument contains a NUL byte" in ran.stderr and "\x00" not in ran.output


def test_an_empty_alert_exits_2_from_the_real_command() -> None:
    result = run_oncall("ack", "")
    assert result.code == 2
    assert "argument ALERT: '': string should have at least 1 character" in result.stderr
    expired = run_oncall("silence", "expire", "")
    assert expired.code == 2
    assert "argument ID: '' is not the silence's id (a UUID)" in expired.stderr


def test_good_values_pass_through_unchanged() -> None:
    args = build_parser().parse_args(["ack", "KubePodNotReady", "--note", " on it "])
    assert (args.alert, args.note) == ("KubePodNotReady", " on it ")  # the model strips it
    assert build_parser().parse_args(["silence", "expire", UUID]).silence_id == UUID
    assert build_parser().parse_args(["remediate", "set-degradation-level", "2"]).level == 2
