"""Checklists for the CLI and the app: find an alert's runbook, run it live against backends.

Runbooks are found as `<AlertName>.yaml` (or any file whose `alert:` names it) in the folders
of `runbooks.dirs`, then `./runbooks`, then the `runbooks/` folder of this checkout. A live run
shares one `ProbeContext` (one client per backend) and streams the engine's events.
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import json
from collections.abc import AsyncIterator, Mapping
from pathlib import Path
from typing import Any

from oncall.checklist.engine import run_checklist
from oncall.checklist.loader import CompiledRunbook, CompiledStep, load_runbook, runbook_files
from oncall.checklist.matching import best_match, matching_runbooks
from oncall.errors import ConfigError, Problem, UsageError
from oncall.model.alerts import RuleStatus
from oncall.model.checklist_events import ChecklistEvent
from oncall.probes.base import Facts
from oncall.probes.context import ProbeContext
from oncall.settings import Settings
from oncall.settings.yaml_marks import load_marked_yaml

CHECKOUT_RUNBOOKS = Path(__file__).resolve().parents[2] / "runbooks"


def runbook_dirs(settings: Settings) -> list[Path]:
    return list(dict.fromkeys([*settings.runbooks.dirs, Path("runbooks"), CHECKOUT_RUNBOOKS]))


def find_runbook(settings: Settings, alert: str, labels: Mapping[str, str] | None = None) -> Path:
    """The runbook file for `alert`: by file name first, then by its `alert:` key, then the
    most specific `match:` on the alert's labels (see `oncall.checklist.matching`)."""
    dirs = _distinct([d for d in runbook_dirs(settings) if d.is_dir()])
    for folder in dirs:
        for ext in (".yaml", ".yml"):
            if (folder / f"{alert}{ext}").is_file():
                return folder / f"{alert}{ext}"
    # Each file is read once for both searches below (a cold `oncall check` of an alert
    # whose runbook is found by `match:` read every runbook four times: ~0.2 s of CPU).
    read = functools.cache(load_marked_yaml)
    for folder in dirs:
        for file in runbook_files([folder]):
            doc, problems = read(file)
            if not problems and doc.data.get("alert") == alert:
                return file
    matched = best_match(matching_runbooks(runbook_files(dirs), read),
                         {**(labels or {}), "alertname": alert})  # fmt: skip
    if matched is not None:
        return matched
    searched = ", ".join(str(d) for d in runbook_dirs(settings))
    raise UsageError(f"no runbook for alert {alert!r} in {searched}")


def _distinct(dirs: list[Path]) -> list[Path]:
    """The folders without a second name for one already listed (`runbooks` is the
    checkout's `runbooks/` when run from the checkout): it would only find the same files."""
    seen: set[Path] = set()
    kept = []
    for folder in dirs:
        real = folder.resolve()
        if real not in seen:
            seen.add(real)
            kept.append(folder)
    return kept


def load_checked(path: Path, settings: Settings | None = None) -> CompiledRunbook:
    """Load a runbook, or raise ConfigError with every problem (FILE:LINE:COL).

    The `runbooks.vars` setting overrides the runbook's vars of the same names (only those:
    a setting cannot add names the runbook's expressions were not compiled against).
    """
    loaded = load_runbook(path)
    if loaded.runbook is None:
        raise ConfigError(loaded.problems, what="runbook")
    runbook = loaded.runbook
    overrides = settings.runbooks.vars if settings else {}
    known = {k: v for k, v in overrides.items() if k in runbook.spec.vars}
    if known:
        spec = runbook.spec.model_copy(update={"vars": {**runbook.spec.vars, **known}})
        runbook = dataclasses.replace(runbook, spec=spec)
    return runbook


def alert_facts(name: str, status: RuleStatus | None) -> dict[str, Any]:
    """The `alert` name of expressions: the alert's current state, value and labels."""
    if status is None:
        return {"name": name, "state": "unknown", "value": None, "labels": {}, "annotations": {}}
    instance = next(
        (i for want in ("firing", "pending") for i in status.instances if i.state == want),
        None,
    )
    labels = dict(status.rule.labels)
    if instance is not None:
        labels.update(instance.labels)
    return {
        "name": name,
        "state": status.state,
        "value": status.value,
        "labels": labels,
        # Expanded for the instance (by Prometheus or the local evaluation), not the raw
        # templates: audit records carry these.
        "annotations": dict(instance.annotations if instance else status.rule.annotations),
    }


class LiveRunner:
    """The engine's probe call for live runs: validate the rendered params, run the probe.

    Steps that ask the same probe with the same parameters (two judgements of one
    `vllm.rates` answer) share one call: the probe runs once per checklist run. Each step
    still waits under its own timeout; `cancel` stops calls nobody waits for any more.
    """

    def __init__(self, ctx: ProbeContext) -> None:
        self.ctx = ctx
        self.calls: dict[str, asyncio.Task[Facts]] = {}

    async def __call__(self, step: CompiledStep, params: dict[str, Any]) -> Facts:
        probe = step.probe
        validated = probe.params.model_validate(params)
        key = probe.name + json.dumps(validated.model_dump(mode="json"), sort_keys=True)
        call = self.calls.get(key)
        if call is None:
            call = asyncio.ensure_future(probe.run(self.ctx, validated))
            self.calls[key] = call
        # Shielded: one step giving up at its timeout must not cancel the others' answer.
        return await asyncio.shield(call)

    async def cancel(self) -> None:
        pending = [c for c in self.calls.values() if not c.done()]
        for call in pending:
            call.cancel()
        await asyncio.gather(*self.calls.values(), return_exceptions=True)


def describe(ctx: ProbeContext) -> Any:
    """The command-line equivalent of a step's probe call, for the evidence pane."""

    def equivalent(step: CompiledStep, params: dict[str, Any]) -> str | None:
        probe = step.probe
        return probe.equivalent(ctx, probe.params.model_validate(params))

    return equivalent


async def stream_checklist(
    settings: Settings,
    runbook: CompiledRunbook,
    alert: Mapping[str, Any],
    *,
    ctx: ProbeContext | None = None,
) -> AsyncIterator[ChecklistEvent]:
    """Run `runbook` live; a context handed in is reused and left open (the app keeps one)."""
    own = ctx is None
    context = ctx or ProbeContext(settings)
    runner = LiveRunner(context)
    try:
        async for event in run_checklist(runbook, alert, runner, describe=describe(context)):
            yield event
    finally:
        await runner.cancel()
        if own:
            await context.aclose()


def problems_of(paths: list[Path]) -> list[Problem]:
    """Lint: every problem of every runbook file under paths."""
    problems: list[Problem] = []
    for file in runbook_files(paths):
        problems.extend(load_runbook(file).problems)
    return problems
