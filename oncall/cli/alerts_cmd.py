"""`oncall alerts [-o table|json] [--watch] [--match SELECTION]`: the alerts' states, headless.

Every rule of the packs and `alerts.files`, and those Prometheus evaluates that
`alerts.from_prometheus` selects. `--match` keeps the rows whose labels match its matchers
(`severity="page"`, `team=~"infer.*"`) and whose text has its words; a selection that keeps
nothing says so on stderr (the exit code is still the one of the rows kept).

With `alertmanager.url`, each firing alert says how many of its instances are active,
silenced (by whom, until when, why: in `-o json`) or inhibited (by which alerts), from one
`GET /api/v2/alerts`; Alertmanager down says `unknown: REASON` there and changes nothing else
(not the exit code either: the states are Prometheus').

A rule whose last evaluation failed (Prometheus' `health: err`) keeps the state Prometheus
reports, with `evaluation failed: LASTERROR` as its note (`health`, `last_error` in `-o json`).
Warnings beside an answer (Thanos with a store down) are printed as notes (`warnings` in JSON)
and change nothing else.

A rule that cannot fire here (`alerts.liveness`: its metric or label values do not exist, its
rate window is under two scrape intervals) shows `SILENT` where it would show `INACTIVE`,
with the reason as its note, and `liveness` (`state`: live, silent or unknown, `reasons`) in
`-o json`, where `state` stays Prometheus' own ("inactive"). It changes no exit code:
`oncall rules check` is the command for CI.

Exit codes: 1 when an alert fires, 3 when any alert's state is not known because of the
backend (unreachable, 401/403 "auth", an HTML login page or other "bad payload": a script must
never read "all well" then) or Prometheus' rules could not be read while
`alerts.from_prometheus` lists them (Mimir without its tenant header: 401 `no org id`), 2 for
bad settings or rule files (every problem with FILE:LINE:COL), 0 otherwise. The Prometheus URL
is shown redacted (it may hold a password).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import sys
import time
from typing import TYPE_CHECKING, Any

from oncall.cli.config_cmd import load_from_args
from oncall.errors import EXIT_FOUND, EXIT_INCOMPLETE, UsageError
from oncall.model.alertmanager import InstanceRouting, RuleRouting, Silence
from oncall.model.alerts import RuleStatus
from oncall.model.matchers import MatcherError, Selection, parse_selection, status_matches
from oncall.redaction import redact
from oncall.service.acks import AckView
from oncall.service.alerts import AlertsReport, alert_engine, refresh_joined
from oncall.service.incidents import IncidentsView, instance_key
from oncall.service.liveness import LivenessView
from oncall.service.routing import alertmanager_view

if TYPE_CHECKING:
    from oncall.alerts.engine import AlertEngine
    from oncall.service.routing import AlertmanagerView
    from oncall.settings import Settings


def _duration(seconds: float | None) -> str:
    if seconds is None:
        return ""
    whole = round(seconds)
    hours, rest = divmod(whole, 3600)
    minutes, secs = divmod(rest, 60)
    if hours:
        return f"{hours}h{minutes:02d}m"
    return f"{minutes}m{secs:02d}s" if minutes else f"{secs}s"


def when(status: RuleStatus, now: float) -> str:
    if status.state == "pending":
        return f"fires in {_duration(status.fires_in_s)}"
    if status.state == "firing":
        return f"firing for {_duration(status.firing_for_s)}"
    if status.stale_since is not None:
        return f"stale {_duration(now - status.stale_since)}"
    return ""


def _value(value: float | None, unit: str | None = None) -> str:
    """The value in the unit its rule compares in: '2.25s', '9.1%', or '2'."""
    if value is None:
        return ""
    if unit == "%" and math.isfinite(value):
        return f"{value * 100:.4g}%"
    return f"{value:.4g}s" if unit == "s" else f"{value:.4g}"


def render_table(report: AlertsReport) -> str:
    now = report.evaluated_at
    am = report.alertmanager is not None
    header: tuple[str, ...] = ("ALERT", "SEVERITY", "STATE", "VALUE", "WHEN", "SOURCE", "NOTE")
    header += ("ALERTMANAGER",) if am else ()
    rows: list[tuple[str, ...]] = [header]
    for s in report.statuses:
        silent = s.silent and s.liveness is not None
        note = s.error or (s.liveness.text if silent and s.liveness else "")
        state = "SILENT" if silent else s.state.upper()
        row = (s.rule.name, s.rule.severity, state, _value(s.value, s.rule.unit),
               when(s, now), s.source, note[:60])  # fmt: skip
        rows.append((*row, (s.routing.text() if s.routing else "")[:60]) if am else row)
    widths = [max(len(r[i]) for r in rows) for i in range(len(header))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in rows]
    stamp = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(now))
    head = f"{stamp}  prometheus {redact(report.prometheus)}"
    if report.alertmanager is not None:
        head += f"  alertmanager {redact(report.alertmanager)}"
    # Thanos' partial answers: shown, not failed on (the states it did send are used).
    notes = [f"note: prometheus warns: {redact(w)}\n" for w in report.warnings]
    notes += [f"error: {report.error}\n"] if report.error else []
    return head + "\n" + "".join(notes) + "\n".join(lines) + "\n"


def _silence(s: Silence) -> dict[str, Any]:
    return {
        "id": s.id, "created_by": s.created_by, "comment": s.comment, "starts_at": s.starts_at,
        "ends_at": s.ends_at, "state": s.state, "matchers": s.matchers_text(),
    }  # fmt: skip


def routing_json(r: InstanceRouting | None) -> dict[str, Any] | None:
    """An instance's routing in `-o json`: state, the silences (who, until, why), inhibitors."""
    if r is None:
        return None
    known = {s.id for s in r.silences}
    # A silence made since the silences list was read is known by its id alone.
    silences = [_silence(s) for s in r.silences] + [
        {"id": i} for i in r.silenced_by if i not in known
    ]
    inhibitors = [{"fingerprint": i.fingerprint, "labels": i.labels} for i in r.inhibited_by]
    return {
        "state": r.state, "silenced_by": silences, "inhibited_by": inhibitors,
        "muted_by": list(r.muted_by), "reason": r.reason, "error": r.error,
    }  # fmt: skip


def rule_routing_json(r: RuleRouting | None) -> dict[str, Any] | None:
    """A rule's counts in `-o json`; `ack` is the acknowledgement (null: none)."""
    if r is None:
        return None
    ack = None if r.ack is None else {"by": r.ack.by, "at": r.ack.at, "note": r.ack.note}
    return {
        "active": r.active, "silenced": r.silenced, "inhibited": r.inhibited, "muted": r.muted,
        "other": r.other,
        "unknown": r.unknown, "reason": r.reason, "error": r.error, "ack": ack,
        "ack_error": r.ack_error,
    }  # fmt: skip


def _instance(i: Any, incident: str | None = None) -> dict[str, Any]:
    return {
        "state": i.state, "labels": i.labels, "value": i.value, "active_since": i.active_since,
        "fires_in_s": i.fires_in_s, "firing_for_s": i.firing_for_s,
        "last_evaluation": i.last_evaluation, "stale_since": i.stale_since, "error": i.error,
        "alertmanager": routing_json(i.routing), "incident": incident,
    }  # fmt: skip


def _incidents_of(report: AlertsReport, s: RuleStatus) -> list[str | None]:
    """Each instance's open incident (`AlertsReport.incidents`), None when in none."""
    return [report.incidents.get(instance_key(s.context, s.rule.name, i.labels))
            for i in s.instances]  # fmt: skip


def render_json(report: AlertsReport) -> str:
    alerts = [
        {
            "name": s.rule.name,
            "severity": s.rule.severity,
            "state": s.state,
            "source": s.source,
            "value": s.value,
            "unit": s.rule.unit,
            "fires_in_s": s.fires_in_s,
            "firing_for_s": s.firing_for_s,
            "last_evaluation": s.last_evaluation,
            "stale_since": s.stale_since,
            "error": s.error,
            "health": s.health,
            "last_error": s.last_error,
            "for_s": s.rule.for_s,
            "expr": s.rule.expr,
            "summary": s.rule.annotations.get("summary"),
            "runbook": s.rule.annotations.get("runbook"),
            "group": s.rule.group,
            "labels": s.rule.labels,
            "annotations": s.rule.annotations,
            "file": f"{s.rule.file}:{s.rule.line}" if s.rule.line else s.rule.file,
            "instances": [
                _instance(i, incident)
                for i, incident in zip(s.instances, _incidents_of(report, s), strict=True)
            ],
            # The first incident of its instances: which incident the alert is part of.
            "incident": next((i for i in _incidents_of(report, s) if i), None),
            "alertmanager": rule_routing_json(s.routing),
            "liveness": None
            if s.liveness is None
            else {"state": s.liveness.state, "reasons": list(s.liveness.reasons)},
        }
        for s in report.statuses
    ]
    prometheus = redact(report.prometheus)
    am = redact(report.alertmanager) if report.alertmanager is not None else None
    body = {"evaluated_at": report.evaluated_at, "prometheus": prometheus, "alertmanager": am}
    body["warnings"] = [redact(w) for w in report.warnings]
    body["error"] = report.error
    body["alerts"] = alerts
    return json.dumps(body, indent=2)


def exit_code(report: AlertsReport) -> int:
    if report.unreachable or any(s.incomplete for s in report.statuses):
        return EXIT_INCOMPLETE
    return EXIT_FOUND if report.firing else 0


def _selection(text: str | None) -> Selection:
    try:
        return parse_selection(text or "")
    except MatcherError as exc:
        raise UsageError(f"--match {text!r}: {exc}") from exc


def _say_if_empty(
    statuses: list[RuleStatus], kept: list[RuleStatus], text: str | None, error: str | None
) -> None:
    if kept:
        return
    if statuses:
        print(f"oncall alerts: no alert of {len(statuses)} matches {text!r}", file=sys.stderr)
    elif error:
        print(f"oncall alerts: no alerting rules known: {error}", file=sys.stderr)
    else:
        message = (
            "oncall alerts: no alerting rules (no packs or files with alerts, and none from "
            "Prometheus: see alerts.packs, alerts.files, alerts.from_prometheus)"
        )
        print(message, file=sys.stderr)


async def _run(args: argparse.Namespace) -> int:
    selection = _selection(getattr(args, "match", None))
    settings = load_from_args(args).settings
    # grace None: the answer waits for Alertmanager too, bounded by its timeout.
    view = alertmanager_view(settings, grace=None)
    # The acknowledgements are shown beside Alertmanager's routing, when there is one.
    acks = AckView.from_settings(settings, grace=None) if view.enabled else None
    # The grouping runs after each refresh here too: the JSON names each instance's incident.
    incidents = IncidentsView(settings)
    try:
        async with alert_engine(settings) as engine:
            liveness = LivenessView(engine.prom, every_s=settings.alerts.liveness, wait=True)
            try:
                return await _loop(
                    args, settings, engine, view, selection, acks=acks, liveness=liveness,
                    incidents=incidents,
                )  # fmt: skip
            finally:
                await liveness.aclose()
    finally:
        await incidents.aclose()
        await view.aclose()
        if acks is not None:
            await acks.aclose()


async def _loop(
    args: argparse.Namespace,
    settings: Settings,
    engine: AlertEngine,
    view: AlertmanagerView,
    selection: Selection,
    *,
    acks: AckView | None = None,
    liveness: LivenessView | None = None,
    incidents: IncidentsView | None = None,
) -> int:
    while True:
        now = time.time()
        every = await refresh_joined(engine, now, alertmanager=view, acks=acks)
        # Not when Prometheus did not answer: the round would wait out the same timeouts.
        if liveness is not None and engine.error is None and not any(s.unreachable for s in every):
            every = await liveness.annotate(every)
        statuses = [s for s in every if status_matches(selection, s)]
        membership: dict[str, str] = {}
        if incidents is not None and engine.error is None:
            await incidents.after_refresh(every)  # every rule: the filter shows, not groups
            membership = incidents.membership()
        # Without Prometheus' rules the ones only it has are missing (when any are listed).
        listing = engine.error is not None and engine.from_prometheus is not None
        error = str(engine.error) if listing else None
        _say_if_empty(every, statuses, getattr(args, "match", None), error)
        am_url = settings.alertmanager.url
        report = AlertsReport(
            statuses, now, settings.prometheus.url, am_url, warnings=tuple(engine.warnings),
            error=error, incidents=membership,
        )  # fmt: skip
        text = render_json(report) if args.output == "json" else render_table(report)
        if args.watch and sys.stdout.isatty():
            # Redraw in place, like watch(1): the one escape sequence of our own, written
            # past the redacting stream (which shows every other one as text).
            sys.stdout.flush()
            raw = getattr(sys.stdout, "inner", sys.stdout)
            raw.write("\x1b[H\x1b[2J")
        print(text, flush=True)
        if not args.watch:
            return exit_code(report)
        await asyncio.sleep(max(0.0, settings.alerts.refresh - (time.time() - now)))


def run(args: argparse.Namespace) -> int:
    return asyncio.run(_run(args))
