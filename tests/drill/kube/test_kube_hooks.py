"""The pod hook (what really runs behind a pod) and failing rollouts."""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
from kubernetes.client.exceptions import ApiException

from oncall_drill.kube_sim import KubeSim, container_args, default_objects
from tests.drill.kube.conftest import DELAY_S, NS, StrictCheck, start_cluster, status_of
from tests.harness.waiting import wait_until


class GatedHook:
    """Records calls; started() returns only once the gate opens (a process becoming ready)."""

    def __init__(self, *, fail: bool = False) -> None:
        self.started_uids: list[str] = []
        self.stopped_uids: list[str] = []
        self.args: list[list[str]] = []
        self.gate = asyncio.Event()
        self.fail = fail

    async def started(self, pod: Mapping[str, Any]) -> Mapping[str, str] | None:
        self.started_uids.append(pod["metadata"]["uid"])
        self.args.append(container_args(pod, "vllm"))
        if self.fail:
            raise RuntimeError("vllm exited with code 1")
        await self.gate.wait()
        return {"drill.oncall/port": "18000"}

    async def stopped(self, pod: Mapping[str, Any]) -> None:
        self.stopped_uids.append(pod["metadata"]["uid"])


def test_hook_gates_readiness_and_is_stopped_on_delete_oom_and_shutdown(
    tmp_path: Path, strict: StrictCheck
) -> None:
    hook = GatedHook()
    sim = KubeSim(hook=hook, start_delay=DELAY_S, resync=0.2)
    clusters = start_cluster(tmp_path, sim)
    cluster = next(clusters)
    try:
        core = cluster.core()
        wait_until(lambda: len(hook.started_uids) == 2, within=10, what="two started hooks")
        assert hook.args == [["--model", "qwen", "--max-num-seqs", "256"]] * 2
        pods = core.list_namespaced_pod(NS).items
        assert {p.status.phase for p in pods} == {"Running"}
        for pod in pods:  # running, but not ready while the process is not
            ready = {c.type: c.status for c in pod.status.conditions}["Ready"]
            assert ready == "False"
            assert pod.status.container_statuses[0].state.running is not None
        cluster.call(hook.gate.set)
        pods = cluster.ready_pods(2)
        assert all(p.metadata.annotations["drill.oncall/port"] == "18000" for p in pods)

        victim = pods[0].metadata.uid
        core.delete_namespaced_pod(pods[0].metadata.name, NS, grace_period_seconds=1)
        wait_until(lambda: victim in hook.stopped_uids, within=10, what="the deleted pod's stop")
        cluster.ready_pods(2)
        assert len(hook.started_uids) == 3

        survivor = pods[1]
        cluster.call(lambda: sim.oom_kill(NS, survivor.metadata.name))
        wait_until(
            lambda: (
                Counter(hook.started_uids)[survivor.metadata.uid] == 2
                and survivor.metadata.uid in hook.stopped_uids
            ),
            within=10,
            what="a restart after the OOM kill",
        )
        cluster.ready_pods(2)
    finally:
        clusters.close()
    # Every started process was stopped exactly once, the last ones at shutdown.
    assert Counter(hook.started_uids) == Counter(hook.stopped_uids)
    assert strict.checked > 0


def test_failing_hook_crash_loops_and_rollout_misses_its_deadline(
    tmp_path: Path, strict: StrictCheck
) -> None:
    objects = default_objects()
    (dep,) = [o for o in objects if o["kind"] == "Deployment"]
    dep["spec"]["progressDeadlineSeconds"] = 1
    sim = KubeSim(objects, hook=GatedHook(fail=True), start_delay=DELAY_S, resync=0.1)
    clusters = start_cluster(tmp_path, sim)
    cluster = next(clusters)
    try:
        core, apps = cluster.core(), cluster.apps()

        def crashed() -> list[Any]:
            pods = core.list_namespaced_pod(NS).items
            waiting = [
                p
                for p in pods
                if p.status.container_statuses
                and p.status.container_statuses[0].state.waiting is not None
            ]
            return waiting if len(waiting) == 2 else []

        pods = wait_until(crashed, within=10, what="two crash-looping pods")
        assert pods[0].status.container_statuses[0].state.waiting.reason == "CrashLoopBackOff"
        events = core.list_namespaced_event(NS, field_selector="reason=BackOff,type=Warning")
        assert len(events.items) == 2

        def deadline_exceeded() -> Any:
            d = apps.read_namespaced_deployment("vllm", NS)
            conditions = {c.type: c for c in d.status.conditions or []}
            progressing = conditions.get("Progressing")
            return d if progressing and progressing.reason == "ProgressDeadlineExceeded" else None

        dep_now = wait_until(deadline_exceeded, within=10, what="ProgressDeadlineExceeded")
        conditions = {c.type: c for c in dep_now.status.conditions}
        assert conditions["Progressing"].status == "False"
        assert conditions["Available"].status == "False"
        assert dep_now.status.unavailable_replicas == 2
        assert not dep_now.status.available_replicas
    finally:
        clusters.close()


def test_deleting_unknown_namespace_objects(tmp_path: Path, strict: StrictCheck) -> None:
    clusters = start_cluster(tmp_path, KubeSim(start_delay=DELAY_S))
    cluster = next(clusters)
    try:
        with pytest.raises(ApiException) as err:
            cluster.core().delete_namespaced_pod("ghost", "nowhere")
        assert err.value.status == 404
        assert status_of(err.value)["message"] == 'pods "ghost" not found'
    finally:
        clusters.close()
