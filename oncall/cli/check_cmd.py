"""`oncall check ALERT [-o table|json] [--record FILE] [--chart [WINDOW]]`: one alert's checklist.

The alert's current state, value and labels are read first (one refresh of the alert engine);
then the checklist runs and each step is printed as it finishes (table) or all at once (json).
Exit codes: 1 when a step fails, else 3 when a step is unknown or in error (a backend did not
answer, or the runbook broke at run time), else 0. 2 for bad settings or a broken runbook.

`--chart` (window 15m, 1h — the default —, 6h or 24h) adds the incident screen's charts: the
alert's expression with its threshold, pending/firing periods and oncall actions, and each
PromQL evidence value of the steps that did not pass; as text for a headless terminal
(`oncall.model.chart`), or as their series under `charts` with `-o json`.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from oncall.cli.config_cmd import load_from_args
from oncall.errors import (
    EXIT_FOUND,
    EXIT_INCOMPLETE,
    EXIT_OK,
    BackendError,
    OncallError,
    UsageError,
)
from oncall.model.checklist_events import StepResult, findings_line
from oncall.probes.context import ProbeContext
from oncall.probes.prometheus import prometheus_client
from oncall.runtime import start_up_done
from oncall.service.alerts import alert_engine
from oncall.service.checklists import alert_facts, find_runbook, load_checked, stream_checklist
from oncall.settings import Settings

if TYPE_CHECKING:
    from oncall.model.chart import ChartData

#: An alert name as Prometheus's rule files allow it (a metric name); it becomes a file name.
ALERT_NAME = re.compile(r"[A-Za-z_:][A-Za-z0-9_:]{0,199}")
SYMBOL = {"ok": "✓", "warn": "!", "fail": "✗", "error": "E", "unknown": "?", "skipped": "-"}


async def _alert(settings: Settings, name: str, ctx: ProbeContext) -> dict[str, Any]:
    """The alert's facts, read through the checklist's own Prometheus client: one client and
    one connection for the whole check (a second client cost a fresh process its making)."""
    try:
        prom = await prometheus_client(ctx)
        async with alert_engine(settings, prom) as engine:
            statuses = await engine.refresh()
    except (BackendError, OncallError):
        return alert_facts(name, None)
    status = next((s for s in statuses if s.rule.name == name), None)
    return alert_facts(name, status)


def _line(result: StepResult) -> str:
    mark = SYMBOL.get(result.status, "?")
    text = result.summary or result.reason or ""
    head = f"{mark} {result.status.upper():<7} {result.id:<22} {result.duration_s:6.2f}s  {text}"
    lines = [head]
    if result.reason and result.reason not in text:  # e.g. the absent_ok of a judged step
        lines.append(f"      why: {result.reason}")
    for item in result.evidence:
        threshold = "" if item.threshold is None else f" (threshold {_num(item.threshold)})"
        unit = f" {item.unit}" if item.unit else ""
        lines.append(f"      {item.label}: {_num(item.value)}{unit}{threshold}")
    for proposal in result.proposals:
        params = " ".join(f"{k}={v}" for k, v in proposal.params.items())
        note = f"  [not actionable: {proposal.error}]" if proposal.error else ""
        lines.append(f"      → propose {proposal.action} {params}: {proposal.title}{note}")
    return "\n".join(lines)


def _num(value: object) -> str:
    if isinstance(value, float):
        return f"{value:,.0f}" if abs(value) >= 10_000 else f"{value:.4g}"
    return "n/a" if value is None else str(value)


def _record(file: Path, runbook: str, alert: dict[str, Any], results: list[StepResult]) -> None:
    """`--record FILE`: this run as a runbook test case (see `oncall.checklist.recording`)."""
    from oncall.checklist.recording import recorded_case, write_record

    try:
        write_record(file, runbook, recorded_case(alert, results, time.time()))
    except OSError as exc:  # a folder, no permission, a name too long: the operator's path
        raise UsageError(f"--record {file}: cannot write it: {exc.strerror or exc}") from None
    print(f"recorded to {file}: oncall runbook test {file}", file=sys.stderr)


def run(args: argparse.Namespace) -> int:
    if not ALERT_NAME.fullmatch(args.alert):
        # Checked before it names a runbook file: "../x", NUL or 5,000 characters are no alert.
        shown = repr(args.alert) if len(args.alert) <= 60 else f"{args.alert[:40]!r}…"
        raise UsageError(f"{shown} is not an alert name (letters, digits, _ and :)")
    loaded = load_from_args(args)
    settings = loaded.settings
    runbook = load_checked(find_runbook(settings, args.alert), settings)
    start_up_done()  # what start-up made lives as long as the process: frozen (oncall.runtime)
    return asyncio.run(_run(settings, runbook, args))


async def _run(settings: Settings, runbook: Any, args: argparse.Namespace) -> int:
    async with ProbeContext(settings) as ctx:  # the backends' clients, closed at the end
        return await _run_in(settings, runbook, args, ctx)


async def _run_in(
    settings: Settings, runbook: Any, args: argparse.Namespace, ctx: ProbeContext
) -> int:
    started = time.perf_counter()
    alert = await _alert(settings, args.alert, ctx)
    table = args.output == "table"
    if table:
        value = "" if alert["value"] is None else f" value {_num(alert['value'])}"
        print(f"{args.alert}: {alert['state']}{value} — runbook {runbook.path}", flush=True)
    results: dict[str, StepResult] = {}
    checklist_started = time.perf_counter()
    async for event in stream_checklist(settings, runbook, alert, ctx=ctx):
        if isinstance(event, StepResult):
            results[event.id] = event
            if table:
                print(_line(event), flush=True)
    ordered = [results[s.id] for s in runbook.spec.steps]
    checklist_s = time.perf_counter() - checklist_started
    elapsed = time.perf_counter() - started
    proposals = [p for r in ordered for p in r.proposals]
    window = getattr(args, "chart", None)
    charts = await _charts(settings, args.alert, ordered, window) if window else None
    if table:
        print(f"{findings_line(ordered)} — {len(proposals)} proposal(s), {elapsed:.2f}s")
        if charts is not None:
            print(_chart_text(charts))
    else:
        body = {
            "alert": alert,
            "runbook": runbook.path,
            "findings": findings_line(ordered),
            "duration_s": round(elapsed, 3),  # alert state + checklist
            "checklist_s": round(checklist_s, 3),
            "steps": [r.to_json() for r in ordered],
            "proposals": [p for r in ordered for p in r.to_json()["proposals"]],
        }
        if charts is not None:
            body["charts"] = [c.to_json() for c in charts]
        json.dump(body, sys.stdout, indent=2, default=str)
        sys.stdout.write("\n")
    if getattr(args, "record", None):
        _record(Path(args.record), runbook.path, alert, ordered)
    statuses = {r.status for r in ordered}
    if "fail" in statuses:
        return EXIT_FOUND
    if statuses & {"unknown", "error"}:
        return EXIT_INCOMPLETE
    return EXIT_OK


async def _charts(
    settings: Settings, alert: str, results: list[StepResult], window: str
) -> list[ChartData]:
    """The alert's chart, then one per PromQL evidence value of each step that did not pass."""
    from oncall.service.alerts import load_packs
    from oncall.service.charts import WINDOWS, LiveCharts, evidence_query, evidence_threshold

    seconds = WINDOWS[window]
    rule = next((r for r in load_packs(settings).rules if r.name == alert), None)
    charts = LiveCharts(settings)
    try:
        out = [await charts.alert_chart(rule, seconds)] if rule is not None else []
        for result in results:
            if result.status in ("ok", "skipped"):
                continue
            for item in result.evidence:
                query = evidence_query(result, item)
                if query is None:
                    continue
                limit = evidence_threshold(item)
                title = f"{result.id}: {item.label}"
                out.append(await charts.query_chart(title, query, limit, seconds, item.unit))
    finally:
        await charts.aclose()
    return out


def _chart_text(charts: list[ChartData]) -> str:
    """The charts as the incident screen draws them, for the terminal's width (≤ 120)."""
    import os
    import shutil

    from oncall.model.chart import plain, render

    width = min(120, shutil.get_terminal_size((100, 30)).columns)
    compact = "NO_COLOR" in os.environ or width < 60
    blocks = ["\n".join(plain(render(c, width, 14, compact=compact))) for c in charts]
    return "\n\n".join(blocks)
