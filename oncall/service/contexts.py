"""Several clusters in one app: one source set per context, and a door that keeps them apart.

With `contexts:` and no `--context`, the app shows every context at once. Each context gets
its own `LiveAlerts`, `LiveChecklists` and `LiveRemediations`, made from that context's
settings (`Settings.for_context`), so each has its own Prometheus, Kubernetes, Redis and vLLM
clients and its own guards. Alert states carry their context (`RuleStatus.context`), the app
knows them by key (`eu/LLMHighP99Latency`), and everything an alert leads to goes through the
runner of the context in its key: its checklist's facts come from that context's backends,
its remediations run with that context's clients (and the executor refuses a plan of another
context, `oncall.remediation.context_guard`).

With one context (none configured, or one selected) the sets hold one entry, keyed "", and
nothing is renamed: keys are the bare alert names, as before contexts.
"""

from __future__ import annotations

import dataclasses
from collections.abc import AsyncIterator, Mapping
from typing import TYPE_CHECKING

from oncall.model.alerts import RuleStatus, context_key, split_key
from oncall.service.sources import AlertsSource, ChecklistRunner, LiveAlerts, LiveChecklists
from oncall.settings import Settings

if TYPE_CHECKING:
    # The remediation door and the write path's types (eight frozen dataclasses, ≈ 12 ms on
    # two cores) are imported when first used, as the app imports them: not for the first frame.
    from oncall.model.checklist_events import ChecklistEvent
    from oncall.model.write_path import Confirm, Progress, RemediationResult
    from oncall.service.remediation import RemediationRequest, RemediationRunner

__all__ = [
    "ContextAlerts",
    "ContextChecklists",
    "ContextRemediations",
    "live_alert_sources",
    "live_checklists",
    "live_remediations",
    "per_context_settings",
]


def per_context_settings(settings: Settings) -> dict[str, Settings]:
    """{context: its settings} for a board of every context; {"": settings} for one."""
    if settings.contexts and settings.selected_context is None:
        return {name: settings.for_context(name) for name in settings.contexts}
    return {"": settings}


class ContextAlerts:
    """One context's alert source, its states and sparklines labelled with the context."""

    def __init__(self, context: str, source: AlertsSource) -> None:
        self.context = context
        self.source = source

    async def refresh(self) -> list[RuleStatus]:
        statuses = await self.source.refresh()
        # A live source labels its statuses as it builds them (`LiveAlerts(context=)`): a
        # copy of each here was ~2 ms of the event loop per context and refresh at 200 rules.
        return [s if s.context == self.context else dataclasses.replace(s, context=self.context)
                for s in statuses]  # fmt: skip

    def warnings(self) -> tuple[str, ...]:
        return self.source.warnings()

    async def history(self) -> dict[str, list[tuple[float, float]]]:
        found = await self.source.history()
        return {context_key(self.context, name): points for name, points in found.items()}

    async def aclose(self) -> None:
        await self.source.aclose()


def live_alert_sources(settings: Settings) -> dict[str, AlertsSource]:
    """The live alert source of each context; the app runs one refresh loop per entry."""
    contexts = per_context_settings(settings)
    if list(contexts) == [""]:
        return {"": LiveAlerts(settings)}
    return {name: ContextAlerts(name, LiveAlerts(s, context=name)) for name, s in contexts.items()}


class ContextChecklists:
    """Runs an alert's checklist with the runner of the context in its key."""

    def __init__(self, runners: Mapping[str, ChecklistRunner]) -> None:
        self.runners = dict(runners)

    def runner_of(self, key: str, status: RuleStatus | None) -> tuple[ChecklistRunner, str]:
        context, name = split_key(key)
        if status is not None and status.context != context:
            raise ValueError(f"alert {key} carries the state of context {status.context!r}")
        if context not in self.runners:
            raise ValueError(f"alert {key}: no context {context!r} on this board")
        return self.runners[context], name

    async def run(self, alert: str, status: RuleStatus | None) -> AsyncIterator[ChecklistEvent]:
        runner, name = self.runner_of(alert, status)
        async for event in runner.run(name, status):
            yield event

    def warm_up(self) -> None:
        for runner in self.runners.values():  # imports: the first pays, the others are quick
            runner.warm_up()

    async def aclose(self) -> None:
        for runner in self.runners.values():
            await runner.aclose()


def live_checklists(settings: Settings) -> ChecklistRunner:
    contexts = per_context_settings(settings)
    if list(contexts) == [""]:
        return LiveChecklists(settings)
    return ContextChecklists({name: LiveChecklists(s) for name, s in contexts.items()})


class ContextRemediations:
    """Runs a proposal with the remediation runner of its alert's context, and no other."""

    def __init__(self, runners: Mapping[str, RemediationRunner]) -> None:
        self.runners = dict(runners)

    async def run(
        self, request: RemediationRequest, confirm: Confirm, progress: Progress
    ) -> RemediationResult:
        from oncall.model.write_path import RemediationResult

        alert = request.alert
        context, name = split_key(alert.name)
        status = alert.status
        if status is not None and status.context != context:
            why = f"alert {alert.name} carries the state of context {status.context!r}"
            return RemediationResult("not planned", why)
        runner = self.runners.get(context)
        if runner is None:
            return RemediationResult("not planned", f"no context {context!r} on this board")
        bare = dataclasses.replace(request, alert=dataclasses.replace(alert, name=name))
        return await runner.run(bare, confirm, progress)


def live_remediations(settings: Settings, *, read_only_flag: bool) -> RemediationRunner:
    from oncall.service.remediation import LiveRemediations

    contexts = per_context_settings(settings)
    if list(contexts) == [""]:
        return LiveRemediations(settings, read_only_flag=read_only_flag)
    return ContextRemediations(
        {name: LiveRemediations(s, read_only_flag=read_only_flag) for name, s in contexts.items()}
    )
