"""Run a compiled runbook: steps concurrently in dependency order, each bounded by its timeout.

Every step waits only for the steps in its `needs`; a global cap (the runbook's `concurrency`
or the caller's) bounds how many probes run at once. Events stream out as they happen —
`StepStarted` when a probe begins, `StepResult` when a step is decided — so a screen can show
"running" and then each finding the moment it is known.

Statuses: `ok` / `warn` / `fail` from the expectation; `unknown` when the probe could not
answer (backend error, or no answer within the step's timeout); `error` when the runbook itself
is wrong at run time (an expression that fails on these facts, a probe that raised something
unexpected); `skipped` when `when` is false or a needed step has no facts. An `unknown` step
holds up only the steps that need it. A verdict that reads facts the probe found no series for
is `unknown` too, unless the step's `absent_ok` says why absence is healthy
(`oncall.checklist.absence`).

A step's timeout bounds its expressions too: `when`, the probe, then `expect`, `warn` and
`evidence` share it (the wait for a free slot under the concurrency cap aside); an expression
too costly to evaluate in-process runs apart and is stopped at the step's deadline
(`oncall.checklist.isolated`), and the step is `unknown` with the reason.

The probe call is injected (`ProbeRunner`): live runs call the registry's probes through a
`ProbeContext`, runbook unit tests hand back recorded facts.
"""

from __future__ import annotations

import asyncio
import dataclasses
import time
from collections.abc import AsyncGenerator, Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from pydantic import ValidationError

from oncall.checklist.absence import absent_reasons
from oncall.checklist.compiled import CompiledRemediation, CompiledRunbook, CompiledStep
from oncall.checklist.expressions import (
    CompiledExpression,
    ExpressionBudgetError,
    ExpressionError,
)
from oncall.checklist.isolated import evaluate_within
from oncall.checklist.templates import Template
from oncall.errors import BackendError
from oncall.model.checklist_events import (
    ChecklistEvent,
    ChecklistPlanned,
    EvidenceValue,
    Proposal,
    StepResult,
    StepStarted,
    StepStatus,
)

# The values a run reports live in model/checklist_events.py (the app shows them without
# loading this engine); import them from there.
__all__ = ["DECIDED", "Describe", "Facts", "ProbeRunner", "collect", "run_checklist"]

#: Statuses whose facts later steps may use.
DECIDED: frozenset[str] = frozenset({"ok", "warn", "fail"})

Facts = dict[str, Any]
ProbeRunner = Callable[[CompiledStep, dict[str, Any]], Awaitable[Facts]]
Describe = Callable[[CompiledStep, dict[str, Any]], str | None]


@dataclass
class _Run:
    runbook: CompiledRunbook
    alert: Mapping[str, Any]
    runner: ProbeRunner
    describe: Describe | None
    limit: asyncio.Semaphore
    queue: asyncio.Queue[StepStarted | StepResult] = field(default_factory=asyncio.Queue)
    done: dict[str, asyncio.Event] = field(default_factory=dict)
    results: dict[str, StepResult] = field(default_factory=dict)


async def run_checklist(
    runbook: CompiledRunbook,
    alert: Mapping[str, Any],
    runner: ProbeRunner,
    *,
    concurrency: int | None = None,
    describe: Describe | None = None,
) -> AsyncGenerator[ChecklistEvent, None]:
    """Yield the plan (`ChecklistPlanned`), then StepStarted / StepResult events until every
    step has a result.

    Closing the iterator early cancels the steps still running.
    """
    run = _Run(
        runbook,
        alert,
        runner,
        describe,
        asyncio.Semaphore(concurrency or runbook.spec.concurrency),
    )
    run.done = {step.spec.id: asyncio.Event() for step in runbook.steps}
    yield ChecklistPlanned(runbook.path, tuple((s.spec.id, s.spec.title) for s in runbook.steps))
    tasks = [asyncio.create_task(_step(run, step)) for step in runbook.steps]
    try:
        for _ in range(len(tasks) * 2):
            event = await run.queue.get()
            yield event
            if len(run.results) == len(tasks) and run.queue.empty():
                break
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


async def collect(
    runbook: CompiledRunbook, alert: Mapping[str, Any], runner: ProbeRunner, **kwargs: Any
) -> list[StepResult]:
    """Run to the end; results in the runbook's step order."""
    results = {
        e.id: e
        async for e in run_checklist(runbook, alert, runner, **kwargs)
        if isinstance(e, StepResult)
    }
    return [results[s.id] for s in runbook.spec.steps]


def _names(run: _Run, step: CompiledStep, facts: Facts | None) -> dict[str, Any]:
    steps = {
        need: {"status": run.results[need].status, "facts": run.results[need].facts or {}}
        for need in step.spec.needs
    }
    names: dict[str, Any] = {
        "alert": dict(run.alert),
        "vars": dict(run.runbook.spec.vars),
        "steps": steps,
    }
    if facts is not None:
        names["facts"] = facts
    return names


async def _step(run: _Run, step: CompiledStep) -> None:
    for need in step.spec.needs:
        await run.done[need].wait()
    try:
        result = await _decide(run, step)
    except Exception as exc:  # a bug must not hang the checklist: this step is an error
        result = _result(step, "error", f"internal error: {type(exc).__name__}: {exc}")
    run.results[step.spec.id] = result
    run.done[step.spec.id].set()
    await run.queue.put(result)


def _result(
    step: CompiledStep,
    status: StepStatus,
    reason: str | None,
    *,
    started: float | None = None,
    duration: float = 0.0,
    params: dict[str, Any] | None = None,
    equivalent: str | None = None,
    **more: Any,
) -> StepResult:
    return StepResult(
        id=step.spec.id,
        title=step.spec.title,
        status=status,
        reason=reason,
        summary=more.pop("summary", reason),
        duration_s=round(duration, 4),
        started_at=started if started is not None else time.time(),
        probe=step.spec.probe,
        params=params or {},
        equivalent=equivalent,
        timeout_s=step.timeout_s,
        **more,
    )


async def _decide(run: _Run, step: CompiledStep) -> StepResult:
    for need in step.spec.needs:
        status = run.results[need].status
        if status not in DECIDED:
            return _result(step, "skipped", f"needs {need}, which is {status}")
    gate = _names(run, step, None)
    began = time.perf_counter()  # `when` and the params spend the step's time too
    if step.when is not None:
        try:
            go = await _within(step.when, gate, began + step.timeout_s)
        except ExpressionBudgetError as exc:
            return _result(step, "unknown", f"when: {exc.message}")
        except ExpressionError as exc:
            return _result(step, "error", f"when: {exc.message}")
        if go is not True:
            return _result(step, "skipped", f"when is false: {step.spec.when}")
    try:
        params = _render(step.params, gate)
    except ExpressionBudgetError as exc:  # templates are evaluated in-process, within budget
        return _result(step, "unknown", f"params: {exc.message}")
    except ExpressionError as exc:
        return _result(step, "error", f"params: {exc.message}")
    equivalent = _describe(run, step, params)
    clock_before_slot = time.perf_counter()
    async with run.limit:
        started, clock = time.time(), time.perf_counter()
        # The probe's deadline, and then the expressions' on its facts (not counting the wait
        # for a free slot above: that is not this step's work).
        deadline = clock + step.timeout_s - (clock_before_slot - began)
        await run.queue.put(StepStarted(step.spec.id, step.spec.title, started))
        try:
            async with asyncio.timeout(deadline - clock):
                facts = await run.runner(step, params)
            failure: tuple[StepStatus, str] | None = None
        except TimeoutError:
            # Name the backend: "no answer" alone does not say whom to look at.
            backend = step.probe.backend
            failure = ("unknown", f"{backend}: no answer within {step.timeout_s:g}s")
        except BackendError as exc:
            failure = ("unknown", str(exc))
        except Exception as exc:
            failure = ("error", f"probe failed: {type(exc).__name__}: {exc}")
        duration = time.perf_counter() - clock
    timing: dict[str, Any] = {
        "started": started,
        "duration": duration,
        "params": params,
        "equivalent": equivalent,
    }
    if failure is not None:
        return _result(step, failure[0], failure[1], **timing)
    return await _judge(run, step, facts, timing, deadline)


async def _within(expression: CompiledExpression, names: dict[str, Any], deadline: float) -> Any:
    return await evaluate_within(expression, names, deadline - time.perf_counter())


def _describe(run: _Run, step: CompiledStep, params: dict[str, Any]) -> str | None:
    if run.describe is None:
        return None
    try:
        return run.describe(step, params)
    except Exception:  # a display helper must never fail a step
        return None


async def _judge(
    run: _Run, step: CompiledStep, facts: Facts, timing: dict[str, Any], deadline: float
) -> StepResult:
    """The step's verdict on its facts. When it reads facts the probe could not see, `warn`
    and `fail` stand (reached on facts that are there, and not a green); `ok`, and an
    expression that fails on the nulls, are `unknown` with the probe's reason, unless the
    step's `absent_ok` says why absence is healthy (then both reasons are shown)."""
    names = _names(run, step, facts)
    result = await _verdict(run, step, facts, names, timing=timing, deadline=deadline)
    absent = "; ".join(absent_reasons(step, facts))
    if not absent:
        return result
    if step.spec.absent_ok is not None:
        return dataclasses.replace(result, reason=f"{absent}; absent_ok: {step.spec.absent_ok}")
    if result.status in ("warn", "fail"):
        return dataclasses.replace(result, reason=absent)
    return _result(
        step,
        "unknown",
        absent,
        summary=f"no data: {absent}",
        evidence=result.evidence,
        facts=facts,
        **timing,
    )


async def _verdict(
    run: _Run,
    step: CompiledStep,
    facts: Facts,
    names: dict[str, Any],
    *,
    timing: dict[str, Any],
    deadline: float,
) -> StepResult:
    try:
        verdict = True if step.expect is None else await _within(step.expect, names, deadline)
        if not isinstance(verdict, bool):
            raise ExpressionError(f"gave {verdict!r}, not true or false")
        status: StepStatus = "ok" if verdict else "fail"
        if status == "ok" and step.warn is not None:
            warned = await _within(step.warn, names, deadline)
            if not isinstance(warned, bool):
                raise ExpressionError(f"warn gave {warned!r}, not true or false")
            status = "warn" if warned else "ok"
    except ExpressionBudgetError as exc:
        return _result(step, "unknown", f"expect: {exc.message}", facts=facts, **timing)
    except ExpressionError as exc:
        return _result(step, "error", f"expect: {exc.message}", facts=facts, **timing)
    summary: str | None = None
    if step.summary is not None:
        try:
            summary = str(step.summary.render(names))
        except ExpressionError as exc:
            summary = f"(summary failed: {exc.message})"
    evidence = tuple(await _evidence(step, names, deadline))
    proposals: tuple[Proposal, ...] = ()
    if status in step.spec.propose_on:
        proposals = tuple(
            _propose(run.runbook.remediations[rid], step.spec.id, names)
            for rid in step.spec.propose
        )
    return _result(
        step,
        status,
        None,
        summary=summary or step.spec.title,
        evidence=evidence,
        proposals=proposals,
        facts=facts,
        **timing,
    )


async def _evidence(
    step: CompiledStep, names: dict[str, Any], deadline: float
) -> list[EvidenceValue]:
    out: list[EvidenceValue] = []
    for item in step.evidence:
        try:
            value = await _within(item.value, names, deadline)
            threshold = await _within(item.threshold, names, deadline) if item.threshold else None
            out.append(
                EvidenceValue(
                    item.label, value, threshold, item.unit, None, item.value.text, item.bad
                )
            )
        except ExpressionError as exc:
            out.append(
                EvidenceValue(
                    item.label, None, None, item.unit, exc.message, item.value.text, item.bad
                )
            )
    return out


def _render(params: Mapping[str, Template | object], names: Mapping[str, Any]) -> dict[str, Any]:
    return {
        key: value.render(names) if isinstance(value, Template) else value
        for key, value in params.items()
    }


def _propose(remediation: CompiledRemediation, step_id: str, names: dict[str, Any]) -> Proposal:
    spec = remediation.spec
    error: str | None = None
    try:
        params = _render(remediation.params, names)
    except ExpressionError as exc:
        params, error = {}, f"params: {exc.message}"
    if error is None:
        from oncall.model.action_params import ACTION_PARAMS  # loaded with the runbook's actions

        try:
            params = ACTION_PARAMS[spec.action].model_validate(params).model_dump(exclude_none=True)
        except ValidationError as exc:
            error = "; ".join(
                f"params.{'.'.join(map(str, e['loc']))}: {e['msg']} (got {e.get('input')!r})"
                for e in exc.errors()
            )
    return Proposal(
        id=remediation.id,
        action=spec.action,
        title=spec.title,
        params=params,
        step=step_id,
        dangerous=spec.dangerous,
        error=error,
    )
