"""The Alertmanager fixture is the real program, loopback only, with the drill's inhibitions."""

from __future__ import annotations

import httpx

from tests.harness.servers import RunningServer


def test_alertmanager_serves_api_v2_with_the_drill_config(alertmanager_srv: RunningServer) -> None:
    status = httpx.get(f"{alertmanager_srv.url}/api/v2/status", timeout=5, trust_env=False)
    assert status.status_code == 200
    body = status.json()
    assert body["cluster"]["status"] == "disabled"  # no gossip listener on 0.0.0.0:9094
    assert "inhibit_rules" in body["config"]["original"]
    assert 'severity=~"warning|info"' in body["config"]["original"].replace(" ", "")
