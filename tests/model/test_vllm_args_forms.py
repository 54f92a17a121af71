"""`--max-num-seqs` / `--max-num-active-seqs` as vLLM reads them: argparse abbreviations,
underscores, both value forms, and `$(VAR)` from the container's env (read, not edited)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from oncall.model.kube_expansion import Env
from oncall.model.vllm_args import (
    ACTIVE_FLAG,
    parse_max_num_active_seqs,
    parse_max_num_seqs,
    resolve_option,
)

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "kubernetes"


def container_of(name: str, index: int = 0) -> dict[str, Any]:
    deployment = json.loads((FIXTURES / name).read_text())
    found: dict[str, Any] = deployment["spec"]["template"]["spec"]["containers"][index]
    return found


@pytest.mark.parametrize(
    ("word", "option", "candidates"),
    [
        ("--max-num-seqs", "--max-num-seqs", ()),
        ("--max-num-seq", "--max-num-seqs", ()),
        ("--max-num-s", "--max-num-seqs", ()),
        ("--max-num-a", ACTIVE_FLAG, ()),
        ("--max-num-p", "--max-num-partial-prefills", ()),
        ("--max-num-", None, 4),
        ("--max", None, 4),
        ("--model", None, ()),
        ("--", None, ()),
    ],
)
def test_abbreviations_resolve_as_argparse_does(
    word: str, option: str | None, candidates: tuple[str, ...] | int
) -> None:
    resolved, found = resolve_option(word)
    assert resolved == option
    assert (len(found) if isinstance(candidates, int) else found) == candidates


@pytest.mark.parametrize(
    ("args", "value", "form", "rewritten"),
    [
        (["--max-num-seq=64"], 64, "equals", "--max-num-seq=32"),
        (["--max_num_seq=64"], 64, "equals", "--max_num_seq=32"),
        (["--max-num-s", "64"], 64, "separate", "32"),
        (["--max-num-seqs", "8", "--max-num-seq", "64"], 64, "separate", "32"),
    ],
)
def test_abbreviated_flags_are_read_and_edited(
    args: list[str], value: int, form: str, rewritten: str
) -> None:
    found = parse_max_num_seqs(None, args)
    assert (found.value, found.form, found.problem) == (value, form, None)
    assert found.rewrite(32) == rewritten


@pytest.mark.parametrize("args", [["--max-num=64"], ["--max-num-", "64"], ["--max", "64"]])
def test_an_ambiguous_prefix_is_an_error_as_in_vllm(args: list[str]) -> None:
    found = parse_max_num_seqs(None, args)
    assert found.value is None and not found.editable
    assert found.problem is not None and "ambiguous option" in found.problem
    assert "--max-num-batched-tokens" in found.problem


def test_an_ambiguous_option_anywhere_stops_vllm_even_if_a_later_one_is_fine() -> None:
    found = parse_max_num_seqs(None, ["--max-num", "1", "--max-num-seqs", "64"])
    assert found.value is None and found.problem is not None and "ambiguous" in found.problem


def test_active_seqs_is_its_own_flag() -> None:
    args = ["--max-num-seqs", "256", "--max-num-active-seqs=64"]
    seqs, active = parse_max_num_seqs(None, args), parse_max_num_active_seqs(None, args)
    assert (seqs.value, active.value, active.form, active.option) == (
        256,
        64,
        "equals",
        ACTIVE_FLAG,
    )
    assert parse_max_num_active_seqs(None, ["--max-num-seqs", "256"]).form == "default"
    assert parse_max_num_active_seqs(["sh", "-c", "vllm serve m --max-num-a 9"]).value == 9


def test_env_reference_is_read_but_not_edited() -> None:
    env = Env(values={"MAX_SEQS": "128"})
    found = parse_max_num_seqs(None, ["--max-num-seqs", "$(MAX_SEQS)"], env)
    assert (found.value, found.from_env, found.editable) == (128, ("MAX_SEQS",), False)
    assert found.edit_problem is not None and "$(MAX_SEQS)" in found.edit_problem
    with pytest.raises(ValueError, match="env"):
        found.rewrite(64)


def test_env_reference_elsewhere_in_the_element_keeps_the_value_editable() -> None:
    env = Env(values={"MODEL": "meta-llama/Llama-3.1-8B-Instruct"})
    script = "vllm serve $(MODEL) --max-num-seqs 256"
    found = parse_max_num_seqs(["sh", "-c", script], None, env)
    assert (found.value, found.editable, found.text) == (256, True, script)
    assert found.rewrite(64) == "vllm serve $(MODEL) --max-num-seqs 64"


@pytest.mark.parametrize(
    ("env", "why"),
    [
        (Env(), "not in the container's env"),
        (Env(opaque=frozenset({"MAX_SEQS"})), "valueFrom/envFrom"),
        (Env(has_env_from=True), "valueFrom/envFrom"),
    ],
)
def test_unresolvable_references_say_why(env: Env, why: str) -> None:
    found = parse_max_num_seqs(None, ["--max-num-seqs=$(MAX_SEQS)"], env)
    assert found.value is None and found.problem is not None and why in found.problem


def test_escaped_reference_reaches_vllm_literally() -> None:
    found = parse_max_num_seqs(None, ["--max-num-seqs", "$$(MAX_SEQS)"], Env({"MAX_SEQS": "1"}))
    assert found.value is None and found.problem is not None  # vLLM gets "$(MAX_SEQS)"


def test_recorded_deployment_with_env_abbreviation_and_active_seqs() -> None:
    container = container_of("deployment_vllm_env_active.json")
    env = Env.of_container(container)
    seqs = parse_max_num_seqs(container["command"], container["args"], env)
    active = parse_max_num_active_seqs(container["command"], container["args"], env)
    assert (seqs.value, seqs.flag, seqs.editable) == (128, "--max-num-seq", False)
    assert (active.value, active.flag, active.editable) == (64, "--max_num_active_seqs", True)
    assert (active.field, active.index) == ("args", 5)


def test_recorded_shell_deployment_has_both_in_one_element() -> None:
    container = container_of("deployment_vllm_shell_both.json")
    env = Env.of_container(container)
    seqs = parse_max_num_seqs(container["command"], container["args"], env)
    active = parse_max_num_active_seqs(container["command"], container["args"], env)
    assert (seqs.value, active.value) == (256, 192)
    assert (seqs.field, seqs.index) == (active.field, active.index) == ("args", 0)
    assert seqs.editable and active.editable
