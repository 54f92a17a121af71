"""Missing facts are never green: the engine's rule, `absent_ok`, and the lint warning."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from oncall.checklist.absence import facts_in
from oncall.checklist.compiled import CompiledRunbook, CompiledStep
from oncall.checklist.engine import collect
from oncall.checklist.loader import load_runbook
from oncall.cli.check_cmd import _line
from tests.cli_runner import run_oncall

ALERT = {"name": "A", "state": "firing", "value": 2.0, "labels": {}}
WHY = (
    "no vllm:kv_cache_usage_perc series; found ray_vllm:kv_cache_usage_perc"
    " — a Ray Serve deployment?"
)


def compile_text(tmp_path: Path, steps: str) -> CompiledRunbook:
    path = tmp_path / "rb.yaml"
    path.write_text("alert: A\ntitle: t\nsteps:\n" + steps)
    loaded = load_runbook(path)
    assert loaded.runbook is not None, loaded.problems
    return loaded.runbook


def one_step(expect: str | None = None, **more: str) -> str:
    lines = ["  - id: s\n    title: s ok\n    probe: vllm.rates\n"]
    if expect is not None:
        lines.append(f"    expect: {expect!r}\n")
    lines.extend(f"    {k}: {v!r}\n" for k, v in more.items())
    return "".join(lines)


async def run_one(runbook: CompiledRunbook, facts: dict[str, Any]) -> Any:
    async def probe(_step: CompiledStep, _params: dict[str, Any]) -> dict[str, Any]:
        return facts

    (result,) = await collect(runbook, ALERT, probe)
    return result


NULL_PASSING = "facts.kv_cache_usage == null || facts.kv_cache_usage < 0.9"
ABSENT = {"kv_cache_usage": None, "waiting": 3.0, "absent": {"kv_cache_usage": WHY}}


async def test_an_ok_on_an_absent_fact_is_unknown_with_the_probes_reason(tmp_path: Path) -> None:
    result = await run_one(compile_text(tmp_path, one_step(NULL_PASSING)), ABSENT)
    assert (result.status, result.reason) == ("unknown", WHY)
    assert result.summary == f"no data: {WHY}"
    assert result.proposals == ()
    assert result.facts == ABSENT  # what the probe did see is kept for the screen


async def test_the_same_step_with_the_series_there_is_judged(tmp_path: Path) -> None:
    runbook = compile_text(tmp_path, one_step(NULL_PASSING))
    seen = await run_one(runbook, {"kv_cache_usage": 0.5, "absent": {}})
    full = await run_one(runbook, {"kv_cache_usage": 0.97, "absent": {}})
    # A null with series there (no traffic: no value) is the expectation's to judge.
    idle = await run_one(runbook, {"kv_cache_usage": None, "absent": {}})
    assert [r.status for r in (seen, full, idle)] == ["ok", "fail", "ok"]
    assert seen.reason is None


async def test_an_absent_fact_the_verdict_does_not_read_changes_nothing(tmp_path: Path) -> None:
    runbook = compile_text(tmp_path, one_step("facts.waiting < 10.0"))
    result = await run_one(runbook, ABSENT)
    assert (result.status, result.reason) == ("ok", None)


async def test_an_expression_failing_on_the_null_is_unknown_not_an_error(tmp_path: Path) -> None:
    runbook = compile_text(tmp_path, one_step("facts.kv_cache_usage < 0.9"))
    result = await run_one(runbook, ABSENT)
    assert (result.status, result.reason) == ("unknown", WHY)


@pytest.mark.parametrize(
    ("expect", "warn", "status"),
    [
        ("facts.waiting < 1.0", "", "fail"),  # failed on the facts that are there
        (NULL_PASSING, "facts.waiting > 0.0", "warn"),
    ],
)
async def test_warn_and_fail_stand_with_the_reason(
    tmp_path: Path, expect: str, warn: str, status: str
) -> None:
    # The expectation reads the absent fact too: the verdict is not a green either way.
    text = f"({expect}) && (facts.kv_cache_usage == null || true)"
    more = {"warn": warn} if warn else {}
    result = await run_one(compile_text(tmp_path, one_step(text, **more)), ABSENT)
    assert (result.status, result.reason) == (status, WHY)


async def test_absent_ok_judges_on_the_nulls_and_shows_both_reasons(tmp_path: Path) -> None:
    runbook = compile_text(
        tmp_path, one_step(NULL_PASSING, absent_ok="this pool has no KV cache metric")
    )
    result = await run_one(runbook, ABSENT)
    assert result.status == "ok"
    assert result.reason == f"{WHY}; absent_ok: this pool has no KV cache metric"
    # `oncall check` shows it under the step's line (the summary is the step's own).
    assert _line(result).splitlines()[1] == f"      why: {result.reason}"


async def test_a_gathering_step_is_read_through_its_summary(tmp_path: Path) -> None:
    runbook = compile_text(
        tmp_path, one_step(summary="KV cache {{ facts.kv_cache_usage | .0% }} used")
    )
    result = await run_one(runbook, ABSENT)
    assert (result.status, result.reason) == ("unknown", WHY)


def test_facts_in_reads_fields_and_indexes_not_strings_or_other_steps() -> None:
    text = (
        "facts.a > 1 && facts['b'] == 'facts.c' && steps.x.facts.d == 1 "
        '&& facts . e != null && size(facts["f"]) > 0 && "facts.g" != ""'
    )
    assert facts_in(text) == {"a", "b", "e", "f"}


def test_absent_ok_must_give_a_reason(tmp_path: Path) -> None:
    path = tmp_path / "rb.yaml"
    path.write_text("alert: A\ntitle: t\nsteps:\n" + one_step(NULL_PASSING, absent_ok=""))
    loaded = load_runbook(path)
    assert loaded.runbook is None
    assert [p.key for p in loaded.problems] == ["steps.0.absent_ok"]


LINTED = """\
alert: A
title: t
vars: {high: 0.9}
steps:
  - id: guarded
    title: the probe says when its series are missing
    probe: vllm.rates
    expect: facts.kv_cache_usage == null || facts.kv_cache_usage < vars.high
  - id: unguarded
    title: redis.stats does not
    probe: redis.stats
    expect: facts.memory_ratio == null || facts.memory_ratio < vars.high
  - id: explained
    title: the runbook says why
    probe: redis.stats
    expect: facts.memory_ratio == null || facts.memory_ratio < vars.high
    absent_ok: no maxmemory, nothing to fill
  - id: strict
    title: null fails
    probe: redis.stats
    expect: facts.memory_ratio != null && facts.memory_ratio < vars.high
"""


def test_lint_warns_on_an_expectation_that_holds_on_null_facts(tmp_path: Path) -> None:
    (tmp_path / "rb.yaml").write_text(LINTED)
    result = run_oncall("runbook", "lint", "rb.yaml", cwd=tmp_path)
    assert result.code == 0, result.stdout  # a warning fails nothing
    assert result.stdout.splitlines() == [
        "rb.yaml:12:13: steps.1.expect: warning: expect holds when facts.memory_ratio is null: "
        "the step shows ok on missing data, and redis.stats does not report that its data is "
        "missing; fail or warn on null, or say why absence is healthy with absent_ok: <reason>"
    ]
    assert "clean, 1 warning" in result.stderr
