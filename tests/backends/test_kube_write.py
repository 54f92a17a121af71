"""KubeWriter (oncall's own REST client over httpx) against the drill simulator over HTTP:
preconditions, dry runs, guarded JSON patches and rollouts, leases, events, access reviews,
RBAC 403s and a server that never answers."""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from oncall.backends.kube import RolloutStatus, pod_ready, rollout_status_of
from oncall.backends.kube_write import KubeWriter, forbidden_detail
from oncall.errors import BackendError
from oncall.model.patches import inverse_patch, max_num_seqs_patch
from oncall.settings.model import KubernetesSettings
from oncall_drill.kube_sim import (
    OPERATOR_CONTEXT,
    READ_ONLY_CONTEXT,
    KubeSim,
    SimulatorThread,
    Users,
    write_kubeconfig,
)
from oncall_drill.kube_sim.resources import LEASES
from tests.harness.faults import http_stub, silent_listener
from tests.harness.processes import loaded_by
from tests.harness.waiting import wait_until

NS = "ai"
APP = "app=vllm"
READ_ONLY_USER = "system:serviceaccount:ai:oncall-readonly"
FAST = 0.02  # poll interval in tests: the simulator starts pods in 50 ms


@dataclass
class Cluster:
    sim: KubeSim
    server: SimulatorThread
    kubeconfig: Path

    def call(self, fn: Any) -> Any:
        return self.server.call(fn)


def _settings(kubeconfig: Path, context: str = OPERATOR_CONTEXT, timeout: float = 3.0) -> Any:
    return KubernetesSettings(kubeconfig=kubeconfig, context=context, namespace=NS, timeout=timeout)


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[Cluster]:
    """The default drill cluster, rolled out: Deployment ai/vllm with 2 Ready pods."""
    sim = KubeSim(start_delay=0.05, resync=0.1)
    with SimulatorThread(sim) as server:
        path = write_kubeconfig(tmp_path / "kubeconfig", server.port, sim.users)
        wait_until(
            lambda: server.call(lambda: sim.rollout_complete(NS, "vllm")),
            within=10,
            what="a rolled-out vllm",
        )
        yield Cluster(sim, server, path)


@pytest.fixture
async def writer(cluster: Cluster) -> AsyncIterator[KubeWriter]:
    client = await KubeWriter.open(_settings(cluster.kubeconfig))
    try:
        yield client
    finally:
        client.close()


@pytest.fixture
async def ro_writer(cluster: Cluster) -> AsyncIterator[KubeWriter]:
    client = await KubeWriter.open(_settings(cluster.kubeconfig, READ_ONLY_CONTEXT))
    try:
        yield client
    finally:
        client.close()


def _args(obj: dict[str, Any]) -> list[str]:
    spec = obj["spec"]["template"]["spec"] if obj.get("kind") == "Deployment" else obj["spec"]
    args: list[str] = spec["containers"][0]["args"]
    return args


async def _live_pods(writer: KubeWriter) -> list[dict[str, Any]]:
    pods = await writer.list_pods(NS, APP)
    return [p for p in pods if not p["metadata"].get("deletionTimestamp")]


# -- delete with preconditions ---------------------------------------------------------------


async def test_delete_with_a_stale_uid_is_a_conflict_and_the_pod_stays(writer: KubeWriter) -> None:
    pod = (await _live_pods(writer))[0]
    name = pod["metadata"]["name"]
    stale = "00000000-0000-0000-0000-000000000000"
    with pytest.raises(BackendError) as err:
        await writer.delete_pod(NS, name, uid=stale, dry_run=False)
    assert err.value.reason == "conflict"
    assert f"the UID in the precondition ({stale}) does not match" in err.value.detail
    after = await writer.get_pod(NS, name)
    assert after["metadata"]["uid"] == pod["metadata"]["uid"]
    assert "deletionTimestamp" not in after["metadata"]


async def test_dry_run_delete_leaves_the_pod(writer: KubeWriter) -> None:
    pod = (await _live_pods(writer))[0]
    meta = pod["metadata"]
    answer = await writer.delete_pod(NS, meta["name"], uid=meta["uid"], dry_run=True)
    assert answer["metadata"]["uid"] == meta["uid"]
    after = await writer.get_pod(NS, meta["name"])
    assert after["metadata"]["resourceVersion"] == meta["resourceVersion"]
    assert "deletionTimestamp" not in after["metadata"]


async def test_delete_with_the_uid_and_a_new_pod_becomes_ready(writer: KubeWriter) -> None:
    victim, other = await _live_pods(writer)
    old_uid = victim["metadata"]["uid"]
    deleted = await writer.delete_pod(NS, victim["metadata"]["name"], uid=old_uid, dry_run=False)
    assert deleted["metadata"].get("deletionTimestamp")
    new = await writer.wait_pod_replaced(
        NS, APP, old_uid, timeout=10, ignore_uids=[other["metadata"]["uid"]], interval=FAST
    )
    assert new is not None
    assert new["metadata"]["uid"] not in (old_uid, other["metadata"]["uid"])
    assert pod_ready(new)


async def test_wait_pod_replaced_gives_up_after_its_timeout(writer: KubeWriter) -> None:
    started = time.monotonic()
    assert await writer.wait_pod_replaced(NS, "app=none", "x", timeout=0.3, interval=FAST) is None
    assert time.monotonic() - started < 0.3 + 0.5


# -- JSON patch and rollouts ------------------------------------------------------------------


async def test_json_patch_with_a_failing_test_changes_nothing(writer: KubeWriter) -> None:
    before = await writer.get_deployment(NS, "vllm")
    ops = max_num_seqs_patch(before, "vllm", 128)
    ops[2] = {**ops[2], "value": "512"}  # what an operator saw before someone else's change
    with pytest.raises(BackendError) as err:
        await writer.patch_deployment_json(NS, "vllm", ops, dry_run=False)
    assert err.value.reason == "invalid"
    assert "`test` op did not match" in err.value.detail
    after = await writer.get_deployment(NS, "vllm")
    assert after["metadata"]["resourceVersion"] == before["metadata"]["resourceVersion"]
    assert _args(after) == ["--model", "qwen", "--max-num-seqs", "256"]


async def test_dry_run_patch_changes_nothing(writer: KubeWriter) -> None:
    before = await writer.get_deployment(NS, "vllm")
    preview = await writer.patch_deployment_json(
        NS, "vllm", max_num_seqs_patch(before, "vllm", 128), dry_run=True
    )
    assert _args(preview) == ["--model", "qwen", "--max-num-seqs", "128"]
    after = await writer.get_deployment(NS, "vllm")
    assert after["metadata"]["resourceVersion"] == before["metadata"]["resourceVersion"]
    assert after["metadata"]["generation"] == before["metadata"]["generation"]
    assert _args(after) == _args(before)


async def test_max_num_seqs_patch_rolls_out_and_rolls_back(writer: KubeWriter) -> None:
    before = await writer.get_deployment(NS, "vllm")
    ops = max_num_seqs_patch(before, "vllm", 128)
    patched = await writer.patch_deployment_json(NS, "vllm", ops, dry_run=False)
    assert patched["metadata"]["generation"] == before["metadata"]["generation"] + 1
    progress: list[RolloutStatus] = []
    status = await writer.wait_rollout(
        NS, "vllm", timeout=20, on_progress=progress.append, interval=FAST
    )
    assert status.done, status
    assert progress[-1] == status
    assert not progress[0].done  # it followed the rollout, not just its end
    assert len(set(progress)) == len(progress)  # each status reported once
    pods = await _live_pods(writer)
    assert len(pods) == 2
    assert all(_args(p) == ["--model", "qwen", "--max-num-seqs", "128"] for p in pods)

    await writer.patch_deployment_json(NS, "vllm", inverse_patch(ops), dry_run=False)
    assert (await writer.wait_rollout(NS, "vllm", timeout=20, interval=FAST)).done
    pods = await _live_pods(writer)
    assert [_args(p)[-1] for p in pods] == ["256", "256"]


def test_rollout_status_follows_kubectl() -> None:
    def dep(generation: int = 2, **status: Any) -> dict[str, Any]:
        meta = {"name": "vllm", "generation": generation}
        return {"metadata": meta, "spec": {"replicas": 2}, "status": status}

    full: dict[str, Any] = {
        "observedGeneration": 2,
        "replicas": 2,
        "updatedReplicas": 2,
        "availableReplicas": 2,
    }
    assert rollout_status_of(dep(**{**full, "observedGeneration": 1})).message == (
        "Waiting for deployment spec update to be observed"
    )
    assert rollout_status_of(dep(**{**full, "updatedReplicas": 1})).message == (
        "1 out of 2 new replicas have been updated"
    )
    assert rollout_status_of(dep(**{**full, "replicas": 3})).message == (
        "1 old replicas are pending termination"
    )
    assert rollout_status_of(dep(**{**full, "availableReplicas": 1})).message == (
        "1 of 2 updated replicas are available"
    )
    done = rollout_status_of(dep(**full))
    assert (done.done, done.message) == (True, 'deployment "vllm" successfully rolled out')
    stuck = {"type": "Progressing", "status": "False", "reason": "ProgressDeadlineExceeded"}
    failed = rollout_status_of(dep(**{**full, "updatedReplicas": 1, "conditions": [stuck]}))
    assert (failed.done, failed.failed) == (False, True)
    assert failed.message == 'deployment "vllm" exceeded its progress deadline'


# -- RBAC ------------------------------------------------------------------------------------


async def test_read_only_user_is_forbidden_with_verb_and_resource(
    writer: KubeWriter, ro_writer: KubeWriter
) -> None:
    pod = (await _live_pods(writer))[0]
    with pytest.raises(BackendError) as err:
        await ro_writer.delete_pod(
            NS, pod["metadata"]["name"], uid=pod["metadata"]["uid"], dry_run=True
        )
    assert err.value.reason == "forbidden"
    assert err.value.detail == (
        f'user "{READ_ONLY_USER}" cannot delete resource "pods" in namespace "ai"'
    )
    dep = await ro_writer.get_deployment(NS, "vllm")  # reading is allowed
    with pytest.raises(BackendError) as err:
        await ro_writer.patch_deployment_json(
            NS, "vllm", max_num_seqs_patch(dep, "vllm", 64), dry_run=True
        )
    assert (err.value.reason, err.value.detail) == (
        "forbidden",
        f'user "{READ_ONLY_USER}" cannot patch resource "deployments.apps" in namespace "ai"',
    )
    with pytest.raises(BackendError) as err:
        await ro_writer.acquire_lease(NS, "vllm-oncall-lock", "ro@host", 60)
    assert 'cannot create resource "leases.coordination.k8s.io"' in err.value.detail
    with pytest.raises(BackendError) as err:
        await ro_writer.patch_configmap(NS, "ai-gateway", {"degraded-mode": "1"}, dry_run=True)
    assert 'cannot patch resource "configmaps"' in err.value.detail


def test_forbidden_detail_shapes() -> None:
    cluster_scope = (
        'nodes "n" is forbidden: User "u" cannot patch resource "nodes" in API group "" '
        "at the cluster scope"
    )
    assert forbidden_detail(cluster_scope) == (
        'user "u" cannot patch resource "nodes" at the cluster scope'
    )
    path = 'forbidden: User "u" cannot get path "/metrics"'
    assert forbidden_detail(path) == path  # no resource to name: the server's own words


# -- leases ----------------------------------------------------------------------------------


async def test_lease_held_by_a_refuses_b_until_released(writer: KubeWriter) -> None:
    alice = await writer.acquire_lease(NS, "vllm-oncall-lock", "alice@host", 300)
    assert alice.acquired and alice.holder == "alice@host" and alice.since is not None
    bob = await writer.acquire_lease(NS, "vllm-oncall-lock", "bob@host", 300)
    assert not bob.acquired
    assert (bob.holder, bob.since, bob.expires) == ("alice@host", alice.since, alice.expires)

    held = await writer.lease_holder(NS, "vllm-oncall-lock")  # read only: the preview's look
    assert held is not None and (held.holder, held.since) == ("alice@host", alice.since)
    assert await writer.lease_holder(NS, "no-such-lease") is None

    renewed = await writer.acquire_lease(NS, "vllm-oncall-lock", "alice@host", 300)
    assert renewed.acquired and renewed.since == alice.since  # a renewal keeps acquireTime
    assert not await writer.release_lease(NS, "vllm-oncall-lock", "bob@host")
    assert await writer.release_lease(NS, "vllm-oncall-lock", "alice@host")
    assert not await writer.release_lease(NS, "vllm-oncall-lock", "alice@host")  # gone
    assert (await writer.acquire_lease(NS, "vllm-oncall-lock", "bob@host", 300)).acquired


async def test_an_expired_lease_is_taken_over(cluster: Cluster, writer: KubeWriter) -> None:
    an_hour_ago = "2020-01-01T00:00:00.000001Z"
    lease = {
        "apiVersion": "coordination.k8s.io/v1",
        "kind": "Lease",
        "metadata": {"name": "vllm-oncall-lock", "namespace": NS},
        "spec": {
            "holderIdentity": "alice@host",
            "leaseDurationSeconds": 300,
            "acquireTime": an_hour_ago,
            "renewTime": an_hour_ago,
            "leaseTransitions": 2,
        },
    }
    cluster.call(lambda: cluster.sim.load([lease]))
    bob = await writer.acquire_lease(NS, "vllm-oncall-lock", "bob@host", 300)
    assert bob.acquired and bob.previous_holder == "alice@host"
    stored = cluster.call(lambda: cluster.sim.store.get(LEASES, NS, "vllm-oncall-lock"))
    assert stored["spec"]["holderIdentity"] == "bob@host"
    assert stored["spec"]["leaseTransitions"] == 3
    assert stored["spec"]["acquireTime"] != an_hour_ago


async def test_losing_the_race_for_an_expired_lease_is_a_refusal(
    cluster: Cluster, writer: KubeWriter, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Carol takes the lease between our read and our replace: our resourceVersion is stale."""
    old = "2020-01-01T00:00:00.000001Z"
    spec = {"holderIdentity": "alice@host", "leaseDurationSeconds": 1, "renewTime": old}
    lease = {"kind": "Lease", "metadata": {"name": "lock", "namespace": NS}, "spec": spec}
    cluster.call(lambda: cluster.sim.load([{"apiVersion": "coordination.k8s.io/v1", **lease}]))

    def carol_takes_it() -> None:
        current = cluster.sim.store.get(LEASES, NS, "lock")
        assert current is not None
        current["spec"].update(holderIdentity="carol@host", acquireTime=old, renewTime=old)
        current["spec"]["leaseDurationSeconds"] = 3600 * 24 * 365 * 100
        cluster.sim.store.replace(LEASES, current)

    write = writer._write

    async def racing_write(method: str, *args: Any, **kwargs: Any) -> Any:
        if method == "PUT":  # the replace that carries the resourceVersion we read
            cluster.call(carol_takes_it)
        return await write(method, *args, **kwargs)

    monkeypatch.setattr(writer, "_write", racing_write)
    bob = await writer.acquire_lease(NS, "lock", "bob@host", 300)
    assert not bob.acquired
    assert bob.holder == "carol@host"
    assert "the object has been modified" in bob.detail


# -- events, access reviews, configmaps ------------------------------------------------------


async def test_event_is_created_and_listed(writer: KubeWriter) -> None:
    pod = (await _live_pods(writer))[0]
    meta = pod["metadata"]
    involved = {"kind": "Pod", "name": meta["name"], "uid": meta["uid"], "apiVersion": "v1"}
    created = await writer.create_event(NS, involved, "OncallRebuild", "rebuilt by alice@host")
    assert created["involvedObject"]["uid"] == meta["uid"]
    events = await writer.list_events(NS, "Pod", meta["name"])
    ours = [e for e in events if e.get("reason") == "OncallRebuild"]
    assert len(ours) == 1
    assert ours[0]["message"] == "rebuilt by alice@host"
    assert ours[0]["type"] == "Normal"
    assert ours[0]["source"] == {"component": "oncall"}


async def test_can_i_is_unknown_where_access_reviews_are_not_served(
    writer: KubeWriter, ro_writer: KubeWriter
) -> None:
    """The simulator serves no SelfSubjectAccessReview: None (the dry run's 403 tells)."""
    assert await writer.can_i(NS, "delete", "pods") is None
    assert await ro_writer.can_i(NS, "patch", "deployments", group="apps") is None


@pytest.mark.parametrize("allowed", [True, False])
async def test_can_i_reads_the_access_review(tmp_path: Path, allowed: bool) -> None:
    review = {
        "kind": "SelfSubjectAccessReview",
        "apiVersion": "authorization.k8s.io/v1",
        "metadata": {},
        "spec": {"resourceAttributes": {"namespace": NS, "verb": "delete", "resource": "pods"}},
        "status": {"allowed": allowed},
    }
    with http_stub(201, json.dumps(review).encode(), "application/json") as url:
        port = int(url.rsplit(":", 1)[1])
        path = write_kubeconfig(tmp_path / "kubeconfig", port, Users())
        client = await KubeWriter.open(_settings(path))
        try:
            assert await client.can_i(NS, "delete", "pods") is allowed
        finally:
            client.close()


async def test_configmap_merge_patch_and_its_dry_run(writer: KubeWriter) -> None:
    before = await writer.get_configmap(NS, "ai-gateway")
    preview = await writer.patch_configmap(NS, "ai-gateway", {"degraded-mode": "2"}, dry_run=True)
    assert preview["data"]["degraded-mode"] == "2"
    assert await writer.get_configmap(NS, "ai-gateway") == before
    await writer.patch_configmap(NS, "ai-gateway", {"degraded-mode": "2"}, dry_run=False)
    after = await writer.get_configmap(NS, "ai-gateway")
    assert after["data"] == {**before["data"], "degraded-mode": "2"}


# -- failures and imports --------------------------------------------------------------------


async def test_a_silent_server_times_out_within_the_timeout(tmp_path: Path) -> None:
    timeout = 1.0
    with silent_listener() as port:
        path = write_kubeconfig(tmp_path / "kubeconfig", port, Users())
        client = await KubeWriter.open(_settings(path, timeout=timeout))
        try:
            started = time.monotonic()
            with pytest.raises(BackendError) as err:
                await client.delete_pod(NS, "vllm-0", uid="u", dry_run=False)
            elapsed = time.monotonic() - started
        finally:
            client.close()
    assert err.value.reason == "timeout"
    assert err.value.detail.startswith("no answer within 1s")
    assert "may have been applied" in err.value.detail
    assert timeout - 0.05 <= elapsed <= timeout + 0.5


def test_importing_the_writer_does_not_import_kubernetes() -> None:
    proc = loaded_by("import oncall.backends.kube_write, oncall.model.patches", "kubernetes")
    assert proc.stdout.strip() == "[]", proc.stderr
