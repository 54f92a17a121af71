"""Issue 28: a rule that cannot fire here is `◌ silent` on the board, with its reason, never a
green "inactive"; its incident screen says why.

The verdicts are the real judge's (`oncall.alerts.liveness.judge`) over the facts a real
Prometheus gave in tests/alerts/test_liveness.py (a KServe-shaped vLLM at these scrape
intervals); the board is fed them through a fake alert source, as every board test is.
Accept a deliberate change of the pictures with `pytest tests/tui --snapshot-update`.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest
from textual.pilot import Pilot

from oncall.alerts.liveness import Facts, judge
from oncall.model.alerts import RuleStatus
from oncall.tui.app import OncallApp
from oncall.tui.incident import IncidentScreen
from tests.harness.waiting import until
from tests.tui.fakes import P99, FakeAlerts, FakeClock, make_app, status
from tests.tui.snapshot_sizes import SIZES, Compare

FACTS = Facts(
    matched={
        "vllm:num_preemptions{}": frozenset(),
        'vllm:kv_cache_usage_perc{container="vllm"}': frozenset(),
        'vllm:request_failure_total{job="vllm-slow"}': frozenset({"vllm-slow"}),
        "vllm:num_preemptions_total{}": frozenset({"vllm"}),
    },
    names=frozenset({"vllm:num_preemptions_total", "vllm:kv_cache_usage_perc"}),
    label_values={
        ("vllm:kv_cache_usage_perc", "container"): ("kserve-container", "queue-proxy"),
    },
    intervals={"vllm": 15.0, "vllm-slow": 60.0},
)
RULES = {
    "VllmPreempting": "rate(vllm:num_preemptions[5m]) > 0",
    "VllmKvCacheFull": 'max(vllm:kv_cache_usage_perc{container="vllm"}) > 0.9',
    "VllmSlowJobErrors": 'rate(vllm:request_failure_total{job="vllm-slow"}[1m]) > 1',
    "VllmPreemptingTotal": "rate(vllm:num_preemptions_total[5m]) > 100",
}


def _judged(name: str, expr: str) -> RuleStatus:
    base = status(name, "inactive")
    return replace(base, rule=replace(base.rule, expr=expr), liveness=judge(expr, FACTS))


def statuses() -> list[RuleStatus]:
    firing = status(P99, "firing", value=1.84, firing_for=182)
    return [firing, *(_judged(name, expr) for name, expr in RULES.items())]


def liveness_app() -> OncallApp:
    return make_app(FakeAlerts(statuses()), clock=FakeClock())


async def board_shown(pilot: Pilot[Any]) -> None:
    app = pilot.app
    assert isinstance(app, OncallApp)
    await until(pilot, lambda: len(app.board.rows()) == 5, "the five rows")


async def test_silent_rows_say_why_and_are_not_inactive() -> None:
    app = liveness_app()
    async with app.run_test(size=(160, 30)) as pilot:
        await board_shown(pilot)
        rows = {key: [cell[0] for cell in cells] for key, cells in app.board.rows()}
        assert rows["VllmPreempting"][0] == "◌ silent"
        assert rows["VllmKvCacheFull"][0] == "◌ silent"
        assert rows["VllmSlowJobErrors"][0] == "◌ silent"
        assert rows["VllmPreemptingTotal"][0] == "○ inactive"
        assert rows["VllmSlowJobErrors"][2] == "cannot fire here"  # the When column
        assert rows["VllmPreemptingTotal"][2] == ""
        assert rows["VllmPreempting"][-1] == (
            "cannot fire: no series named vllm:num_preemptions; "
            "found vllm:num_preemptions_total — the counter is named with _total"
        )
        assert "values here are {kserve-container, queue-proxy}" in rows["VllmKvCacheFull"][-1]
        assert rows["VllmPreemptingTotal"][-1] == ""
        assert "3 silent" in app.board.status_line()
        await until(pilot, lambda: app.board.selected_alert() == P99, "the board")
        await pilot.press("down", "down")
        await until(pilot, lambda: app.board.selected_alert() == "VllmKvCacheFull", "the row")
        await pilot.press("enter")
        await until(pilot, lambda: isinstance(app.screen, IncidentScreen), "the incident")
        screen = app.screen
        assert isinstance(screen, IncidentScreen)
        title = screen.title_text().plain
        assert title.startswith("◌ silent  VllmKvCacheFull")
        assert 'cannot fire here: vllm:kv_cache_usage_perc{container="vllm"}' in title


@pytest.mark.parametrize("size", SIZES)
def test_board_with_silent_rules(snap_compare: Compare, size: tuple[int, int]) -> None:
    assert snap_compare(liveness_app(), terminal_size=size, run_before=board_shown)
