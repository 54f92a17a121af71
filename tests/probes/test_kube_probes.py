"""The kube probes through oncall's Kubernetes client, over HTTP, against the drill simulator;
and their failures: RBAC 403, a refused port, a server that never answers, bad answers."""

from __future__ import annotations

import asyncio
import json
import re
import threading
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pydantic
import pytest

from oncall.errors import BackendError
from oncall.probes import kube
from oncall.probes.base import Facts, Probe
from oncall.probes.context import ProbeContext
from oncall.probes.kube_facts import EPOCH, parse_time
from oncall.probes.registry import all_probes
from oncall.settings.model import KubernetesSettings, Settings
from oncall_drill.kube_sim import (
    OPERATOR_CONTEXT,
    READ_ONLY_CONTEXT,
    KubeSim,
    SimulatorThread,
    User,
    Users,
    default_objects,
    write_kubeconfig,
)
from oncall_drill.kube_sim.resources import DEPLOYMENTS
from oncall_drill.kube_sim.seed import vllm_deployment
from tests.harness.faults import http_stub, refused_port, silent_listener
from tests.harness.processes import loaded_by
from tests.harness.waiting import wait_until

NS = "ai"
FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "kubernetes"
PROBES = {p.name: p for p in kube.PROBES}
SH_SCRIPT = "exec vllm serve qwen --trust-remote-code --max_num_seqs 64"


class CrashingHook:
    """Pods of the `broken` deployment fail to start: CrashLoopBackOff."""

    async def started(self, pod: Mapping[str, Any]) -> Mapping[str, str] | None:
        if pod["metadata"]["labels"].get("app") == "broken":
            raise RuntimeError("exec format error")
        return None

    async def stopped(self, pod: Mapping[str, Any]) -> None:
        return None


def _objects() -> list[dict[str, Any]]:
    """The default drill cluster, plus a vLLM started through `sh -c` and a crash-looping pod."""
    shell = vllm_deployment(name="vllm-sh", replicas=1)
    container = shell["spec"]["template"]["spec"]["containers"][0]
    container["command"], container["args"] = ["/bin/sh", "-c"], [SH_SCRIPT]
    return [*default_objects(), shell, vllm_deployment(name="broken", replicas=1)]


@dataclass
class Cluster:
    sim: KubeSim
    server: SimulatorThread
    kubeconfig: Path

    def settings(self, context: str = OPERATOR_CONTEXT, timeout: float = 3.0) -> Settings:
        return _settings(self.kubeconfig, context, timeout)

    def call(self, fn: Any) -> Any:
        return self.server.call(fn)


def _settings(kubeconfig: Path, context: str | None = None, timeout: float = 3.0) -> Settings:
    k8s = KubernetesSettings(kubeconfig=kubeconfig, context=context, namespace=NS, timeout=timeout)
    return Settings(kubernetes=k8s)


def _settled(sim: KubeSim) -> bool:
    """Both vLLM deployments rolled out, and the broken pod crash-looping."""
    statuses = [
        s
        for p in sim.pods(NS, "app=broken")
        for s in (p.get("status") or {}).get("containerStatuses") or []
    ]
    return (
        sim.rollout_complete(NS, "vllm")
        and sim.rollout_complete(NS, "vllm-sh")
        and any(
            (s.get("state") or {}).get("waiting", {}).get("reason") == "CrashLoopBackOff"
            for s in statuses
        )
    )


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[Cluster]:
    """Settled: 2 vLLM pods, 1 started through sh -c, 1 crash-looping; all 4 GPUs taken."""
    sim = KubeSim(_objects(), hook=CrashingHook(), start_delay=0.02, resync=0.1)
    with SimulatorThread(sim) as server:
        path = write_kubeconfig(tmp_path / "kubeconfig", server.port, sim.users)
        wait_until(lambda: server.call(lambda: _settled(sim)), within=10, what="a settled cluster")
        yield Cluster(sim, server, path)


async def run(settings: Settings, probe_name: str, /, **params: Any) -> Facts:
    probe: Probe[Any] = PROBES[probe_name]
    async with ProbeContext(settings) as ctx:
        return await probe.run(ctx, probe.params(**params))


# -- facts of the seeded cluster --------------------------------------------------------


async def test_pods_of_the_seeded_deployment(cluster: Cluster) -> None:
    facts = await run(cluster.settings(), "kube.pods", selector="app=vllm")
    sim_pods = cluster.call(lambda: cluster.sim.pods(NS, "app=vllm"))
    assert facts["count"] == 2
    assert (facts["ready_count"], facts["not_ready_count"], facts["restarts_total"]) == (2, 0, 0)
    assert (facts["oom_killed"], facts["crash_looping"]) == ([], [])
    by_uid = {p["metadata"]["uid"]: p for p in sim_pods}
    assert [p["name"] for p in facts["pods"]] == sorted(p["metadata"]["name"] for p in sim_pods)
    for pod in facts["pods"]:
        stored = by_uid[pod["uid"]]
        assert pod["name"] == stored["metadata"]["name"]
        assert pod["resource_version"] == stored["metadata"]["resourceVersion"]
        assert (pod["namespace"], pod["phase"], pod["node"]) == (NS, "Running", "gpu-node-1")
        assert (pod["ready"], pod["terminating"], pod["reason"]) == (True, False, None)
        assert pod["restarts"] == 0
        assert pod["last_termination_reason"] is None
        assert pod["last_termination_exit_code"] is None
        assert pod["last_terminated_at"] is None
        assert 0 <= pod["age_s"] < 60
        assert isinstance(pod["age_s"], float)
        assert pod["containers"] == [
            {
                "name": "vllm",
                "ready": True,
                "restarts": 0,
                "state": "running",
                "waiting_reason": None,
                "last_termination_reason": None,
            }
        ]
    json.dumps(facts)  # JSON-able as a whole


async def test_pods_by_name_namespace_default_and_crash_loop(cluster: Cluster) -> None:
    name = cluster.call(lambda: cluster.sim.ready_pods(NS, "app=vllm"))[0]["metadata"]["name"]
    one = await run(cluster.settings(), "kube.pods", name=name)
    assert [p["name"] for p in one["pods"]] == [name]
    assert (await run(cluster.settings(), "kube.pods", name="nope"))["count"] == 0
    assert (await run(cluster.settings(), "kube.pods", namespace="default"))["count"] == 0
    everything = await run(cluster.settings(), "kube.pods")  # namespace from the settings
    assert everything["count"] == 4

    facts = await run(cluster.settings(), "kube.pods", selector="app=broken")
    (pod,) = facts["pods"]
    assert facts["crash_looping"] == [pod["name"]]
    assert (pod["ready"], facts["not_ready_count"]) == (False, 1)
    assert pod["containers"][0]["state"] == "waiting"
    assert pod["containers"][0]["waiting_reason"] == "CrashLoopBackOff"


async def test_lists_carry_the_steps_selectors_to_the_api_server(
    cluster: Cluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 15: a probe's list asks the API server for what the step names (label selector;
    `metadata.name`, `spec.nodeName`, `involvedObject.*` field selectors, as kubectl sends
    them), so a fleet's namespace is not listed whole; and its facts are those of the whole
    list filtered by the same rule here."""
    sent: list[httpx.URL] = []
    original = httpx.AsyncClient.send

    async def recording(client: httpx.AsyncClient, request: httpx.Request, **kw: Any) -> Any:
        sent.append(request.url)
        return await original(client, request, **kw)

    monkeypatch.setattr(httpx.AsyncClient, "send", recording)
    settings = cluster.settings()

    def selectors() -> dict[str, str]:
        """The selectors of the last list sent (one page: the drill's lists are small)."""
        query = dict(sent[-1].params)
        return {k: v for k, v in query.items() if k in ("labelSelector", "fieldSelector")}

    everything = await run(settings, "kube.pods")
    assert selectors() == {}
    vllm = await run(settings, "kube.pods", selector="app=vllm", node="gpu-node-1")
    assert selectors() == {"labelSelector": "app=vllm", "fieldSelector": "spec.nodeName=gpu-node-1"}
    on_node = await run(settings, "kube.pods", node="gpu-node-1")
    assert [p["name"] for p in on_node["pods"]] == [
        p["name"] for p in everything["pods"] if p["node"] == "gpu-node-1"
    ]
    assert {p["name"] for p in vllm["pods"]} < {p["name"] for p in on_node["pods"]}
    assert vllm["count"] == 2 and vllm["not_ready_count"] == 0
    assert (await run(settings, "kube.pods", node="gpu-node-9"))["count"] == 0
    name = vllm["pods"][0]["name"]
    one = await run(settings, "kube.pods", name=name, node="gpu-node-1")
    assert selectors() == {"fieldSelector": f"metadata.name={name},spec.nodeName=gpu-node-1"}
    assert [p["name"] for p in one["pods"]] == [name]

    def seen(facts: Facts) -> list[tuple[Any, ...]]:
        return [(e["object"], e["reason"], e["last_seen"], e["count"]) for e in facts["events"]]

    pod_events = await run(settings, "kube.events", kind="Pod", limit=500)
    assert selectors() == {"fieldSelector": "involvedObject.kind=Pod"}
    about = await run(settings, "kube.events", kind="Pod", name=name, limit=500)
    assert selectors() == {"fieldSelector": f"involvedObject.kind=Pod,involvedObject.name={name}"}
    assert about["count"] > 0
    assert seen(about) == [e for e in seen(pod_events) if e[0] == f"Pod/{name}"]

    gpus = await run(settings, "kube.nodes", selector="nvidia.com/gpu.count")
    assert selectors() == {"labelSelector": "nvidia.com/gpu.count"}
    assert gpus["count"] == (await run(settings, "kube.nodes"))["count"] == 1
    logs_probe = all_probes()["kube.logs"]
    async with ProbeContext(settings) as ctx:
        await logs_probe.run(ctx, logs_probe.params(selector="app=broken"))
    listed = [u for u in sent if u.path.endswith("/pods")]
    assert dict(listed[-1].params).get("labelSelector") == "app=broken"


async def test_oom_killed_pod_and_its_events(cluster: Cluster) -> None:
    name = cluster.call(lambda: cluster.sim.ready_pods(NS, "app=vllm"))[0]["metadata"]["name"]
    cluster.call(lambda: cluster.sim.oom_kill(NS, name, "vllm"))
    facts = await run(cluster.settings(), "kube.pods", selector="app=vllm")
    assert facts["oom_killed"] == [name]
    assert facts["restarts_total"] == 1
    (pod,) = [p for p in facts["pods"] if p["name"] == name]
    assert pod["restarts"] == 1
    assert pod["last_termination_reason"] == "OOMKilled"
    assert pod["last_termination_exit_code"] == 137
    assert pod["last_terminated_at"].endswith("Z")
    assert pod["containers"][0]["last_termination_reason"] == "OOMKilled"

    events = await run(cluster.settings(), "kube.events", kind="Pod", name=name)
    assert "BackOff" in events["reasons"]
    assert events["warning_count"] >= 1
    assert {e["object"] for e in events["events"]} == {f"Pod/{name}"}
    backoff = next(e for e in events["events"] if e["reason"] == "BackOff")
    assert (backoff["type"], backoff["count"]) == ("Warning", 1)
    assert name in backoff["message"]

    node = await run(cluster.settings(), "kube.events", kind="Node", name="gpu-node-1")
    (oom,) = [e for e in node["events"] if e["reason"] == "OOMKilling"]
    assert oom["object"] == "Node/gpu-node-1"
    assert oom["message"].startswith("Memory cgroup out of memory")


async def test_events_newest_first_and_limited(cluster: Cluster) -> None:
    everything = await run(cluster.settings(), "kube.events", kind="Pod")
    assert everything["count"] == everything["total"] >= 13  # 4 pods scheduled, created, started
    facts = await run(cluster.settings(), "kube.events", kind="Pod", limit=5)
    assert facts["count"] == len(facts["events"]) == 5
    assert facts["total"] == everything["total"]
    # By time, not text: the scheduler's events carry microseconds (eventTime), the kubelet's
    # whole seconds (lastTimestamp), as on a real cluster.
    seen = [parse_time(e["last_seen"]) or EPOCH for e in facts["events"]]
    assert seen == sorted(seen, reverse=True)
    assert all(0 <= e["age_s"] < 60 for e in facts["events"])
    assert set(facts["reasons"]) <= {"Scheduled", "Created", "Started", "BackOff"}
    assert facts["reasons"] == list(dict.fromkeys(e["reason"] for e in facts["events"]))
    few = await run(cluster.settings(), "kube.events", kind="ReplicaSet", limit=1)
    assert few["count"] == 1
    assert few["events"][0]["object"].startswith("ReplicaSet/")
    assert few["events"][0]["reason"] == "SuccessfulCreate"
    assert few["events"][0]["type"] == "Normal"
    none = await run(cluster.settings(), "kube.events", kind="Deployment", name="nope")
    assert (none["events"], none["count"], none["warning_count"], none["reasons"]) == ([], 0, 0, [])


async def test_deployment_facts_and_max_num_seqs(cluster: Cluster) -> None:
    stored = cluster.call(lambda: cluster.sim.store.get(DEPLOYMENTS, NS, "vllm"))
    facts = await run(cluster.settings(), "kube.deployment", name="vllm")
    assert facts["resource_version"].isdigit()
    assert facts == {
        "name": "vllm",
        "uid": stored["metadata"]["uid"],
        "resource_version": facts["resource_version"],
        "generation": 1,
        "observed_generation": 1,
        "replicas": 2,
        "ready_replicas": 2,
        "updated_replicas": 2,
        "available_replicas": 2,
        "unavailable_replicas": 0,
        "rollout_complete": True,
        "rollout_message": 'deployment "vllm" successfully rolled out',
        "containers": [
            {
                "name": "vllm",
                "image": "vllm/vllm-openai:v0.33.0",
                "command": [],
                "args": ["--model", "qwen", "--max-num-seqs", "256"],
                "max_num_seqs": 256,
                "max_num_seqs_form": "separate",
                "max_num_active_seqs": None,
                "max_num_active_seqs_form": "default",
            }
        ],
        "max_num_seqs": 256,
        "max_num_seqs_form": "separate",
        "max_num_seqs_container": "vllm",
        "max_num_active_seqs": None,
        "max_num_seqs_default": None,
    }
    shell = await run(cluster.settings(), "kube.deployment", name="vllm-sh", container="vllm")
    assert (shell["max_num_seqs"], shell["max_num_seqs_form"]) == (64, "shell")
    assert shell["containers"][0]["command"] == ["/bin/sh", "-c"]
    assert shell["containers"][0]["args"] == [SH_SCRIPT]


async def test_deployment_facts_read_env_abbreviations_and_active_seqs(cluster: Cluster) -> None:
    """A Deployment recorded in fixtures/kubernetes (fixtures/README.md), served by the sim."""
    recorded = json.loads((FIXTURES / "deployment_vllm_env_active.json").read_text())
    body = {key: recorded[key] for key in ("apiVersion", "kind", "spec")}
    body["metadata"] = {"name": "vllm-recorded", "labels": {"app": "vllm-recorded"}}
    body["spec"]["selector"] = {"matchLabels": {"app": "vllm-recorded"}}
    body["spec"]["template"]["metadata"]["labels"] = {"app": "vllm-recorded"}
    unset = json.loads(json.dumps(body))
    unset["metadata"]["name"] = "vllm-recorded-default"
    args = unset["spec"]["template"]["spec"]["containers"][0]["args"]
    del args[3:6]  # no --max-num-seq, no --max_num_active_seqs
    for obj in (body, unset):
        cluster.call(lambda obj=obj: cluster.sim.store.create(DEPLOYMENTS, obj, NS))
    try:
        facts = await run(cluster.settings(), "kube.deployment", name="vllm-recorded")
        assert (facts["max_num_seqs"], facts["max_num_seqs_form"]) == (128, "equals")
        assert facts["max_num_active_seqs"] == 64
        assert facts["max_num_seqs_default"] is None
        default = await run(cluster.settings(), "kube.deployment", name="vllm-recorded-default")
        assert (default["max_num_seqs"], default["max_num_active_seqs"]) == (None, None)
        assert default["max_num_seqs_default"].startswith("default: 1024 (NVIDIA-H100-80GB-HBM3")
    finally:
        for name in ("vllm-recorded", "vllm-recorded-default"):
            cluster.call(lambda name=name: cluster.sim.store.delete(DEPLOYMENTS, NS, name))


async def test_deployment_rollout_in_progress_after_a_patch(cluster: Cluster) -> None:
    from kubernetes import client, config

    def patch() -> None:
        api = config.new_client_from_config(config_file=str(cluster.kubeconfig))
        with api:
            path = "/spec/template/spec/containers/0/args/3"
            ops = [{"op": "test", "path": path, "value": "256"}]
            ops.append({"op": "replace", "path": path, "value": "128"})
            client.AppsV1Api(api).patch_namespaced_deployment("vllm", NS, ops)

    await asyncio.to_thread(patch)
    # No GPU is free for the surge pod (maxUnavailable rounds down to 0): the rollout waits.
    facts = await run(cluster.settings(), "kube.deployment", name="vllm")
    assert facts["generation"] == 2
    assert (facts["max_num_seqs"], facts["max_num_seqs_form"]) == (128, "separate")
    assert facts["rollout_complete"] is False
    assert re.fullmatch(
        r"Waiting for deployment spec update to be observed"
        r"|[01] out of 2 new replicas have been updated",
        facts["rollout_message"],
    )


async def test_nodes_and_pressure(cluster: Cluster) -> None:
    facts = await run(cluster.settings(), "kube.nodes")
    assert facts == {
        "nodes": [
            {
                "name": "gpu-node-1",
                "ready": True,
                "memory_pressure": False,
                "disk_pressure": False,
                "pid_pressure": False,
                "network_unavailable": False,
                "unschedulable": False,
                "gpu_capacity": 4,
                "gpu_allocatable": 4,
            }
        ],
        "count": 1,
        "not_ready": [],
        "under_pressure": [],
        "gpu_capacity_total": 4,
        "gpu_allocatable_total": 4,
    }
    cluster.call(lambda: cluster.sim.set_node_condition("gpu-node-1", "MemoryPressure", True))
    cluster.call(lambda: cluster.sim.set_node_condition("gpu-node-1", "Ready", False))
    facts = await run(cluster.settings(), "kube.nodes", selector="nvidia.com/gpu.count")
    assert facts["under_pressure"] == facts["not_ready"] == ["gpu-node-1"]
    assert facts["nodes"][0]["memory_pressure"] is True
    assert (await run(cluster.settings(), "kube.nodes", selector="pool=cpu"))["count"] == 0


async def test_one_reader_per_context_closed_with_it(cluster: Cluster) -> None:
    ctx = ProbeContext(cluster.settings())
    first, second = await asyncio.gather(kube.kube_reader(ctx), kube.kube_reader(ctx))
    assert first is second
    await kube.run_nodes(ctx, kube.NodesParams())
    await kube.run_pods(ctx, kube.PodsParams(selector="app=vllm"))
    assert await kube.kube_reader(ctx) is first
    assert first.target.startswith(f"{OPERATOR_CONTEXT} (http://127.0.0.1:")
    await ctx.aclose()
    assert await kube.kube_reader(ctx) is not first
    await ctx.aclose()


# -- RBAC -------------------------------------------------------------------------------


async def test_read_only_user_reads_everything(cluster: Cluster) -> None:
    settings = cluster.settings(READ_ONLY_CONTEXT)
    assert (await run(settings, "kube.pods", selector="app=vllm"))["count"] == 2
    assert (await run(settings, "kube.events", kind="Pod"))["count"] > 0
    assert (await run(settings, "kube.events", kind="Node"))["total"] >= 0  # all namespaces
    assert (await run(settings, "kube.deployment", name="vllm"))["replicas"] == 2
    assert (await run(settings, "kube.nodes"))["count"] == 1


async def test_forbidden_list_is_auth_with_the_servers_message(tmp_path: Path) -> None:
    getter = User("system:serviceaccount:ai:getter", "getter-token", frozenset({"get"}))
    sim = KubeSim(users=Users(read_only=getter), start_delay=0.02, resync=0.1)
    with SimulatorThread(sim) as server:
        path = write_kubeconfig(tmp_path / "kubeconfig", server.port, sim.users)
        settings = _settings(path, READ_ONLY_CONTEXT)
        with pytest.raises(BackendError) as err:
            await run(settings, "kube.pods", selector="app=vllm")
        assert err.value.backend == "kubernetes"
        assert err.value.reason == "auth"
        assert err.value.detail == (
            'pods is forbidden: User "system:serviceaccount:ai:getter" cannot list resource '
            '"pods" in API group "" in the namespace "ai"'
        )
        assert (await run(settings, "kube.deployment", name="vllm"))["name"] == "vllm"
        with pytest.raises(BackendError) as err:
            await run(settings, "kube.nodes")
        assert err.value.reason == "auth"
        assert 'cannot list resource "nodes"' in err.value.detail
        assert "at the cluster scope" in err.value.detail


async def test_missing_objects_are_not_found(cluster: Cluster) -> None:
    with pytest.raises(BackendError) as err:
        await run(cluster.settings(), "kube.deployment", name="nope")
    assert (err.value.reason, err.value.detail) == (
        "not found",
        'deployments.apps "nope" not found',
    )
    with pytest.raises(BackendError) as err:
        await run(cluster.settings(), "kube.deployment", name="vllm", container="sidecar")
    assert err.value.reason == "not found"
    assert err.value.detail == 'deployment "vllm" has no container "sidecar"'
    async with ProbeContext(cluster.settings()) as ctx:
        reader = await kube.kube_reader(ctx)
        with pytest.raises(BackendError) as err:
            await reader.get_pod(NS, "nope")
    assert (err.value.reason, err.value.detail) == ("not found", 'pods "nope" not found')


# -- unreachable and misbehaving servers ------------------------------------------------


async def _time_run(
    settings: Settings, probe_name: str, /, **params: Any
) -> tuple[BackendError, float]:
    """Run a probe that must fail; the error and the seconds it took once the reader existed."""
    probe: Probe[Any] = PROBES[probe_name]
    async with ProbeContext(settings) as ctx:
        await kube.kube_reader(ctx)  # the first one imports the client: not part of the timing
        started = time.monotonic()
        with pytest.raises(BackendError) as err:
            await probe.run(ctx, probe.params(**params))
        return err.value, time.monotonic() - started


async def test_refused_port_fails_at_once(tmp_path: Path) -> None:
    path = write_kubeconfig(tmp_path / "kubeconfig", refused_port(), Users())
    error, elapsed = await _time_run(_settings(path, timeout=5.0), "kube.pods")
    assert error.reason == "refused"
    assert "refused" in error.detail.lower()
    assert elapsed < 1.0


async def test_silent_server_times_out_within_the_timeout(tmp_path: Path) -> None:
    timeout = 1.0
    with silent_listener() as port:
        path = write_kubeconfig(tmp_path / "kubeconfig", port, Users())
        error, elapsed = await _time_run(_settings(path, timeout=timeout), "kube.nodes")
    assert error.reason == "timeout"
    assert error.detail == "no answer within 1s"
    assert timeout - 0.05 <= elapsed <= timeout + 0.5


def test_asyncio_run_is_not_held_up_by_a_blocked_thread(tmp_path: Path) -> None:
    """The worker thread ends at the client's own timeout, so shutdown does not wait on it."""
    timeout = 1.0
    marks: dict[str, float] = {}

    async def main() -> str:
        async with ProbeContext(_settings(path, timeout=timeout)) as ctx:
            await kube.kube_reader(ctx)
            marks["started"] = time.monotonic()
            try:
                await kube.run_pods(ctx, kube.PodsParams())
            except BackendError as exc:
                return exc.reason
        return "answered"

    before = set(threading.enumerate())
    with silent_listener() as port:
        path = write_kubeconfig(tmp_path / "kubeconfig", port, Users())
        reason = asyncio.run(main())
        returned = time.monotonic()
    assert reason == "timeout"
    assert returned - marks["started"] <= timeout + 1.0
    assert [t.name for t in set(threading.enumerate()) - before] == []


@pytest.mark.parametrize(
    ("status", "body", "reason"),
    [
        (200, b"<html>captive portal</html>", "bad payload"),
        (200, b"[1, 2]", "bad payload"),
        (200, b'{"kind": "NodeList"}', "bad payload"),
        (503, b"upstream connect error", "http 503"),
    ],
)
async def test_bad_answers(tmp_path: Path, status: int, body: bytes, reason: str) -> None:
    with http_stub(status, body, "application/json") as url:
        port = int(url.rsplit(":", 1)[1])
        path = write_kubeconfig(tmp_path / "kubeconfig", port, Users())
        with pytest.raises(BackendError) as err:
            await run(_settings(path), "kube.nodes")
    assert err.value.reason == reason


async def test_broken_kubeconfig_is_a_config_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    with pytest.raises(BackendError) as err:
        await run(_settings(tmp_path / "missing"), "kube.nodes")
    assert err.value.reason == "config"
    path = write_kubeconfig(tmp_path / "kubeconfig", refused_port(), Users())
    with pytest.raises(BackendError) as err:
        await run(_settings(path, context="prod"), "kube.nodes")
    assert (err.value.reason, err.value.target) == ("config", "prod")
    assert "prod" in err.value.detail


# -- registry, command lines, import cost -----------------------------------------------


def test_probes_are_registered() -> None:
    names = {"kube.pods", "kube.events", "kube.deployment", "kube.nodes"}
    assert names <= set(all_probes())
    assert all(all_probes()[n].backend == "kubernetes" for n in names)


def test_kubectl_equivalents() -> None:
    ctx = ProbeContext(_settings(Path("/home/me/kc"), "prod"))
    bare = ProbeContext(Settings(kubernetes=KubernetesSettings(namespace="llm")))
    pods = kube.pods_equivalent
    assert pods(ctx, kube.PodsParams(selector="app=vllm")) == (
        "kubectl --kubeconfig /home/me/kc --context prod get pods -n ai -l app=vllm"
    )
    assert pods(bare, kube.PodsParams(name="vllm-1", namespace="x")) == (
        "kubectl get pods -n x --field-selector metadata.name=vllm-1"
    )
    assert pods(bare, kube.PodsParams(selector="app=vllm", node="n-1")) == (
        "kubectl get pods -n llm -l app=vllm --field-selector spec.nodeName=n-1"
    )
    assert kube.events_equivalent(bare, kube.EventsParams(kind="Pod", name="p")) == (
        "kubectl get events -n llm --field-selector involvedObject.kind=Pod,involvedObject.name=p"
        " --sort-by=.lastTimestamp"
    )
    assert kube.events_equivalent(bare, kube.EventsParams(kind="Node")) == (
        "kubectl get events -A --field-selector involvedObject.kind=Node --sort-by=.lastTimestamp"
    )
    assert kube.deployment_equivalent(bare, kube.DeploymentParams(name="vllm")) == (
        "kubectl get deployment vllm -n llm -o yaml"
    )
    assert kube.nodes_equivalent(bare, kube.NodesParams(selector="gpu in (a,b)")) == (
        "kubectl describe nodes -l 'gpu in (a,b)'"
    )


def test_params_reject_unknown_keys() -> None:
    with pytest.raises(ValueError, match="labels"):
        kube.PodsParams(labels="app=vllm")  # type: ignore[call-arg]
    with pytest.raises(ValueError, match="limit"):
        kube.EventsParams(kind="Pod", limit=0)


def test_importing_the_modules_does_not_import_kubernetes() -> None:
    imports = (
        "import oncall.backends.kube, oncall.probes.kube, oncall.probes.kube_facts\n"
        "import oncall.model.vllm_args"
    )
    proc = loaded_by(imports, "kubernetes")
    assert proc.stdout.strip() == "[]", proc.stderr


@pytest.mark.parametrize(
    ("params", "field"),
    [
        (kube.PodsParams, {"node": "gpu-1,metadata.name=x"}),  # a second term: narrows to none
        (kube.PodsParams, {"node": "gpu-1\\,x"}),
        (kube.PodsParams, {"name": "vllm-0,spec.nodeName!=x"}),
        (kube.PodsParams, {"node": "Node_1"}),  # not a name the API server would have given
        (kube.PodsParams, {"node": "n" * 254}),
        (kube.EventsParams, {"kind": "Pod", "name": "vllm-0,involvedObject.kind=Node"}),
        (kube.EventsParams, {"kind": "Pod", "name": "a=b"}),
    ],
)
def test_a_label_cannot_add_a_field_selector_term(params: type[Any], field: dict[str, str]) -> None:
    """Names that go into `--field-selector` come from alert labels: one holding the
    selector's own syntax would change what is asked (and a pod check read "all well")."""
    with pytest.raises(pydantic.ValidationError):
        params.model_validate(field)


def test_real_names_still_select() -> None:
    assert kube.PodsParams.model_validate({"node": "gpu-node-1.eu.internal"}).node
    assert kube.PodsParams.model_validate({"name": "vllm-7d9f8-abcde"}).name
    assert kube.EventsParams.model_validate({"kind": "ClusterRole", "name": "system:node"}).name
