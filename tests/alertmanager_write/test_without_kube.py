"""Silencing and acknowledging need no Kubernetes: their writes go only to Alertmanager and
Redis, so they take no Kubernetes Lease (`Action.unleased`) and the author falls back to the
OS account. Tried as a hostile world would: no kubeconfig, an API server that refuses, one
that never answers; `$USER` set to someone else; two processes acknowledging, silencing and
expiring at the same instant; and the atomic write of an acknowledgement raced directly,
past the re-check before it."""

from __future__ import annotations

import asyncio
import dataclasses
import threading
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx
import pytest
import yaml

from oncall.backends.acks import AckStore
from oncall.backends.identity import os_account
from oncall.model.alertmanager import Acknowledgement
from oncall.remediation import registry
from oncall.remediation.action import TargetChanged
from oncall.remediation.clients import Clients
from oncall.settings.loader import load_settings
from tests.alertmanager_write.conftest import World
from tests.harness.terminal import TerminalRun, run_on_terminal

#: Someone else's name in the environment: never the author.
SPOOFED = {"USER": "mallory", "LOGNAME": "mallory"}


def _audited(world: World, action: str) -> list[str]:
    return [r["transition"] for r in world.records() if r["action"] == action]


DONE = ["proposed", "approved", "started", "succeeded", "verified"]


def test_silence_and_ack_work_with_no_kubernetes(kubeless: World) -> None:
    me = str(os_account()["os_user"])
    kubeless.post_alerts({"alertname": "KubeDown"})
    matchers = f'{{alertname="KubeDown", case="{kubeless.case}"}}'
    added = run_on_terminal(
        kubeless.args("silence", "add", matchers, "--for", "30m", "--comment", "API down"),
        [("to confirm", "yes")], env=SPOOFED,
    )  # fmt: skip
    assert added.code == 0, added.output
    assert "no Kubernetes Lease: Alertmanager only" in added.output
    [silence] = kubeless.silences()
    assert silence["createdBy"] == me != "mallory"
    assert _audited(kubeless, "silence") == DONE
    proposed = next(r for r in kubeless.records() if r["transition"] == "proposed")
    assert proposed["actor"]["kube_user"] is None  # and why, for whoever reads the log
    assert proposed["actor"]["kube_error"].startswith("kubernetes at ")

    alert = f"KubeDown{kubeless.case}"
    acked = run_on_terminal(kubeless.args("ack", alert), [("to confirm", "yes")], env=SPOOFED)
    assert acked.code == 0, acked.output
    assert "no Kubernetes Lease: Redis only" in acked.output
    ack = asyncio.run(_ack_of(kubeless, alert))
    assert ack is not None and ack.by == me
    assert _audited(kubeless, "acknowledge") == DONE


async def _ack_of(world: World, alert: str) -> Acknowledgement | None:
    clients = Clients(load_settings(config=world.config).settings)
    try:
        return await AckStore(clients.redis_client()).get(alert)
    finally:
        await clients.aclose()


def _second_config(world: World, tmp_path: Path) -> list[str]:
    """The same world for another process, with its own audit log (one log per operator)."""
    config = yaml.safe_load(world.config.read_text())
    config["audit"]["path"] = str(tmp_path / "audit-2.jsonl")
    path = tmp_path / "oncall-2.yaml"
    path.write_text(yaml.safe_dump(config))
    return ["--config", str(path)]


def _at_once(argvs: list[list[str]]) -> list[TerminalRun]:
    """Run the commands at once; each waits at its prompt until all are there, then all type
    `yes` together: both planned on the same state, both confirm in the same instant."""
    barrier = threading.Barrier(len(argvs), timeout=60)

    def together(_output: str) -> str:
        barrier.wait()
        return "yes"

    def one(argv: list[str]) -> TerminalRun:
        return run_on_terminal(argv, [("to confirm", together)], timeout=90)

    with ThreadPoolExecutor(len(argvs)) as pool:
        return list(pool.map(one, argvs))


@pytest.mark.parametrize("kubeless", ["api-refuses"], indirect=True)
def test_two_processes_acknowledging_at_once_one_has_it(kubeless: World, tmp_path: Path) -> None:
    alert = f"Race{kubeless.case}"
    runs = _at_once([kubeless.args("ack", alert), [*_second_config(kubeless, tmp_path), "ack",
                                                     alert]])  # fmt: skip
    codes = sorted(r.code for r in runs)
    assert codes == [0, 1], [r.output for r in runs]
    loser = next(r for r in runs if r.code == 1)
    assert "meanwhile" in loser.output, loser.output  # re-check or atomic write: who had it
    assert "Traceback" not in loser.output


@pytest.mark.parametrize("kubeless", ["api-refuses"], indirect=True)
def test_two_processes_silencing_at_once_make_two_harmless_silences(
    kubeless: World, tmp_path: Path
) -> None:
    kubeless.post_alerts({"alertname": "Twice"})
    add = ["silence", "add", f'{{alertname="Twice", case="{kubeless.case}"}}', "--comment", "c"]
    runs = _at_once([kubeless.args(*add), [*_second_config(kubeless, tmp_path), *add]])
    assert [r.code for r in runs] == [0, 0], [r.output for r in runs]
    silences = kubeless.silences()
    assert [s["status"]["state"] for s in silences] == ["active", "active"]
    # Both silence the one alert: expiring either leaves it silenced by the other.
    ids = sorted(s["id"] for s in silences)
    assert all(r.output.count("1 alert(s) silenced by it") == 1 for r in runs)
    assert ids[0] != ids[1]


@pytest.mark.parametrize("kubeless", ["api-refuses"], indirect=True)
def test_two_processes_expiring_one_silence_end_it_once(kubeless: World, tmp_path: Path) -> None:
    ends = datetime.now(UTC) + timedelta(hours=1)
    body = {"matchers": [{"name": "case", "value": kubeless.case, "isRegex": False}],
            "startsAt": datetime.now(UTC).isoformat(), "endsAt": ends.isoformat(),
            "createdBy": "someone", "comment": "to expire"}  # fmt: skip
    made = httpx.post(f"{kubeless.am}/api/v2/silences", json=body, timeout=5, trust_env=False)
    made.raise_for_status()
    [silence] = kubeless.silences()
    expire = ["silence", "expire", silence["id"]]
    runs = _at_once([kubeless.args(*expire), [*_second_config(kubeless, tmp_path), *expire]])
    assert all("no Kubernetes Lease: Alertmanager only" in r.output for r in runs)
    assert 0 in [r.code for r in runs], [r.output for r in runs]
    assert all(r.code in (0, 1) and "Traceback" not in r.output for r in runs)
    assert [s["status"]["state"] for s in kubeless.silences()] == ["expired"]


@pytest.mark.parametrize("kubeless", ["no-kubeconfig"], indirect=True)
async def test_the_ack_write_itself_is_atomic(kubeless: World) -> None:
    """Past the re-check: eight plans made on the same state ("not acknowledged"), executed at
    once straight through the action's write. Exactly one writes; every other is told who
    has it; the stored acknowledgement is the winner's."""
    settings = load_settings(config=kubeless.config).settings
    action = registry.action_named("acknowledge")
    alert = f"Atomic{kubeless.case}"
    clients = [Clients(settings) for _ in range(8)]
    try:
        plans = [await registry.plan("acknowledge", {"alert": alert}, c) for c in clients]
        plans = [dataclasses.replace(p, params={**p.params, "by": f"p{i}"})
                 for i, p in enumerate(plans)]  # fmt: skip
        tries = [action.execute(p, c) for p, c in zip(plans, clients, strict=True)]
        results = await asyncio.gather(*tries, return_exceptions=True)
        won = [r for r in results if isinstance(r, dict)]
        lost = [r for r in results if isinstance(r, TargetChanged)]
        assert len(won) == 1 and len(lost) == 7, results
        assert all(f"acknowledged by {won[0]['by']}" in str(e) for e in lost)
        stored = await AckStore(clients[0].redis_client()).get(alert)
        assert stored is not None and stored.by == won[0]["by"]
    finally:
        for c in clients:
            await c.aclose()


@pytest.mark.parametrize("kubeless", ["no-kubeconfig"], indirect=True)
async def test_a_plan_without_the_read_precondition_is_not_written(kubeless: World) -> None:
    """A plan whose comparison was stripped (a tampered or hand-made plan) writes nothing."""
    settings = load_settings(config=kubeless.config).settings
    clients = Clients(settings)
    try:
        alert = f"Stripped{kubeless.case}"
        plan = await registry.plan("acknowledge", {"alert": alert}, clients)
        stripped = dataclasses.replace(plan, preconditions=())
        with pytest.raises(TargetChanged):
            await registry.action_named("acknowledge").execute(stripped, clients)
        assert await AckStore(clients.redis_client()).get(alert) is None
    finally:
        await clients.aclose()


def test_only_the_alertmanager_and_redis_actions_go_without_a_kubernetes_lease() -> None:
    """Every action that writes to the cluster still takes the Kubernetes Lease."""
    unleased = {name for name, a in registry.ACTIONS.items() if a.unleased is not None}
    assert unleased == {"silence", "silence-expire", "acknowledge"}


@pytest.mark.parametrize("kubeless", ["api-refuses"], indirect=True)
def test_an_alert_arriving_after_the_preview_refuses_the_silence(kubeless: World) -> None:
    """The guard a silence has instead of a Lease: while the person reads the preview, another
    alert the matchers select starts firing; the re-match just before the write finds it,
    and the silence is refused rather than muting what the person never saw."""
    kubeless.post_alerts({"alertname": "Shown", "pod": "vllm-0"})

    def another_fires_then_yes(_output: str) -> str:
        kubeless.post_alerts({"alertname": "Unseen", "pod": "vllm-0"})
        return "yes"

    ran = run_on_terminal(
        kubeless.args("silence", "add", f'{{pod="vllm-0", case="{kubeless.case}"}}',
                      "--comment", "c"),
        [("to confirm", another_fires_then_yes)],
    )  # fmt: skip
    assert ran.code == 1, ran.output
    assert "would now also mute 1 alert(s) not in the preview" in ran.output
    assert 'alertname="Unseen"' in ran.output
    assert kubeless.silences() == []
    assert _audited(kubeless, "silence") == ["proposed", "approved", "refused"]
