"""Bad values for an action's arguments are usage errors, as argparse's own: exit 2, the
argument named, the value shown escaped and cut short; never a pydantic report."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from oncall.cli.main import build_parser
from oncall.model.action_params import ACTION_PARAMS
from tests.cli_runner import run_oncall
from tests.security.hostile_cli import Ran, run_inprocess

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


#: Names an alert's labels (through a runbook) or a pasted command could carry into a
#: Kubernetes request: selector and path syntax, parent segments, more than Kubernetes' 253
#: characters, line breaks, look-alikes (U+2010 for '-', Cyrillic 'м' for 'm'), capitals.
HOSTILE_NAMES = [
    "gpu-1,metadata.name=x",
    "a=b",
    "ai/vllm-0",
    "..",
    "vllm..0",
    "n" * 300,
    "vllm-0\n",
    "vllm-0\nx",
    "vllm\u20100",
    "vll\u043c-0",
    "VLLM-0",
    "-vllm",
]
NAMED = [("rebuild-pod", "pod", []), ("set-max-num-seqs", "deployment", ["8"])]


@pytest.mark.parametrize("name", HOSTILE_NAMES)
@pytest.mark.parametrize(("action", "argument", "after"), NAMED)
def test_a_hostile_kubernetes_name_is_a_usage_error_naming_it(
    action: str, argument: str, after: list[str], name: str
) -> None:
    # After `--`: a name like `-vllm` is then the argument, not an unknown option.
    _a_one_line_usage_error(run_inprocess("remediate", action, "--dry-run", "--", name, *after),
                            argument)  # fmt: skip


def _a_one_line_usage_error(ran: Ran, argument: str) -> None:
    assert ran.code == 2, ran.output
    assert ran.stdout == ""
    assert f"error: argument {argument}: " in ran.stderr
    assert "validation error" not in ran.stderr and "Traceback" not in ran.stderr
    assert "\n" not in ran.stderr.rstrip("\n").splitlines()[-1] and len(ran.stderr) < 1000


@pytest.mark.parametrize("name", HOSTILE_NAMES)
@pytest.mark.parametrize(("action", "field", "after"), NAMED)
def test_a_hostile_kubernetes_name_fails_the_action_params(
    action: str, field: str, after: list[str], name: str
) -> None:
    """What a runbook's proposal is checked with (checklist/engine.py): the error's location
    is the parameter."""
    with pytest.raises(ValidationError) as caught:
        ACTION_PARAMS[action].model_validate({field: name, **({"value": 8} if after else {})})
    assert [error["loc"] for error in caught.value.errors()] == [(field,)]


@pytest.mark.parametrize(("action", "_argument", "after"), NAMED)
def test_kubernetes_names_pass(action: str, _argument: str, after: list[str]) -> None:
    for name in ("vllm-0", "vllm-7d9f8c-x2x4q", "a", "gpu-node.eu-1", "n" * 253):
        args = build_parser().parse_args(["remediate", action, name, *after])
        assert name in vars(args).values()


#: What a DNS label (a namespace, a container's name) refuses beyond an object name's rules:
#: a dot (a valid pod name, not a namespace) and 64 characters (a namespace is at most 63).
HOSTILE_LABELS = [*HOSTILE_NAMES, "ai.prod", "n" * 64]
LABELLED = [
    ("rebuild-pod", "namespace", ["vllm-0"]),
    ("set-max-num-seqs", "namespace", ["vllm", "8"]),
    ("set-max-num-seqs", "container", ["vllm", "8"]),
]


@pytest.mark.parametrize("name", HOSTILE_LABELS)
@pytest.mark.parametrize(("action", "option", "before"), LABELLED)
def test_a_hostile_namespace_or_container_is_a_usage_error_naming_it(
    action: str, option: str, before: list[str], name: str
) -> None:
    # `--namespace=-x`: a value that starts with a dash is the option's value, not an option.
    ran = run_inprocess("remediate", action, "--dry-run", f"--{option}={name}", *before)
    _a_one_line_usage_error(ran, f"--{option}")


@pytest.mark.parametrize("name", HOSTILE_LABELS)
@pytest.mark.parametrize(("action", "field", "before"), LABELLED)
def test_a_hostile_namespace_or_container_fails_the_action_params(
    action: str, field: str, before: list[str], name: str
) -> None:
    required = {"pod": "vllm-0"} if action == "rebuild-pod" else {"deployment": "vllm", "value": 8}
    with pytest.raises(ValidationError) as caught:
        ACTION_PARAMS[action].model_validate({**required, field: name})
    assert [error["loc"] for error in caught.value.errors()] == [(field,)]


@pytest.mark.parametrize(("action", "option", "before"), LABELLED)
def test_namespaces_and_containers_pass(action: str, option: str, before: list[str]) -> None:
    for name in ("ai", "vllm", "kube-system", "a", "n" * 63, "0"):
        args = build_parser().parse_args(["remediate", action, f"--{option}", name, *before])
        assert getattr(args, option) == name
