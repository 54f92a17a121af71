"""`LiveAlerts`, the app's alert source, against a real Prometheus: states, then history."""

from __future__ import annotations

import time
from pathlib import Path

from oncall.service.sources import LiveAlerts
from oncall.settings import Settings
from tests.harness.servers import RunningServer

PACK = """\
groups:
  - name: mini
    rules:
      - alert: Constant
        expr: vector(3)
      - alert: NeverTrue
        expr: vector(1) > 5
"""


async def test_history_comes_after_the_first_refresh_with_the_last_hour(
    prometheus_srv: RunningServer, tmp_path: Path
) -> None:
    (tmp_path / "mini.yaml").write_text(PACK)
    settings = Settings.model_validate(
        {
            "prometheus": {"url": prometheus_srv.url, "timeout": "2s"},
            "alerts": {"dirs": [str(tmp_path)], "packs": ["mini"], "source": "local"},
        }
    )
    live = LiveAlerts(settings)
    try:
        assert await live.history() == {}  # no refresh has opened the engine yet
        statuses = await live.refresh()
        assert [(s.rule.name, s.state) for s in statuses] == [
            ("Constant", "firing"),
            ("NeverTrue", "inactive"),
        ]
        before = time.time()
        history = await live.history()
        # A rule whose expression returned nothing in the hour is left out, not an empty line.
        assert list(history) == ["Constant"]
        points = history["Constant"]
        times = [t for t, _ in points]
        assert times == sorted(times)
        assert before - 3600 - 1 <= times[0] and times[-1] <= time.time() + 1
        assert len(points) >= 60 and {v for _, v in points} == {3.0}  # one a minute
    finally:
        await live.aclose()


async def test_the_board_source_marks_a_rule_that_cannot_fire_without_waiting(
    prometheus_srv: RunningServer, tmp_path: Path
) -> None:
    """Issue 28: the app's source starts a liveness round beside the first refresh and does
    not wait for it; the refresh after it shows the rule whose metric does not exist as silent
    (an inactive rule that can fire is left as it was: the board copies only what it shows)."""
    (tmp_path / "mini.yaml").write_text(
        PACK + "      - alert: NoSuchMetric\n        expr: vllm:num_preemptions > 0\n"
    )
    settings = Settings.model_validate(
        {
            "prometheus": {"url": prometheus_srv.url, "timeout": "2s"},
            "alerts": {"dirs": [str(tmp_path)], "packs": ["mini"], "source": "local"},
        }
    )
    live = LiveAlerts(settings)
    try:
        first = await live.refresh()
        assert [s.liveness for s in first] == [None, None, None]  # the round is running
        assert live.liveness is not None and live.liveness.cache is not None
        await live.liveness.cache.settled()
        second = {s.rule.name: s for s in await live.refresh()}
        assert second["NoSuchMetric"].silent
        assert second["NoSuchMetric"].liveness is not None
        assert second["NoSuchMetric"].liveness.reasons == ("no series named vllm:num_preemptions",)
        assert second["NeverTrue"].liveness is None and not second["NeverTrue"].silent
        assert not second["Constant"].silent
    finally:
        await live.aclose()
