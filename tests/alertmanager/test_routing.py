"""`oncall alerts` and the board against a real Prometheus sending to the real Alertmanager:
each firing instance active, silenced (by whom, until when, why) or inhibited (by what); an
Alertmanager that hangs, refuses the token or answers with a login page makes the column
`unknown` with the reason and leaves Prometheus' states as they are."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from oncall.settings.loader import load_settings
from oncall.tui.app import OncallApp
from tests.alertmanager.conftest import Routed, Silence
from tests.cli_runner import run_oncall
from tests.harness.faults import http_stub, silent_listener
from tests.harness.servers import RunningServer
from tests.harness.waiting import until


@pytest.fixture
def test_label(routed: Routed) -> str:
    """The silences these tests make carry the module's label (its rules' alerts do)."""
    return routed.label


def config(
    tmp_path: Path, routed: Routed, am_url: str, timeout: str = "3s", redis: str | None = None
) -> Path:
    """`redis`: the acknowledgements' Redis (without one they are `unknown`)."""
    path = tmp_path / "oncall.yaml"
    path.write_text(yaml.safe_dump({
        **({"redis": {"url": redis}} if redis else {}),
        "prometheus": {"url": routed.prometheus.url, "timeout": "5s"},
        "alertmanager": {"url": am_url, "timeout": timeout},
        "alerts": {"packs": [], "refresh": "1s"},
        "audit": {"path": str(tmp_path / "audit.jsonl")},
    }))  # fmt: skip
    return path


def alerts_json(path: Path) -> dict[str, dict[str, Any]]:
    result = run_oncall("alerts", "-o", "json", "--config", str(path), timeout=60)
    assert result.code == 1, result.stderr  # alerts fire, whatever Alertmanager says
    return {a["name"]: a for a in json.loads(result.stdout)["alerts"]}


def by(instances: list[dict[str, Any]], label: str) -> dict[str, dict[str, Any]]:
    return {i["labels"][label]: i["alertmanager"] for i in instances}


def test_oncall_alerts_shows_silenced_and_inhibited_instances(
    tmp_path: Path, routed: Routed, silence: Silence, redis_srv: RunningServer
) -> None:
    silence_id = silence(
        {"alertname": "AmP99High", "model": "qwen"}, created_by="alice", comment="qwen fix"
    )
    path = config(tmp_path, routed, routed.alertmanager.url, redis=redis_srv.url)
    alerts = alerts_json(path)

    p99 = alerts["AmP99High"]
    assert p99["state"] == "firing"
    counts = {"active": 1, "silenced": 1, "inhibited": 0, "muted": 0, "other": 0, "unknown": 0}
    assert p99["alertmanager"] == {
        **counts, "reason": None, "error": None, "ack": None, "ack_error": None,
    }  # fmt: skip
    models = by(p99["instances"], "model")
    assert models["llama"]["state"] == "active"
    assert models["qwen"]["state"] == "silenced"
    (made,) = models["qwen"]["silenced_by"]
    assert (made["id"], made["created_by"], made["comment"]) == (silence_id, "alice", "qwen fix")
    assert made["ends_at"] == pytest.approx(time.time() + 7200, abs=120)
    assert made["matchers"] == (f'{{alertname="AmP99High", model="qwen", test="{routed.label}"}}')

    oom = alerts["AmVllmOOMKilled"]["alertmanager"]
    assert (oom["active"], oom["inhibited"], oom["silenced"]) == (1, 1, 0)
    pods = by(alerts["AmVllmOOMKilled"]["instances"], "pod")
    assert pods["vllm-a"]["state"] == "active"
    assert pods["vllm-b"]["state"] == "inhibited"
    (inhibitor,) = pods["vllm-b"]["inhibited_by"]
    assert inhibitor["labels"]["pod"] == "vllm-a"
    assert inhibitor["labels"]["severity"] == "critical"
    assert alerts["AmQuiet"]["alertmanager"] is None  # nothing fires: nothing to route

    table = run_oncall("alerts", "--config", str(path), timeout=60).stdout
    rows = {line.split()[0]: line for line in table.splitlines()[2:] if line.strip()}
    assert "ALERTMANAGER" in table.splitlines()[1]
    assert rows["AmP99High"].endswith("1 silenced, 1 active")
    assert rows["AmVllmOOMKilled"].endswith("1 inhibited, 1 active")


def test_a_hung_alertmanager_is_unknown_within_its_timeout(tmp_path: Path, routed: Routed) -> None:
    with silent_listener() as port:
        alerts = alerts_json(config(tmp_path, routed, f"http://127.0.0.1:{port}", "1s"))
    p99 = alerts["AmP99High"]
    assert p99["state"] == "firing" and len(p99["instances"]) == 2  # Prometheus' states
    routing = p99["alertmanager"]
    assert (routing["unknown"], routing["reason"]) == (2, "timeout")
    assert "no answer within 1s" in routing["error"]
    assert {i["alertmanager"]["state"] for i in p99["instances"]} == {"unknown"}


@pytest.mark.parametrize(
    ("status", "body", "reason"),
    [(401, b"Unauthorized", "auth"), (200, b"<html><form>Sign in</form></html>", "bad payload")],
)
def test_refused_or_a_login_page_is_unknown_with_the_reason(
    tmp_path: Path, routed: Routed, status: int, body: bytes, reason: str
) -> None:
    with http_stub(status, body) as url:
        alerts = alerts_json(config(tmp_path, routed, url))
    routing = alerts["AmVllmOOMKilled"]["alertmanager"]
    assert (routing["unknown"], routing["reason"]) == (2, reason)
    assert alerts["AmVllmOOMKilled"]["state"] == "firing"


async def test_the_board_shows_the_silence_column(
    tmp_path: Path, routed: Routed, silence: Silence, redis_srv: RunningServer
) -> None:
    silence({"alertname": "AmP99High", "model": "llama"}, created_by="bob", comment="known")
    path = config(tmp_path, routed, routed.alertmanager.url, redis=redis_srv.url)
    settings = load_settings(config=path).settings
    app = OncallApp(settings)
    async with app.run_test(size=(120, 30)) as pilot:

        def routed_rows() -> dict[str, str]:
            keys = [key for key, _ in app.board.columns]
            at = keys.index("routing")
            return {name: cells[at][0] for name, cells in app.board.rows()}

        await until(pilot, lambda: "silenced" in routed_rows().get("AmP99High", ""), "silence")
        rows = routed_rows()
        assert rows["AmP99High"] == "1 silenced, 1 active"
        assert rows["AmVllmOOMKilled"] == "1 inhibited, 1 active"
        assert rows["AmQuiet"] == ""
        status = app.book.statuses["AmP99High"]
        silenced = [i for i in status.instances if i.routing and i.routing.state == "silenced"]
        assert [i.labels["model"] for i in silenced] == ["llama"]
        assert silenced[0].routing is not None
        assert silenced[0].routing.silences[0].created_by == "bob"


async def test_the_board_with_a_hung_alertmanager_still_shows_prometheus(
    tmp_path: Path, routed: Routed
) -> None:
    with silent_listener() as port:
        path = config(tmp_path, routed, f"http://127.0.0.1:{port}", "1s")
        app = OncallApp(load_settings(config=path).settings)
        async with app.run_test(size=(120, 30)) as pilot:
            await until(pilot, lambda: "AmP99High" in app.book.statuses, "the first states")
            status = app.book.statuses["AmP99High"]
            assert status.state == "firing"
            assert status.routing is not None and status.routing.reason == "timeout"
            assert status.routing.unknown == 2
