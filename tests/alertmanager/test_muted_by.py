"""Alertmanager >= 0.28's time-interval muting (`status.mutedBy`) is shown as muted, not active.

It is only on `/api/v2/alerts/groups` (per route; `/api/v2/alerts` reads "active"): the client
reads the groups of an Alertmanager that reports it, over the recorded shape of
`fixtures/alertmanager/alert_groups_v2_muted.json` (Debian's 0.25 has no mutedBy, so a server
answers those recorded payloads here), and not of one that predates it."""

from __future__ import annotations

import copy
import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from oncall.backends.alertmanager import AlertmanagerClient, muted_alerts, reports_muting
from oncall.model.alertmanager import AmSnapshot, InstanceRouting, RuleRouting
from oncall.model.alerts import AlertInstance
from oncall.service.routing import route
from tests.harness.faults import Reply, answering_server
from tests.tui.fakes import T0, status

GROUPS = json.loads(
    (
        Path(__file__).resolve().parents[2]
        / "fixtures"
        / "alertmanager"
        / "alert_groups_v2_muted.json"
    ).read_text()
)


def alerts_endpoint() -> list[dict[str, Any]]:
    """What `/api/v2/alerts` says of the same alerts: active, no mutedBy (api/v2/api.go)."""
    seen: dict[str, dict[str, Any]] = {}
    for group in GROUPS:
        for alert in group["alerts"]:
            plain = copy.deepcopy(alert)
            plain["status"] = {
                "state": "active",
                "silencedBy": [],
                "inhibitedBy": [],
                "mutedBy": [],
            }
            seen[alert["fingerprint"]] = plain
    return list(seen.values())


def server(version: str, asked: list[str]) -> Any:
    def answer(path: str) -> Reply:
        asked.append(path.split("?", maxsplit=1)[0])
        body: Any = {
            "/api/v2/status": {"versionInfo": {"version": version}},
            "/api/v2/alerts": alerts_endpoint(),
            "/api/v2/alerts/groups": GROUPS,
        }.get(path.split("?", maxsplit=1)[0])
        if body is None:
            return 404, "text/plain", b"not found"
        return 200, "application/json", json.dumps(body).encode()

    return answering_server(answer)


async def test_an_alert_muted_on_every_route_is_muted_one_still_notified_is_active() -> None:
    asked: list[str] = []
    with server("0.28.1", asked) as url:
        async with AlertmanagerClient(url, timeout=3) as client:
            alerts = {a.name: a for a in await client.alerts()}
            await client.alerts()
    latency, pod = alerts["LLMHighP99Latency"], alerts["KubePodNotReady"]
    assert (latency.state, latency.muted_by) == ("suppressed", ("out-of-hours",))
    assert (pod.state, pod.muted_by) == ("active", ())  # the chat route still notifies
    # The version once; then each read is the alerts and, while one is active, the groups.
    assert asked == [
        "/api/v2/alerts", "/api/v2/status", "/api/v2/alerts/groups",
        "/api/v2/alerts", "/api/v2/alerts/groups",
    ]  # fmt: skip
    # As the board shows it: muted by the interval, counted apart from active.
    instance = AlertInstance(
        rule=latency.name, state="firing", labels=dict(latency.labels), value=2.0,
        active_since=T0 - 300, fires_in_s=None, firing_for_s=240, last_evaluation=T0,
        source="prometheus",
    )  # fmt: skip
    rule = status(latency.name, "firing", value=2.0, firing_for=240)
    statuses = [replace(rule, instances=(instance,))]
    routed = route(statuses, AmSnapshot(at=0.0, alerts=(latency,), silences={}))[0]
    assert routed.instances[0].routing == InstanceRouting("muted", muted_by=("out-of-hours",))
    assert routed.instances[0].routing.text() == "muted by time interval out-of-hours"
    assert routed.routing == RuleRouting(muted=1)
    assert routed.routing.text() == "1 muted"


async def test_an_alertmanager_before_0_28_is_read_in_one_request() -> None:
    asked: list[str] = []
    with server("0.25.0", asked) as url:
        async with AlertmanagerClient(url, timeout=3) as client:
            await client.alerts()
            alerts = await client.alerts()
    assert {a.state for a in alerts} == {"active"}
    assert asked == ["/api/v2/alerts", "/api/v2/status", "/api/v2/alerts"]


@pytest.mark.parametrize(
    ("version", "reports"),
    [("0.28.0", True), ("v0.31.2", True), ("0.27.0", False), ("0.25.0", False),
     ("0.28.0-rc.1", True), ("mimir-2.14", True)],
)  # fmt: skip
def test_which_versions_report_muting(version: str, reports: bool) -> None:
    assert reports_muting(version) is reports


def test_muted_only_when_every_group_mutes_it() -> None:
    groups: list[list[tuple[str, tuple[str, ...]]]] = [
        [("a", ("nights",)), ("b", ("nights",))],
        [("b", ())],
        [("a", ("weekends",)), ("a", ("nights",))],
    ]
    assert muted_alerts(groups) == {"a": ("nights", "weekends")}
