"""The app's board over Thanos Query answering with a store down: the states it sent are
shown, and so is its warning (the live source, engine and client are the real ones; the
server is conftest.py's stand-in serving the recorded fixtures/thanos payload)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

from oncall.settings import Settings
from oncall.tui.app import OncallApp
from tests.harness.pilot import static_text
from tests.harness.waiting import until
from tests.prometheus_compat.conftest import FIXTURES, THANOS, CompatServer, Flavour

PARTIAL = FIXTURES / "thanos" / "rules_v1_alert_partial.json"


async def test_the_board_shows_thanos_partial_states_and_its_warning(
    serve_compat: Callable[[Flavour], CompatServer], tmp_path: Path
) -> None:
    thanos = serve_compat(THANOS)
    (warning,) = json.loads(PARTIAL.read_bytes())["warnings"]
    settings = Settings.model_validate(
        {
            "prometheus": {"url": thanos.url, "timeout": "5s"},
            "alerts": {"packs": [], "refresh": "1s"},
            "audit": {"path": str(tmp_path / "audit.jsonl")},
        }
    )
    app = OncallApp(settings)
    async with app.run_test(size=(200, 24)) as pilot:
        line = lambda: static_text(app, "#board-status")  # noqa: E731
        await until(
            pilot, lambda: "prometheus warns" in line(), "the warning on the board", within=30
        )
        assert f"prometheus warns: {warning}" in line()
        assert app.book.statuses["PodsHot"].state == "firing"  # the partial answer is used
