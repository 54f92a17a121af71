"""What the terminal app needs from the service layer, behind two small seams.

The app asks an `AlertsSource` for the golden alerts' states and a `ChecklistRunner` for an
alert's checklist events; `LiveAlerts` and `LiveChecklists` are the real ones (Prometheus and
the backends of `oncall.yaml`), tests hand in fakes. The value types a screen shows live in
`oncall.model`, which `oncall.tui` imports directly; the domain engines it may
not (docs/architecture.md §1, an import-linter contract).

The checklist machinery (runbook loader, expressions, probes) is imported when the first
checklist runs, not when the app starts: it is a third of a second of imports the first frame
does not need.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack
from typing import TYPE_CHECKING, Protocol

from oncall.errors import UsageError
from oncall.model.alerts import RuleStatus
from oncall.settings import Settings

if TYPE_CHECKING:
    from oncall.alerts.engine import AlertEngine
    from oncall.model.checklist_events import ChecklistEvent
    from oncall.probes.context import ProbeContext
    from oncall.service.acks import AckView
    from oncall.service.liveness import LivenessView
    from oncall.service.routing import AlertmanagerView

__all__ = ["AlertsSource", "ChecklistRunner", "LiveAlerts", "LiveChecklists", "NoRunbook"]


class NoRunbook(UsageError):
    """The alert has no runbook in any runbook folder."""


class AlertsSource(Protocol):
    """Where the app's alert states come from; `refresh` is called every `alerts.refresh`."""

    async def refresh(self) -> list[RuleStatus]:
        """Every loaded rule's state, in the packs' order."""
        ...

    async def history(self) -> dict[str, list[tuple[float, float]]]:
        """Recent values of each rule's expression for the board's sparklines: (unix time,
        value) points of the last hour, a minute apart. Rules without any are left out."""
        ...

    def warnings(self) -> tuple[str, ...]:
        """What the last refresh's answers warned of beside their data (Thanos: a store that
        did not answer, so the states may be partial), each once; () when nothing."""
        ...

    async def aclose(self) -> None:
        """Release connections; called once when the app exits."""
        ...


class ChecklistRunner(Protocol):
    """Runs one alert's checklist; the app consumes the events in a background worker."""

    def run(self, alert: str, status: RuleStatus | None) -> AsyncIterator[ChecklistEvent]:
        """Events of one run: `ChecklistPlanned` first, then StepStarted / StepResult."""
        ...

    def warm_up(self) -> None:
        """Get ready for the first run ahead of time (imports); blocking, called in a thread."""
        ...

    async def aclose(self) -> None:
        """Release the backend clients runs shared; called once when the app exits."""
        ...


class LiveAlerts:
    """The configured packs' states from the configured Prometheus, engine made on first use;
    with `alertmanager.url`, each firing instance's routing (silenced, inhibited) too."""

    def __init__(self, settings: Settings, *, context: str = "") -> None:
        self.settings = settings
        #: The context its statuses carry (`RuleStatus.context`; "" with one context only).
        self.context = context
        self._stack = AsyncExitStack()
        self._engine: AlertEngine | None = None
        self.alertmanager: AlertmanagerView | None = None  # made with the engine
        self.acks: AckView | None = None  # the team's acknowledgements, with it
        self.liveness: LivenessView | None = None  # whether each rule can fire, with it

    async def refresh(self) -> list[RuleStatus]:
        if self._engine is None:
            # In a thread: parsing the rule files with positions (~0.1 s of pure-Python YAML)
            # and making the HTTP client (its TLS context) would hold up the first frame. Bad
            # files raise ConfigError, and the next refresh tries again: fixing the file is enough.
            engine = await asyncio.to_thread(_open_engine, self.settings)
            engine.context = self.context
            self._stack.push_async_callback(engine.prom.aclose)
            from oncall.service.alerts import add_cluster_rules

            await add_cluster_rules(engine, self.settings)  # alerts.prometheus_rules: cluster
            self._engine = engine
            from oncall.service.liveness import LivenessView

            # In the background every alerts.liveness: the board never waits for it.
            liveness = LivenessView(engine.prom, every_s=self.settings.alerts.liveness, wait=False)
            self.liveness = liveness
            self._stack.push_async_callback(liveness.aclose)
            self.alertmanager = _alertmanager_view(self.settings)
            self._stack.push_async_callback(self.alertmanager.aclose)
            if self.alertmanager.enabled:  # acks are shown beside Alertmanager's routing
                self.acks = _ack_view(self.settings)
                self._stack.push_async_callback(self.acks.aclose)
        from oncall.service.alerts import refresh_joined

        statuses = await refresh_joined(
            self._engine, alertmanager=self.alertmanager, acks=self.acks
        )
        return await self._alive(statuses)

    async def _alive(self, statuses: list[RuleStatus]) -> list[RuleStatus]:
        """Each status with its rule's liveness, as of the latest round done."""
        return statuses if self.liveness is None else await self.liveness.annotate(statuses)

    def warnings(self) -> tuple[str, ...]:
        return () if self._engine is None else tuple(self._engine.warnings)

    async def history(self) -> dict[str, list[tuple[float, float]]]:
        if self._engine is None:
            return {}  # no refresh has opened the engine yet
        # The engine asks again for a rule at most once a minute: one range query per rule.
        await self._engine.refresh_history()
        return {name: list(points) for name, points in self._engine.history.items() if points}

    async def aclose(self) -> None:
        self._engine = None
        await self._stack.aclose()


class LiveChecklists:
    """Runbooks found and run live; all runs of one app share one `ProbeContext`."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self._ctx: ProbeContext | None = None

    async def run(self, alert: str, status: RuleStatus | None) -> AsyncIterator[ChecklistEvent]:
        # Deferred to the first run, and in a thread: ~0.35 s of imports (pydantic runbook
        # models, expressions, probes) that must neither delay the first frame nor block keys.
        await asyncio.to_thread(_import_checklist_machinery)
        from oncall.probes.context import ProbeContext
        from oncall.service.checklists import (
            alert_facts,
            find_runbook,
            load_checked,
            stream_checklist,
        )

        try:
            # File reads and expression compilation: off the event loop.
            labels = alert_facts(alert, status)["labels"]  # for runbooks matched by labels
            path = await asyncio.to_thread(find_runbook, self.settings, alert, labels)
        except UsageError as exc:
            raise NoRunbook(str(exc)) from exc
        runbook = await asyncio.to_thread(load_checked, path, self.settings)
        if self._ctx is None:
            self._ctx = ProbeContext(self.settings)
        facts = alert_facts(alert, status)
        async for event in stream_checklist(self.settings, runbook, facts, ctx=self._ctx):
            yield event

    def warm_up(self) -> None:
        """Import the checklist machinery and the Kubernetes REST client now. The app calls
        this once, in a thread, after its first alert states, so that neither the first frame
        nor the first states wait for it, and the first checklist does not either.

        The collector is paused meanwhile and the imported objects frozen after: a full
        collection in the middle of these imports walks hundreds of thousands of new objects
        while holding the interpreter lock (a 60-90 ms stall of the event loop,
        scripts/bench/tui.py), and every later one would walk them again. Module objects live
        as long as the process anyway.

        The pause is `oncall.runtime.frozen_after`'s, counted with the refreshes' own: a plain
        disable-then-enable pair here turned the collector on again in the middle of
        a refresh that had paused it (this runs in a thread, beside the refresh loops), and
        a refresh ending meanwhile turned it on in the middle of these imports.
        """
        from oncall.backends.kube import KubeReader
        from oncall.runtime import frozen_after

        with frozen_after():
            _import_checklist_machinery()
            KubeReader.import_client()

    async def aclose(self) -> None:
        ctx, self._ctx = self._ctx, None
        if ctx is not None:
            await ctx.aclose()


def _open_engine(settings: Settings) -> AlertEngine:
    """`oncall.service.alerts.open_alert_engine`, imported here, in the refresh's thread: the
    engine brings httpx (~0.2 s of imports on two cores), which the first frame does not need.
    """
    from oncall.service.alerts import open_alert_engine
    from oncall.service.liveness import LivenessView  # promql-parser too: here, not on the loop

    del LivenessView
    return open_alert_engine(settings)


def _alertmanager_view(settings: Settings) -> AlertmanagerView:
    """The board's Alertmanager reads (none asked without `alertmanager.url`): waited for at
    most half a second after Prometheus answered, so that a slow one never holds the board."""
    from oncall.service.routing import alertmanager_view

    return alertmanager_view(settings, grace=0.5)


def _ack_view(settings: Settings) -> AckView:
    """The board's read of the team's acknowledgements: at most half a second's wait too."""
    from oncall.service.acks import AckView

    return AckView.from_settings(settings, grace=0.5)


def _import_checklist_machinery() -> None:
    import oncall.probes.context
    import oncall.service.checklists  # noqa: F401
