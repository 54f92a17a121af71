"""The Alertmanager view: one request per refresh in steady state, the silences list read
again only for a silence not seen yet, instances joined by label set (external labels too),
and the routing as the screens write it."""

from __future__ import annotations

from dataclasses import replace

from oncall.backends.alertmanager import AlertmanagerClient
from oncall.model.alertmanager import AmAlert, AmSnapshot, InstanceRouting, RuleRouting, Silence
from oncall.model.alerts import AlertInstance, RuleStatus
from oncall.service.routing import AlertmanagerView, route
from oncall.tui.board import routing_cell
from oncall.tui.instances import instance_lines
from tests.alertmanager.conftest import PostAlerts
from tests.alertmanager.conftest import Silence as MakeSilence
from tests.harness.servers import RunningServer
from tests.harness.waiting import eventually
from tests.tui.fakes import T0, status

NAME = "ViewP99"


def firing(labels: dict[str, str]) -> AlertInstance:
    return AlertInstance(
        rule=NAME, state="firing", labels={"alertname": NAME, **labels}, value=2.0,
        active_since=T0 - 300, fires_in_s=None, firing_for_s=240, last_evaluation=T0,
        source="prometheus",
    )  # fmt: skip


def rule_status(*instances: AlertInstance) -> RuleStatus:
    return replace(status(NAME, "firing", value=2.0, firing_for=240), instances=instances)


async def test_one_request_per_refresh_and_the_list_again_for_a_new_silence(
    alertmanager_srv: RunningServer, post_alerts: PostAlerts, silence: MakeSilence,
    test_label: str,
) -> None:  # fmt: skip
    post_alerts([{"alertname": NAME, "model": "qwen"}, {"alertname": NAME, "model": "llama"}])
    statuses = [rule_status(*(firing({"model": m, "test": test_label}) for m in ("qwen", "llama")))]
    client = AlertmanagerClient(alertmanager_srv.url, timeout=5)
    view = AlertmanagerView(client, grace=None)
    try:
        await view.annotate(statuses)  # the first read: alerts, then the silences list
        counts = []
        for _ in range(3):
            before = client.requests
            routed = (await view.annotate(statuses))[0]
            counts.append(client.requests - before)
        assert counts == [1, 1, 1]
        assert routed.routing == RuleRouting(active=2)
        # As the app refreshes: the read started beside Prometheus' request, done before the
        # join asks for it, is the one taken (not a second request).
        before = client.requests
        view.start()

        async def read_done() -> bool:
            return view._task is not None and view._task.done()

        await eventually(read_done, within=10, what="the read started beside Prometheus'")
        assert (await view.annotate(statuses))[0].routing == RuleRouting(active=2)
        assert client.requests - before == 1

        made = silence({"alertname": NAME, "model": "qwen"}, created_by="carol", comment="why")

        async def silenced() -> bool:
            routing = (await view.annotate(statuses))[0].instances[0].routing
            return routing is not None and routing.state == "silenced" and bool(routing.silences)

        before = client.requests
        await eventually(silenced, within=10, what="the qwen instance silenced")
        assert client.requests - before == 2  # its id was new: the silences list once more
        qwen = (await view.annotate(statuses))[0].instances[0].routing
        assert qwen is not None and qwen.silences[0].id == made
        assert qwen.silences[0].created_by == "carol"
    finally:
        await view.aclose()


def test_external_labels_do_not_stop_the_match() -> None:
    # Prometheus adds its external_labels (cluster, replica) to what it sends.
    held = AmAlert("f1", {"alertname": NAME, "pod": "a", "cluster": "eu1"}, "active")
    inhibited = AmAlert("f2", {"alertname": NAME, "pod": "b", "cluster": "eu1"}, "suppressed",
                        inhibited_by=("f9",))  # fmt: skip
    snapshot = AmSnapshot(T0, (held, inhibited))
    (out,) = route([rule_status(firing({"pod": "a"}), firing({"pod": "b"}))], snapshot)
    assert [i.routing.state for i in out.instances if i.routing] == ["active", "inhibited"]
    assert out.instances[1].routing == InstanceRouting(
        "inhibited",
        inhibited_by=(out.instances[1].routing.inhibited_by[0],),  # type: ignore[union-attr]
    )
    assert out.routing == RuleRouting(active=1, inhibited=1)


def test_not_held_and_unknown_are_said_so() -> None:
    (missing,) = route([rule_status(firing({"pod": "x"}))], AmSnapshot(T0))
    assert missing.routing == RuleRouting(other=1)
    assert routing_cell(missing.routing) == ("1 not in AM", None)
    down = AmSnapshot(T0, reason="timeout", error="alertmanager at http://am: timeout")
    (unknown,) = route([rule_status(firing({"pod": "x"}))], down)
    assert routing_cell(unknown.routing) == ("unknown: timeout", "warning")
    assert route([status("Quiet", "inactive")], down)[0].routing is None


def test_the_instances_panel_says_who_silenced_until_when_and_what_inhibits() -> None:
    silence = Silence("s1", "active", (), "alice", "rolling out the fix", T0 - 60, T0 + 5400)
    silenced = replace(firing({"pod": "a"}), routing=InstanceRouting(
        "silenced", silenced_by=("s1",), silences=(silence,)))  # fmt: skip
    inhibitor = AmAlert("f9", {"alertname": "VllmDown", "pod": "a"}, "active")
    snapshot = AmSnapshot(T0, (inhibitor,))
    inhibited = route(
        [rule_status(firing({"pod": "b"}))],
        replace(snapshot, alerts=(*snapshot.alerts, AmAlert(
            "f2", {"alertname": NAME, "pod": "b"}, "suppressed", inhibited_by=("f9",)))),
    )[0].instances[0]  # fmt: skip
    lines = instance_lines(rule_status(silenced, inhibited), T0)
    assert lines[1].endswith("am silenced")
    assert lines[2].startswith("    silenced by alice until ")
    assert lines[2].endswith("(1h30m left): rolling out the fix")
    assert lines[3].endswith("am inhibited")
    assert lines[4] == '    inhibited by VllmDown{pod="a"}'


def test_an_acknowledgement_shows_first_in_the_cell_and_in_json() -> None:
    from oncall.cli.alerts_cmd import rule_routing_json
    from oncall.model.alertmanager import Acknowledgement

    acked = RuleRouting(silenced=1, ack=Acknowledgement("dana", T0, "on it"))
    assert routing_cell(acked) == ("ack dana · 1 silenced", "foreground-muted")
    assert rule_routing_json(acked)["ack"] == {"by": "dana", "at": T0, "note": "on it"}  # type: ignore[index]
