"""The incident screen's instances panel: label sets, state, since, value, expanded summary."""

from __future__ import annotations

from dataclasses import replace

from textual.widgets import Static

from oncall.model.alerts import AlertInstance
from oncall.tui.incident import IncidentScreen
from oncall.tui.instances import InstancesPanel, instance_lines
from tests.harness.waiting import until
from tests.tui.fakes import P99, T0, FakeAlerts, FakeChecklists, make_app, status


def _instance(pod: str, state: str, summary: str) -> AlertInstance:
    return AlertInstance(
        rule=P99, state=state, labels={"alertname": P99, "pod": pod}, value=1.84,  # type: ignore[arg-type]
        active_since=T0 - 192, fires_in_s=None, firing_for_s=None, last_evaluation=T0,
        source="prometheus", annotations={"summary": summary},
    )  # fmt: skip


def _p99() -> object:
    base = status(P99, "firing", value=1.84, firing_for=72)
    return replace(
        base,
        instances=(
            _instance("vllm-1", "pending", "p99 1.84s on vllm-1 for 3m 12s"),
            _instance("vllm-0", "firing", "p99 1.84s on vllm-0 for 3m 12s"),
        ),
    )


def test_lines_put_firing_first_with_labels_since_value_and_summary() -> None:
    lines = instance_lines(_p99(), T0)  # type: ignore[arg-type]
    assert lines[0] == "2 instances"
    assert lines[1].split("  ") == ["● firing", '{pod="vllm-0"}', "since 3m12s", "value 1.84"]
    assert lines[2] == "    p99 1.84s on vllm-0 for 3m 12s"
    assert "pending" in lines[3] and "vllm-1" in lines[3]
    assert instance_lines(status(P99, "inactive"), T0) == []


async def test_the_incident_screen_shows_the_panel() -> None:
    app = make_app(FakeAlerts([_p99()]), FakeChecklists({}))  # type: ignore[list-item]
    async with app.run_test(size=(100, 30)) as pilot:
        await until(pilot, lambda: app.board.selected_alert() == P99, "the board")
        await pilot.press("enter")
        await until(pilot, lambda: isinstance(app.screen, IncidentScreen), "the incident")
        panel = app.screen.query_one(InstancesPanel)
        text = str(panel.render())
        assert "vllm-0" in text and "p99 1.84s on vllm-0 for 3m 12s" in text
        assert isinstance(panel, Static) and panel.display
