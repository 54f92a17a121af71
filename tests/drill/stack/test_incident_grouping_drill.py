"""Incidents in the drill: `kv-cache-pressure` puts an alert storm on the board whose
checklists fail on the vLLM Deployment's KV cache; the board shows it as one incident row with
the shared cause in words, while `gateway-unavailable`, injected at the same time, trips an
alert whose checklist fails on no shared target (the gateway's error ratio is a metric; the
degradation switch it finds off is the service's state, not Redis' health) and stays its own
incident. Real app, real clients, the drill's backends; the board is polled (bounded).
"""

from __future__ import annotations

import asyncio
import re
from pathlib import Path

import redis

from oncall.incidents.targets import failing_targets
from oncall.model.incidents import Incident
from oncall.service.incidents import scope_of
from oncall.tui.app import OncallApp
from oncall.tui.board_incidents import PREFIX
from tests.drill.stack.conftest import Drill
from tests.drill.stack.remediation_helpers import app_settings, wait_calm
from tests.harness.waiting import until

VLLM = "Deployment ai/vllm"
GATEWAY_ALERT = "AIServiceUnavailable"


def kv_incident(app: OncallApp) -> Incident | None:
    """The open incident whose cause is the KV cache on the vLLM Deployment, once it groups
    two or more alerts."""
    for incident in app.book.incidents:
        cause = incident.cause
        if cause and cause.target == VLLM and len({m.alert for m in incident.members}) >= 2:
            return incident
    return None


def implicating(app: OncallApp) -> set[str]:
    """The firing alerts whose finished checklist run fails on the vLLM Deployment."""
    scope = scope_of(app.settings)
    out = set()
    for key, run in app.book.runs.items():
        status = app.book.statuses.get(key)
        if status is None or status.state != "firing" or run.running:
            continue
        steps = [r.to_json() for r in run.ordered_results()]
        if VLLM in failing_targets(steps, scope):
            out.add(status.rule.name)
    return out


def settled(app: OncallApp) -> bool:
    """The storm is one incident holding every alert that fails on the vLLM Deployment, and
    the gateway's alert is in an incident too."""
    storm, wanted = kv_incident(app), implicating(app)
    if storm is None or gateway_incident(app) is None or len(wanted) < 2:
        return False
    return wanted <= {m.alert for m in storm.members}


def seen(app: OncallApp) -> object:
    firing = sorted(k for k, s in app.book.statuses.items() if s.state == "firing")
    incidents = [(i.explanation, sorted({m.alert for m in i.members}))
                 for i in app.book.incidents]  # fmt: skip
    return {"firing": firing, "implicating": sorted(implicating(app)), "incidents": incidents}


async def test_a_kv_cache_storm_is_one_incident_and_the_gateway_its_own(
    drill: Drill, tmp_path: Path
) -> None:
    settings = app_settings(drill, tmp_path / "audit.jsonl")
    # The test before may end with a rollout (its rollback): the Deployment step would fail
    # on it and become the storm's cause.
    await asyncio.to_thread(wait_calm, drill)
    with redis.Redis.from_url(drill.state["urls"]["redis"]) as client:
        # Incidents other drill tests' apps grouped: not this test's.
        for key in client.scan_iter("oncall:incident*"):
            client.delete(key)
    app = OncallApp(settings)
    async with app.run_test(size=(160, 40)) as pilot:
        await asyncio.to_thread(drill.cli, "inject", "kv-cache-pressure")
        await asyncio.to_thread(drill.cli, "inject", "gateway-unavailable")
        try:
            await until(
                pilot,
                lambda: settled(app),
                "one incident for the alerts failing on the vLLM Deployment",
                within=240,
                seen=lambda: seen(app),
            )
            storm, gateway = kv_incident(app), gateway_incident(app)
            assert storm is not None and storm.cause is not None and gateway is not None
            step = storm.cause.step
            # The KV-cache checks (kv_cache, fleet_kv_cache, kv_fit) among the steps named; the
            # cause may be another step failing on the same Deployment in as many checklists
            # (`deployment`, while a saturated replica is briefly not Ready).
            named = storm.explanation.split(" fail")[0].removeprefix("grouped: ").split(", ")
            assert step in named and any("kv" in n for n in named), storm.explanation
            # "grouped: fleet_kv_cache, pod_kv_cache, kv_cache, … fail on Deployment ai/vllm
            # in 3 of 3 checklists": the KV-cache steps, the Deployment, how many checklists.
            why = re.compile(
                rf"grouped: {step}(, [a-z_]+)*(, …)? fails? on {VLLM} in (\d+) of \d+ checklists"
            )
            words = why.fullmatch(storm.explanation)
            assert words is not None, storm.explanation
            assert int(words.group(3)) >= len(implicating(app))
            # The gateway's alert: its checklist fails on no target the storm's implicate (its
            # degradation-switch step reads the service's state): an incident of its own.
            # No alert in two open incidents: the app and the drill's `oncall serve` (both
            # writers) name each instance alike.
            held = [m.key for i in app.book.incidents for m in i.members]
            assert len(held) == len(set(held)), seen(app)
            assert gateway.id != storm.id
            assert {m.alert for m in gateway.members} == {GATEWAY_ALERT}
            assert gateway.explanation.startswith("alone: "), gateway.explanation
            # The board: one row for the storm, with its count and the cause in words.
            rows = app.board.rows()
            keys = [key for key, _ in app.board.columns]
            found = [dict(zip(keys, cells, strict=True)) for key, cells in rows
                     if key == PREFIX + storm.id]  # fmt: skip
            assert len(found) == 1, (seen(app), [key for key, _ in rows])
            row = found[0]
            assert row["findings"][0] == storm.explanation
            assert row["alert"][0].startswith("▸ ") and " alerts · " in row["alert"][0]
            shown = {cells[keys.index("alert")][0] for _, cells in rows}
            assert not {m.alert for m in storm.members} & shown  # folded under the incident row
            assert GATEWAY_ALERT in shown  # alone: an alert row of its own
            print(seen(app), row)
        finally:
            await asyncio.to_thread(drill.cli, "clear")


def gateway_incident(app: OncallApp) -> Incident | None:
    for incident in app.book.incidents:
        if any(m.alert == GATEWAY_ALERT for m in incident.members):
            return incident
    return None
