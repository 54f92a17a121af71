"""SVG snapshots of the board's Alertmanager column and the incident's per-instance routing:
instances silenced (who, until when, why), inhibited (by what), active, and Alertmanager
unknown. Fixed states from fakes and a `FakeClock`: the same pictures on every run. Accept a
deliberate change with `pytest tests/alertmanager --snapshot-update` and review the SVGs."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest
from textual.pilot import Pilot

from oncall.model.alertmanager import Inhibitor, InstanceRouting, RuleRouting, Silence
from oncall.model.alerts import AlertInstance, RuleStatus
from oncall.tui.app import OncallApp
from oncall.tui.incident import IncidentScreen
from tests.harness.waiting import until
from tests.tui import fakes
from tests.tui.fakes import P99, T0, status

SIZES = [pytest.param((100, 30), id="100x30"), pytest.param((80, 24), id="80x24")]
SILENCE = Silence(
    "8f1c2d9e-3b4a-4c5d-9e6f-7a8b9c0d1e2f", "active", (), "alice", "rolling out the qwen fix",
    T0 - 600, T0 + 6600,
)  # fmt: skip
OOM = "LLMOutOfMemory"


def instance(rule: str, labels: dict[str, str], routing: InstanceRouting) -> AlertInstance:
    return AlertInstance(
        rule=rule, state="firing", labels={"alertname": rule, **labels}, value=1.84,
        active_since=T0 - 300, fires_in_s=None, firing_for_s=182, last_evaluation=T0 - 3,
        source="prometheus", annotations={"summary": f"{rule} on {labels}"}, routing=routing,
    )  # fmt: skip


def routed(status: RuleStatus, *instances: AlertInstance) -> RuleStatus:
    counts = RuleRouting.of([i.routing for i in instances if i.routing is not None])
    return replace(status, instances=instances, routing=counts)


def statuses() -> list[RuleStatus]:
    critical = {"alertname": OOM, "namespace": "ai", "pod": "vllm-0", "severity": "critical"}
    by_what = InstanceRouting("inhibited", inhibited_by=(Inhibitor("53398f101022defc", critical),))
    silenced = InstanceRouting("silenced", silenced_by=(SILENCE.id,), silences=(SILENCE,))
    changed = {
        P99: lambda s: routed(
            s,
            instance(P99, {"model": "qwen"}, silenced),
            instance(P99, {"model": "llama"}, InstanceRouting("active")),
        ),
        OOM: lambda _: routed(
            status(OOM, "firing", value=1.0, firing_for=95),
            instance(OOM, {"namespace": "ai", "pod": "vllm-1"}, by_what),
        ),
    }
    out = [changed.get(s.rule.name, lambda s: s)(s) for s in fakes.board_statuses()]
    unknown = InstanceRouting("unknown", reason="timeout", error="alertmanager: no answer")
    out.append(routed(status("KVCacheHigh", "firing", value=0.97, firing_for=40),
                      instance("KVCacheHigh", {"pod": "vllm-0"}, unknown)))  # fmt: skip
    return out


def app() -> OncallApp:
    return fakes.make_app(
        fakes.FakeAlerts(statuses()), fakes.FakeChecklists({}), clock=fakes.FakeClock(),
        alertmanager={"url": "http://127.0.0.1:9093"},
    )  # fmt: skip


async def board_shown(pilot: Pilot[Any]) -> None:
    shown = pilot.app
    assert isinstance(shown, OncallApp)
    await until(pilot, lambda: shown.board.selected_alert() is not None, "the board")


@pytest.mark.parametrize("size", SIZES)
def test_board_with_silenced_inhibited_and_unknown_instances(
    snap_compare: Any, size: tuple[int, int]
) -> None:
    assert snap_compare(app(), terminal_size=size, run_before=board_shown)


async def open_p99(pilot: Pilot[Any]) -> None:
    shown = pilot.app
    assert isinstance(shown, OncallApp)
    await board_shown(pilot)
    keys = [key for key, _ in shown.board.rows()]
    for _ in range(keys.index(P99)):
        await pilot.press("down")
    await pilot.press("enter")
    await until(pilot, lambda: isinstance(shown.screen, IncidentScreen), "the incident")
    await pilot.pause()


def test_incident_instances_silenced_and_active(snap_compare: Any) -> None:
    assert snap_compare(app(), terminal_size=(100, 30), run_before=open_p99)
