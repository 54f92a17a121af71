"""The checklist engine with an injected probe call: order, concurrency, timeouts, statuses."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

import pytest

from oncall.checklist.compiled import CompiledRunbook, CompiledStep
from oncall.checklist.engine import collect, run_checklist
from oncall.checklist.loader import load_runbook
from oncall.errors import BackendError
from oncall.model.checklist_events import (
    ChecklistEvent,
    ChecklistPlanned,
    StepResult,
    findings_line,
)

ALERT = {"name": "A", "state": "firing", "value": 2.0, "labels": {"pod": "vllm-1"}}


def compile_text(tmp_path: Path, text: str) -> CompiledRunbook:
    path = tmp_path / "rb.yaml"
    path.write_text(text)
    loaded = load_runbook(path)
    assert loaded.runbook is not None, loaded.problems
    return loaded.runbook


def steps_yaml(*steps: str, extra: str = "") -> str:
    return "alert: A\ntitle: t\n" + extra + "steps:\n" + "".join(steps)


def step(sid: str, expect: str = "facts.v > 0", **more: str) -> str:
    lines = [f"  - id: {sid}\n    title: {sid} ok\n    probe: redis.stats\n"]
    lines.append(f"    expect: {expect!r}\n" if expect else "")
    lines.extend(f"    {k}: {v}\n" for k, v in more.items())
    return "".join(lines)


class CapProbe:
    """A probe call that holds every step until as many have run at once as the cap allows
    (or every step has started): waiting on the engine to start the cap's worth, instead of
    yielding and hoping it did. `peak` is then the engine's concurrency."""

    def __init__(self, cap: int, steps: int) -> None:
        self.cap, self.steps = cap, steps
        self.running = self.started = self.peak = 0
        self.full = asyncio.Event()

    async def __call__(self, _step: CompiledStep, _params: dict[str, Any]) -> dict[str, Any]:
        self.running += 1
        self.started += 1
        self.peak = max(self.peak, self.running)
        if self.peak >= self.cap or self.started == self.steps:
            self.full.set()
        await self.full.wait()
        # What is tested: an engine that ignores the cap gets a few turns of the loop to start
        # one more step while this one still runs (nothing to wait on: it should not happen).
        for _ in range(3):
            await asyncio.sleep(0)
        self.running -= 1
        return {"v": 1}


async def test_independent_steps_run_concurrently_up_to_the_cap(tmp_path: Path) -> None:
    runbook = compile_text(
        tmp_path, steps_yaml(*(step(f"s{i}") for i in range(5)), extra="concurrency: 2\n")
    )
    probe = CapProbe(2, 5)
    async with asyncio.timeout(5):  # a guard against a hang, not a timing assert
        results = await collect(runbook, ALERT, probe)
    assert [r.status for r in results] == ["ok"] * 5
    assert probe.peak == 2


async def test_a_step_waits_for_its_needs_and_sees_their_facts(tmp_path: Path) -> None:
    runbook = compile_text(
        tmp_path,
        steps_yaml(
            step("b", "steps.a.facts.v == 7 && steps.a.status == 'ok'", needs="[a]"),
            step("a"),
        ),
    )
    order: list[str] = []

    async def runner(s: CompiledStep, _params: dict[str, Any]) -> dict[str, Any]:
        order.append(s.spec.id)
        return {"v": 7}

    results = await collect(runbook, ALERT, runner)
    assert order == ["a", "b"]
    assert {r.id: r.status for r in results} == {"a": "ok", "b": "ok"}


async def test_a_hung_probe_is_unknown_at_its_timeout_and_holds_up_nobody_else(
    tmp_path: Path,
) -> None:
    runbook = compile_text(
        tmp_path,
        steps_yaml(
            step("hung", timeout="300ms"),
            step("fast"),
            step("after_fast", needs="[fast]"),
            step("after_hung", needs="[hung]"),
        ),
    )
    never = asyncio.Event()

    async def runner(s: CompiledStep, _params: dict[str, Any]) -> dict[str, Any]:
        if s.spec.id == "hung":
            await never.wait()
        return {"v": 1}

    events: list[ChecklistEvent] = []
    started = time.perf_counter()
    async with asyncio.timeout(5):
        async for event in run_checklist(runbook, ALERT, runner):
            events.append(event)
    elapsed = time.perf_counter() - started
    results = {e.id: e for e in events if isinstance(e, StepResult)}
    assert results["hung"].status == "unknown"
    assert results["hung"].reason == "redis: no answer within 0.3s"  # names its backend
    assert results["after_hung"].status == "skipped"
    assert results["after_hung"].reason == "needs hung, which is unknown"
    assert results["fast"].status == results["after_fast"].status == "ok"
    finished = [e.id for e in events if isinstance(e, StepResult)]
    assert finished.index("after_fast") < finished.index("hung")  # streamed as they finish
    assert 0.3 <= results["hung"].duration_s < 0.8
    assert elapsed < 0.3 + 0.5


async def test_statuses_from_expect_warn_when_and_failures(tmp_path: Path) -> None:
    runbook = compile_text(
        tmp_path,
        steps_yaml(
            step("good"),
            step("bad", "facts.v > 5"),
            step("warned", warn="facts.v < 2"),
            step("gated", when="alert.value > 5.0"),
            step("broken_expr", "facts.missing > 1"),
            step("not_bool", "facts.v"),
            step("backend"),
            step("crash"),
            step("info", expect=""),
        ),
    )

    async def runner(s: CompiledStep, _params: dict[str, Any]) -> dict[str, Any]:
        if s.spec.id == "backend":
            raise BackendError("redis", "redis://127.0.0.1:1/0", "refused", "Connection refused")
        if s.spec.id == "crash":
            raise KeyError("oops")
        return {"v": 1}

    results = {r.id: r for r in await collect(runbook, ALERT, runner)}
    assert {k: r.status for k, r in results.items()} == {
        "good": "ok",
        "bad": "fail",
        "warned": "warn",
        "gated": "skipped",
        "broken_expr": "error",
        "not_bool": "error",
        "backend": "unknown",
        "crash": "error",
        "info": "ok",
    }
    assert results["backend"].reason == (
        "redis at redis://127.0.0.1:1/0: refused (Connection refused)"
    )
    assert results["crash"].reason == "probe failed: KeyError: 'oops'"
    assert results["not_bool"].reason == "expect: gave 1, not true or false"
    assert "when is false" in (results["gated"].reason or "")
    assert results["gated"].duration_s == 0.0
    assert findings_line(list(results.values())) == "1 fail · 3 error · 1 unknown · 1 warn"


async def test_proposals_evidence_and_summary_are_evaluated_on_the_facts(tmp_path: Path) -> None:
    runbook = compile_text(
        tmp_path,
        steps_yaml(
            step(
                "gpu",
                "facts.free > 8000",
                summary="'{{ facts.free | ,d }} MiB free on {{ alert.labels.pod }}'",
                evidence="[{label: free, value: facts.free, threshold: 8000, unit: MiB,"
                " bad: below}, {label: used, value: 10000 - facts.free}]",
                propose="[lower, degrade]",
            ),
            extra="",
        )
        + "remediations:\n"
        "  lower:\n    action: set-max-num-seqs\n    title: lower\n"
        "    params: {deployment: vllm, value: '{{ facts.free < 3000 ? 64 : 128 }}'}\n"
        "  degrade:\n    action: set-degradation-level\n    title: degrade\n"
        "    params: {level: '{{ facts.free }}'}\n",
    )

    async def runner(_s: CompiledStep, _params: dict[str, Any]) -> dict[str, Any]:
        return {"free": 2500}

    (result,) = await collect(runbook, ALERT, runner)
    assert result.status == "fail"
    assert result.summary == "2,500 MiB free on vllm-1"
    assert result.evidence[0].value == 2500
    assert result.evidence[0].threshold == 8000.0
    # Which side is unhealthy reaches the screen's chart: free memory is bad below its floor.
    assert (result.evidence[0].bad, result.evidence[1].bad) == ("below", "above")
    lower, degrade = result.proposals
    assert (lower.action, lower.params, lower.error) == (
        "set-max-num-seqs",
        {"deployment": "vllm", "value": 64},
        None,
    )
    assert degrade.error is not None and "less than or equal to 3" in degrade.error


async def test_probe_params_templates_render_from_alert_and_vars(tmp_path: Path) -> None:
    runbook = compile_text(
        tmp_path,
        "alert: A\ntitle: t\nvars: {prefix: 'ai-gateway:'}\nsteps:\n"
        "  - id: key\n    title: t\n    probe: redis.key\n"
        "    params: {key: '{{ vars.prefix }}{{ alert.labels.pod }}'}\n",
    )
    seen: list[dict[str, Any]] = []

    async def runner(_s: CompiledStep, params: dict[str, Any]) -> dict[str, Any]:
        seen.append(params)
        return {}

    (result,) = await collect(runbook, ALERT, runner)
    assert seen == [{"key": "ai-gateway:vllm-1"}]
    assert result.params == {"key": "ai-gateway:vllm-1"}


async def test_closing_the_stream_early_cancels_running_probes(tmp_path: Path) -> None:
    runbook = compile_text(tmp_path, steps_yaml(step("slow", timeout="30s"), step("fast")))
    cancelled = asyncio.Event()
    never = asyncio.Event()

    async def runner(s: CompiledStep, _params: dict[str, Any]) -> dict[str, Any]:
        if s.spec.id == "slow":
            try:
                await never.wait()
            except asyncio.CancelledError:
                cancelled.set()
                raise
        return {"v": 1}

    stream = run_checklist(runbook, ALERT, runner)
    async with asyncio.timeout(5):
        async for event in stream:
            if isinstance(event, StepResult):
                break
        await stream.aclose()
        await cancelled.wait()
    assert cancelled.is_set()


@pytest.mark.parametrize("cap", [1, 3])
async def test_the_callers_cap_overrides_the_runbooks(tmp_path: Path, cap: int) -> None:
    runbook = compile_text(tmp_path, steps_yaml(*(step(f"s{i}") for i in range(4))))
    probe = CapProbe(cap, 4)
    async with asyncio.timeout(5):  # a guard against a hang, not a timing assert
        await collect(runbook, ALERT, probe, concurrency=cap)
    assert probe.peak == cap


async def test_the_engine_yields_the_plan_first(tmp_path: Path) -> None:
    runbook = compile_text(tmp_path, steps_yaml(step("b", needs="[a]"), step("a")))

    async def runner(_s: CompiledStep, _params: dict[str, Any]) -> dict[str, Any]:
        return {"v": 1}

    events = [e async for e in run_checklist(runbook, ALERT, runner)]
    assert events[0] == ChecklistPlanned(runbook.path, (("a", "a ok"), ("b", "b ok")))
    assert not any(isinstance(e, ChecklistPlanned) for e in events[1:])
    assert {e.id for e in events if isinstance(e, StepResult)} == {"a", "b"}


async def test_a_hostile_label_makes_a_kubernetes_name_proposal_fail_on_its_param(
    tmp_path: Path,
) -> None:
    """An alert's `pod` label holding selector syntax does not become a rebuild-pod target:
    the proposal carries an error naming the parameter ("not actionable: ..." where a person
    would run it: service/remediation.py)."""
    runbook = compile_text(
        tmp_path,
        steps_yaml(step("s", "facts.v > 0", propose="[rebuild]"), extra="") + "remediations:\n"
        "  rebuild:\n    action: rebuild-pod\n    title: rebuild\n"
        "    params: {pod: '{{ alert.labels.pod }}'}\n",
    )

    async def runner(_s: CompiledStep, _params: dict[str, Any]) -> dict[str, Any]:
        return {"v": 0}

    hostile = {**ALERT, "labels": {"pod": "vllm-1,metadata.name=x"}}
    (result,) = await collect(runbook, hostile, runner)
    (rebuild,) = result.proposals
    assert rebuild.error is not None and rebuild.error.startswith("params.pod: ")
    assert "(got 'vllm-1,metadata.name=x')" in rebuild.error
