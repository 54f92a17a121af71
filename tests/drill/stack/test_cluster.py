"""The drill cluster through the real kubernetes client: pods are real vLLM processes.

Deleting a pod ends its process and a replacement with a new UID becomes Ready; patching
`--max-num-seqs` rolls new processes whose behaviour and /metrics show the new cap.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from kubernetes import client, config
from prometheus_client.parser import text_string_to_metric_families

from oncall_drill.cluster.pods import PORT_ANNOTATION
from oncall_drill.supervisor import pid_alive
from tests.drill.stack.conftest import Drill
from tests.harness.waiting import eventually

NS = "ai"


def pod_pid(name: str) -> int | None:
    """The pid of the vLLM simulator started for pod `name`."""
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        with contextlib.suppress(OSError):
            argv = (entry / "cmdline").read_bytes().split(b"\0")
            if b"oncall_drill.vllm_sim" in argv and name.encode() in argv:
                return int(entry.name)
    return None


@pytest.fixture
def kube(drill: Drill) -> Iterator[tuple[client.CoreV1Api, client.AppsV1Api]]:
    api = config.new_client_from_config(config_file=str(drill.directory / "kubeconfig"))
    try:
        yield client.CoreV1Api(api), client.AppsV1Api(api)
    finally:
        api.close()


def ready_pods(core: client.CoreV1Api) -> list[Any]:
    # The client's models type every field Optional; these objects come from a live cluster.
    pods: list[Any] = core.list_namespaced_pod(NS, label_selector="app=vllm").items
    return [
        p
        for p in pods
        if p.metadata.deletion_timestamp is None
        and any(c.type == "Ready" and c.status == "True" for c in p.status.conditions or [])
    ]


def rolled_out(apps: client.AppsV1Api, core: client.CoreV1Api) -> bool:
    dep: Any = apps.read_namespaced_deployment("vllm", NS)
    want = dep.spec.replicas
    status = dep.status
    return bool(
        dep.metadata.generation <= (status.observed_generation or 0)
        and (status.updated_replicas or 0) == want
        and (status.replicas or 0) == want
        and (status.available_replicas or 0) == want
        and len(core.list_namespaced_pod(NS, label_selector="app=vllm").items) == want
    )


async def test_deleting_a_pod_ends_its_process_and_a_new_one_becomes_ready(
    kube: tuple[client.CoreV1Api, client.AppsV1Api],
) -> None:
    core, _ = kube
    victim = ready_pods(core)[0]
    pid = pod_pid(victim.metadata.name)
    assert pid is not None and pid_alive(pid)
    before = {p.metadata.uid for p in ready_pods(core)}

    core.delete_namespaced_pod(
        victim.metadata.name,
        NS,
        body=client.V1DeleteOptions(preconditions=client.V1Preconditions(uid=victim.metadata.uid)),
    )

    async def process_gone() -> bool:
        return not pid_alive(pid)

    async def replaced() -> bool:
        uids = {p.metadata.uid for p in ready_pods(core)}
        return len(uids) == len(before) and victim.metadata.uid not in uids

    await eventually(process_gone, within=15, what="the deleted pod's process to end")
    await eventually(replaced, within=30, what="a Ready replacement with a new UID")
    new = next(p for p in ready_pods(core) if p.metadata.uid not in before)
    assert new.metadata.name != victim.metadata.name
    assert pod_pid(new.metadata.name) is not None


async def _flood_and_watch(base: str, requests: int) -> tuple[list[float], list[float]]:
    """Send `requests` long completions at once; sample running/waiting from /metrics."""
    running: list[float] = []
    waiting: list[float] = []
    body = {"model": "qwen", "prompt": "count", "max_tokens": 60, "ignore_eos": True}
    async with httpx.AsyncClient(base_url=base, timeout=30, trust_env=False) as http:
        flood = asyncio.gather(*(http.post("/v1/completions", json=body) for _ in range(requests)))
        task = asyncio.ensure_future(flood)
        for _ in range(300):  # bounded sampling while the flood is served
            if task.done():
                break
            for family in text_string_to_metric_families((await http.get("/metrics")).text):
                total = sum(s.value for s in family.samples)
                if family.name == "vllm:num_requests_running":
                    running.append(total)
                elif family.name == "vllm:num_requests_waiting":
                    waiting.append(total)
            # The sampler's interval (what is tested is what /metrics says while the flood
            # is served; the flood's end is what it waits on, above).
            await asyncio.sleep(0.05)
        responses = await task
    assert all(r.status_code == 200 for r in responses)
    return running, waiting


def _patch_max_num_seqs(apps: client.AppsV1Api, old: str, new: str) -> None:
    path = "/spec/template/spec/containers/0/args/3"
    apps.patch_namespaced_deployment(
        "vllm",
        NS,
        [{"op": "test", "path": path, "value": old}, {"op": "replace", "path": path, "value": new}],
    )


async def test_patching_max_num_seqs_rolls_processes_with_the_new_cap(
    kube: tuple[client.CoreV1Api, client.AppsV1Api],
) -> None:
    core, apps = kube
    dep: Any = apps.read_namespaced_deployment("vllm", NS)
    args = dep.spec.template.spec.containers[0].args
    assert args[2:4] == ["--max-num-seqs", "256"]
    old_pods = {p.metadata.name for p in ready_pods(core)}

    _patch_max_num_seqs(apps, "256", "4")
    try:

        async def done() -> bool:
            return rolled_out(apps, core) and not old_pods & {
                p.metadata.name for p in ready_pods(core)
            }

        await eventually(done, within=60, what="the rollout of --max-num-seqs 4")
        pod = ready_pods(core)[0]
        port = pod.metadata.annotations[PORT_ANNOTATION]
        base = f"http://127.0.0.1:{port}"
        async with httpx.AsyncClient(trust_env=False) as http:
            state = (await http.get(f"{base}/drill/state")).json()
        assert state["max_num_seqs"] == 4

        running, waiting = await _flood_and_watch(base, requests=12)

        assert running and max(running) <= 4
        assert max(running) == 4
        assert max(waiting) > 0
    finally:
        _patch_max_num_seqs(apps, "4", "256")

        async def restored() -> bool:
            return rolled_out(apps, core)

        await eventually(restored, within=60, what="the rollout back to 256")
