"""Live states of the golden alerts: one refresh asks each source once.

Per rule the source is `prometheus` when the rule is deployed there (found by name in
`/api/v1/rules`, one request for all rules) and `local` otherwise (an instant query per rule
and the `for` state machine of `local_eval`); the `alerts.source` setting can force either.
Besides the local rules, the same answer lists every rule Prometheus evaluates that
`alerts.from_prometheus` selects (`remote_rules`); they follow the local ones, in
Prometheus' order, and keep their rows while Prometheus cannot be asked.
When a source fails, the affected rules become `unknown` with the reason, and their last
known instances are kept, marked stale since the first failure.
Rules of one group that share a name (kube-prometheus' warning/critical pairs) are each
evaluated (`local_eval` knows a rule by file, group, name and line) and make one row: every
instance of theirs, each with its own rule's labels, under the rule in the most urgent state.
"""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal

from oncall.alerts import states
from oncall.alerts.join import Join, Joiner
from oncall.alerts.local_eval import LocalEvaluator
from oncall.alerts.remote_rules import RuleKey, rule_key
from oncall.alerts.states import NO_JOIN, Built
from oncall.backends.prometheus import PrometheusClient
from oncall.errors import BackendError
from oncall.model.alerts import AlertRule, RuleStatus, SourceName
from oncall.model.matchers import Selection
from oncall.runtime import collector_paused

if TYPE_CHECKING:
    import httpx

SourceSetting = Literal["auto", "prometheus", "local"]
#: A rule's range query for its sparkline is made at most this often (per rule). The app asks
#: more often (`oncall.tui.app.HISTORY_ASK_EVERY_S`); the asks in between cost no request.
HISTORY_QUERY_EVERY_S = 60.0
#: Which of the rules sharing a row (same group and name) the row shows: the most urgent.
_URGENCY = {"firing": 2, "pending": 1}
HISTORY_SPAN_S = 3600.0
HISTORY_POINTS = 60


@dataclass
class AlertEngine:
    prom: PrometheusClient
    rules: list[AlertRule]
    source: SourceSetting = "auto"
    local: LocalEvaluator = field(default_factory=LocalEvaluator)
    #: Which rules of Prometheus are listed besides `rules`; None: none of them.
    from_prometheus: Selection | None = None
    #: The rules only Prometheus has, as of its last answer.
    remote: list[AlertRule] = field(default_factory=list)
    #: The context (`contexts:`) the statuses are of, set on each as it is built (in the
    #: worker thread) rather than by a copy of each status on the event loop afterwards.
    context: str = ""
    last: dict[RuleKey, RuleStatus] = field(default_factory=dict)
    #: What the last refresh's answers warned of (Thanos: a store that did not answer): a
    #: note beside the states, not an error.
    warnings: list[str] = field(default_factory=list)
    #: Why the last refresh's `/api/v1/rules` request failed (None: it answered, or was not
    #: made): with no rule to mark unknown, it is the only sign that the list is incomplete.
    error: BackendError | None = None
    history: dict[str, list[tuple[float, float]]] = field(default_factory=dict)
    _history_at: dict[str, float] = field(default_factory=dict)
    #: The statuses the last refresh replaced in `last`, freed by the next one's worker.
    _retired: list[RuleStatus] = field(default_factory=list)

    async def refresh(
        self, now: float | None = None, *, join: Callable[[], Awaitable[Join]] | None = None
    ) -> list[RuleStatus]:
        """New states for every rule: at most one request for the deployed ones.

        `join`: this refresh's reads beside Prometheus' (Alertmanager's alerts, the
        acknowledgements), started by the caller before this and awaited once Prometheus
        answered; each status is then built once with its routing and acknowledgement.
        This is the refresh's one thread hop (docs/architecture.md, §3 "The three routes")."""
        now = time.time() if now is None else now
        built: Built | None = None
        prom_error: BackendError | None = None
        response: httpx.Response | None = None
        if self.source != "local":
            try:
                response = await self.prom.rules_response(kind="alert")
            except BackendError as exc:
                prom_error = exc
        joiner = Joiner(await join()) if join is not None else NO_JOIN
        if response is not None:
            # Thousands of instances cost hundreds of ms to decode and build: in one worker
            # thread, so the event loop (the board, key presses) runs meanwhile. Nothing
            # there writes to `self`; `last` is written below only, on the loop. What that
            # write replaces is kept alive and freed in the next refresh's worker
            # (`retired`): freeing 5,000 instances is 3-5 ms of CPU the loop would spend.
            # Alertmanager's answer, received beside Prometheus', is decoded there too.
            try:
                built, self._retired = await asyncio.to_thread(
                    self._stage, response, now, self._retired, joiner
                )
            except BackendError as exc:
                prom_error = exc
        elif joiner.pending:
            # No answer of Prometheus' to decode (it failed, or every rule is local): the
            # refresh's one hop decodes Alertmanager's alone.
            await asyncio.to_thread(_join_decoded, joiner)
        if built is not None:
            deployed, self.remote, statuses = built.deployed, built.remote, built.statuses
        else:
            deployed, statuses = {}, {}
            for rule in self.remote:  # kept from the last answer while Prometheus fails
                statuses[rule_key(rule)] = self._stale(rule, prom_error, now, joiner)
        by_local = []
        for rule in self.rules:
            if self._source_of(rule, deployed, prom_error) != "prometheus":
                by_local.append(rule)
            elif built is None:
                statuses[rule_key(rule)] = self._stale(rule, prom_error, now, joiner)
        if by_local:
            local = await self.local.evaluate(self.prom, by_local, now)
            urgency: dict[RuleKey, int] = {}
            for rule in by_local:
                # Rules of one group and name (a warning/critical pair) are one row with all
                # their instances, each with its own rule's labels; the row is the rule in the
                # most urgent state, so a firing warning is not shown as an inactive critical.
                key, own = rule_key(rule), _URGENCY.get(self.local.state_of(rule).state, 0)
                if key not in urgency or own > urgency[key]:
                    urgency[key] = own
                    statuses[key] = states.from_local(
                        rule,
                        local.get(rule.name, []),
                        self.last.get(key),
                        now,
                        context=self.context, joiner=joiner,
                    )  # fmt: skip
        self.last.update(statuses)
        self.warnings = self.prom.take_warnings()
        self.error = prom_error
        keys = dict.fromkeys(rule_key(rule) for rule in [*self.rules, *self.remote])
        return [statuses[key] for key in keys]

    def _stage(
        self, response: httpx.Response, now: float, retired: list[RuleStatus], joiner: Joiner
    ) -> tuple[Built, list[RuleStatus]]:
        """The refresh's one worker: the answers decoded (Prometheus' and, received beside
        it, Alertmanager's), every state Prometheus gives built, the collector paused
        throughout (`oncall.runtime`: the decoded answers are freed before any collection
        walks them), the last refresh's replaced statuses let go here."""
        with collector_paused():
            retired.clear()
            joiner.decode()  # Alertmanager's answer (never raises: a failure says so)
            groups = self.prom.decode_rules(response)
            built = states.from_groups(
                groups, self.rules, self.last, now, context=self.context, setting=self.source,
                from_prometheus=self.from_prometheus, joiner=joiner,
            )  # fmt: skip
            last = self.last
            return built, [last[key] for key in built.statuses if key in last]

    def _source_of(
        self, rule: AlertRule, deployed: Mapping[str, object], error: BackendError | None
    ) -> SourceName:
        return states.source_of(rule, self.source, deployed, error, self.last)

    def _stale(
        self, rule: AlertRule, error: BackendError | None, now: float, joiner: Joiner
    ) -> RuleStatus:
        assert error is not None  # only when Prometheus could not be asked
        previous = self.last.get(rule_key(rule))
        return states.stale(
            rule, "prometheus", error, previous, now, context=self.context, joiner=joiner
        )

    async def refresh_history(self, now: float | None = None) -> None:
        """Range queries for sparklines: per rule at most once a minute, ~60 points an hour.

        Only for the local rules: hundreds of rules from Prometheus would be hundreds of range
        queries a minute against the team's Prometheus; their rows show no sparkline."""
        now = time.time() if now is None else now
        due = [
            r
            for r in self.rules
            if now - self._history_at.get(r.name, -math.inf) >= HISTORY_QUERY_EVERY_S
        ]
        step = HISTORY_SPAN_S / HISTORY_POINTS
        results = await asyncio.gather(
            *(
                self.prom.query_range(r.expr, start=now - HISTORY_SPAN_S, end=now, step=step)
                for r in due
            ),
            return_exceptions=True,
        )
        for rule, result in zip(due, results, strict=True):
            if isinstance(result, BackendError):
                continue  # keep the old history; the state shows the error
            if isinstance(result, BaseException):
                raise result
            points: dict[float, float] = {}
            for series in result:
                for ts, value in series.points:
                    points[ts] = max(value, points.get(ts, -math.inf))
            self.history[rule.name] = sorted(points.items())
            self._history_at[rule.name] = now


def _join_decoded(joiner: Joiner) -> None:
    """Alertmanager's answer decoded in a worker, the collector paused (`oncall.runtime`)."""
    with collector_paused():
        joiner.decode()
