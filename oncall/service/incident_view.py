"""Incidents for their readers: `oncall incident list|show|export`, `oncall note` and the
app's incidents screen (docs/architecture.md §3, the read path; a note is the one write).

`IncidentView` reads the team's incidents from Redis (`IncidentStore`), and for one incident
gathers what its timeline and postmortem draft are made of: Prometheus' `ALERTS` series and
its alerts' values over the incident (range queries), the at-firing verdicts, and the audit
log with its chain's verification. A backend that fails leaves a gap the draft names, never a
raise: the draft is still written, and says what it lacks. Everything read from the audit log
is masked with the settings' secrets (`LiveAudit`).
"""

from __future__ import annotations

import asyncio
import math
import re
import time
from collections.abc import Callable
from typing import Any, Protocol

from oncall.audit.chain import VerifyReport
from oncall.audit.records import NOTE_ACTION, Record, new_action_id
from oncall.backends import from_settings
from oncall.backends.incidents import IncidentStore
from oncall.backends.prometheus import PrometheusClient
from oncall.errors import BackendError, OncallError, UsageError
from oncall.incidents.assemble import Read, draft_of
from oncall.incidents.audit_events import GRACE_S
from oncall.incidents.postmortem import NOT_VOUCHED, Draft, Signal
from oncall.incidents.timeline import iso, ordered
from oncall.model.incidents import Incident
from oncall.model.metrics import Series
from oncall.model.verdicts import Verdict
from oncall.redaction import redact
from oncall.service.audit_view import LiveAudit
from oncall.settings import Settings

__all__ = ["NOT_VOUCHED", "Draft", "IncidentSource", "IncidentView", "iso", "ordered"]


class IncidentSource(Protocol):
    """What the incidents and timeline screens read (`IncidentView`; tests hand in their own)."""

    async def recent(self, *, limit: int = 200) -> list[Incident]: ...

    async def draft(self, incident: Incident) -> Draft: ...


#: The longest note: a paragraph, not a log dump.
NOTE_MAX_CHARS = 2000
#: Looked back before the incident opened: its alerts were pending before the first fired.
LOOKBACK_S = 600.0
#: How much earlier than its alert's first firing a verdict may be stamped (clocks of the
#: serve replica and of Prometheus differ) and still be of this incident.
VERDICT_SKEW_S = 30.0
#: The longest window whose raw `ALERTS` samples are read to date transitions (beyond it the
#: range query's step, then ≥ 43 s, dates them; and a days-long read of every evaluation
#: would weigh on Prometheus for a few seconds' precision).
RAW_SAMPLES_MAX_S = 6 * 3600.0
#: Range queries hold at most this many points (Prometheus refuses more than 11,000).
MAX_POINTS = 500
#: Alert values charted at most (one range query each).
MAX_SIGNALS = 12
_COMPARISON = re.compile(
    r"\s*(>=|<=|==|!=|>|<)\s*(?:bool\s+)?(-?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?)\s*$"
)
#: (start, end, step) of the range queries, epoch s.
_Window = tuple[float, float, float]
_ALERT_NAME = re.compile(r"^[A-Za-z_:][A-Za-z0-9_:]*$")


def _step(span: float) -> float:
    return max(1.0, float(math.ceil(span / MAX_POINTS)))


def _worst(series: list[Series], low: bool) -> tuple[tuple[float, ...], float | None]:
    """The worst value across series at each timestamp (the highest, or the lowest when low
    is bad), and when the worst of them was."""
    pick = min if low else max
    points: dict[float, float] = {}
    for one in series:
        for ts, value in one.points:
            if not math.isnan(value):
                points[ts] = pick(value, points.get(ts, value))
    ordered_points = sorted(points.items())
    if not ordered_points:
        return (), None
    at, _ = pick(ordered_points, key=lambda item: item[1])
    return tuple(v for _, v in ordered_points), at


class IncidentView:
    """The incidents of the settings' Redis, and the evidence of one (raises BackendError
    only from `list`, `get` and `note`: the store is the one thing with no fallback)."""

    def __init__(self, settings: Settings, *, now: Callable[[], float] = time.time) -> None:
        self.settings = settings
        self.now = now
        self.store = IncidentStore(from_settings.redis_client(settings.redis))

    async def aclose(self) -> None:
        await self.store.aclose()

    async def recent(self, *, limit: int = 200) -> list[Incident]:
        return await self.store.recent(limit=limit)

    async def get(self, incident_id: str) -> Incident:
        """The incident `incident_id`; UsageError naming it when the store has none."""
        found = await self.store.get(incident_id)
        if found is None:
            raise UsageError(
                f"no incident {incident_id!r} in Redis {self.store.target} "
                "(`oncall incident list` shows the ids)"
            )
        return found

    def _for(self, incident: Incident) -> Settings:
        if incident.context and incident.context in self.settings.contexts:
            return self.settings.for_context(incident.context)
        return self.settings

    async def note(self, incident_id: str, text: str) -> tuple[Record, str | None]:
        """Append a note on the incident to the audit log (redacted like every record) and
        copy it to the team Stream; the record, and why the copy failed (None if it did not)."""
        text = " ".join(text.split())
        if not text:
            raise UsageError("the note is empty: say what happened or what you did")
        if len(text) > NOTE_MAX_CHARS:
            raise UsageError(f"the note has {len(text)} characters; at most {NOTE_MAX_CHARS}")
        incident = await self.get(incident_id)
        settings = self._for(incident)
        audit = LiveAudit(settings)
        record = await asyncio.to_thread(
            audit.log.append,
            action_id=new_action_id(),
            transition="noted",
            action=NOTE_ACTION,
            target={"kind": "Incident", "name": incident.id},
            context=settings.context.name,
            # Patterns too (a token pasted in), beside the settings' secrets the log masks.
            detail={"text": redact(text)},
        )
        stream = settings.audit.redis_stream
        if not stream:
            return record, "audit.redis_stream is off"
        from oncall.remediation.audit_mirror import mirror_with_client

        try:
            async with from_settings.redis_client(settings.redis) as client:
                await mirror_with_client(client, stream, record)
        except BackendError as exc:
            return record, str(audit.public(str(exc)))
        return record, None

    async def draft(self, incident: Incident) -> Draft:
        """Everything the timeline and the postmortem draft are made of."""
        settings = self._for(incident)
        now = self.now()
        end = incident.closed_at + 60 if incident.closed_at is not None else now
        start = incident.opened_at - LOOKBACK_S
        step = _step(end - start)
        gaps: list[str] = []
        prom = from_settings.prometheus_client(settings.prometheus)
        try:
            window = (start, end, step)
            series, samples = await self._alerts_series(prom, incident, window, gaps)
            signals = await self._signals(prom, incident, window, gaps)
        finally:
            await prom.aclose()
        verdicts = await self._verdicts(settings, incident, end, gaps)
        lines, report, problem = await self._audit(settings)
        return draft_of(Read(
            incident, start, end, step, now, alerts=series, alert_samples=samples,
            signals=signals, verdicts=verdicts,
            lines=lines, report=report, audit_problem=problem, gaps=gaps,
        ))  # fmt: skip

    async def _alerts_series(
        self, prom: PrometheusClient, incident: Incident, window: _Window, gaps: list[str]
    ) -> tuple[list[Series], list[Series]]:
        """The `ALERTS` series of the members' alerts over the window (at its step), and their
        samples as written (when each transition was evaluated; none when that read fails:
        the transitions are then as the step shows them)."""
        start, end, step = window
        names = sorted({m.alert for m in incident.members if _ALERT_NAME.match(m.alert)})
        if not names:
            return [], []
        selector = f'ALERTS{{alertname=~"{"|".join(names)}"}}'
        try:
            series = await prom.query_range(selector, start=start, end=end, step=step)
        except BackendError as exc:
            gaps.append(f"Prometheus' ALERTS history could not be read ({exc})")
            return [], []
        if end - start > RAW_SAMPLES_MAX_S:
            return series, []  # every evaluation of days: the step's dating is close enough
        try:
            samples = await prom.raw_samples(selector, window_s=end - start, at=end)
        except BackendError:
            samples = []
        return series, samples

    async def _signals(
        self, prom: PrometheusClient, incident: Incident, window: _Window, gaps: list[str]
    ) -> list[Signal]:
        start, end, step = window
        wanted = list(dict.fromkeys(m.alert for m in incident.members))[:MAX_SIGNALS]
        try:
            groups = await prom.rules(kind="alert")
        except BackendError as exc:
            gaps.append(f"the alert rules could not be read for the charts ({exc})")
            return []
        exprs: dict[str, str] = {}
        for group in groups:
            for rule in group.get("rules") or []:
                name, query = rule.get("name"), rule.get("query")
                if name in wanted and isinstance(query, str):
                    exprs.setdefault(name, query)
        signals: list[Signal] = []
        for name in wanted:
            if name not in exprs:
                continue
            found = _COMPARISON.search(exprs[name])
            expr = exprs[name][: found.start()] if found else exprs[name]
            threshold = (found.group(1), float(found.group(2))) if found else None
            try:
                series = await prom.query_range(expr, start=start, end=end, step=step)
            except BackendError as exc:
                gaps.append(f"the values of {name} could not be read ({exc})")
                continue
            low = threshold is not None and threshold[0] in ("<", "<=")
            # The worst of this incident, not of an earlier episode in the lookback.
            since = incident.opened_at - step
            series = [Series(s.labels, [p for p in s.points if p[0] >= since]) for s in series]
            values, worst_at = _worst(series, low)
            signals.append(Signal(name, expr, values, threshold, worst_at))
        return signals

    async def _verdicts(
        self, settings: Settings, incident: Incident, end: float, gaps: list[str]
    ) -> list[Verdict]:
        from oncall.service.verdicts import VerdictReader

        reader = VerdictReader.from_settings(settings)
        found: list[Verdict] = []
        try:
            for name in dict.fromkeys(m.alert for m in incident.members):
                # A verdict runs at a firing: one from before this alert's first firing here
                # (less a clock's skew between hosts) is of an earlier episode.
                fired = min(m.first_firing for m in incident.members if m.alert == name)
                for verdict in await reader.list(alert=name, since=incident.opened_at - GRACE_S):
                    ran = verdict.get("ran_at")
                    context = verdict.get("context")
                    if not isinstance(ran, int | float) or ran > end + GRACE_S:
                        continue
                    if ran < fired - VERDICT_SKEW_S:
                        continue
                    if incident.context and context and context != incident.context:
                        continue
                    found.append(verdict)
        except OncallError as exc:
            gaps.append(f"the at-firing verdicts could not be read ({exc})")
        finally:
            await reader.aclose()
        return sorted(found, key=lambda v: float(v.get("ran_at") or 0))

    async def _audit(self, settings: Settings) -> tuple[list[Any], VerifyReport | None, str | None]:
        audit = LiveAudit(settings)
        try:
            lines = await asyncio.to_thread(audit.lines)
            report = await audit.check_anchored()
        except OncallError as exc:
            return [], None, str(exc)
        return lines, report, None
