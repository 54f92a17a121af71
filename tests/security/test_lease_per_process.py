"""Threat: Leases that exclude names, not processes (issue 12, item 2).

Against the drill's Kubernetes API through KubeWriter: two remediators of ONE identity (two
terminals of one operator, a shared bastion account, a spoofed `$USER`) are different holders;
"held by my identity" is not free; a release by anyone but the holder deletes nothing; and a
rebuild holds its pod's Deployment's Lease, so the sibling pod cannot be rebuilt meanwhile.
"""

from __future__ import annotations

from oncall.remediation.actions.rebuild_pod import ACTION as REBUILD
from oncall.remediation.lease import TargetLease, holder_identity, lease_name
from tests.drill.kube.conftest import NS, Cluster, kube_clients


async def test_two_processes_of_one_identity_do_not_share_a_lease(drill: Cluster) -> None:
    first, second = (p.metadata.name for p in drill.ready_pods(2))
    async with kube_clients(drill) as c:
        plan_a = await REBUILD.plan(REBUILD.params(pod=first), c)
        plan_b = await REBUILD.plan(REBUILD.params(pod=second), c)
        assert plan_a.workload is not None and plan_a.workload.label == "Deployment ai/vllm"
        one, two = holder_identity("oncall-operator"), holder_identity("oncall-operator")
        assert one != two and one.startswith("oncall-operator@")
        alice_1, alice_2 = TargetLease(c, one), TargetLease(c, two)
        assert (await alice_1.take(plan_a)).ok
        try:
            # Same identity, other process: not free in the preview, refused when taking.
            seen = await alice_2.holder_verdict(plan_b)
            assert not seen.ok and seen.holder == one
            taken = await alice_2.take(plan_b)
            assert not taken.ok
            assert taken.detail["lease"] == "oncall-deployment-ai-vllm"
            assert f"{one} is acting on Deployment ai/vllm" in taken.reason
            # The refused one took nothing, and its release deletes nothing of alice_1's.
            await alice_2.release(plan_b)
            kube = await c.kube_writer()
            for target in plan_a.lease_targets:
                held = await kube.lease_holder(NS, lease_name(target))
                assert held is not None and held.holder == one
            assert await kube.lease_holder(NS, lease_name(plan_b)) is None
            # The spoofed name ("oncall-operator@host", the old holder format) is not the holder.
            assert not await kube.release_lease(NS, lease_name(plan_a), "oncall-operator@x")
        finally:
            await alice_1.release(plan_a)
        kube = await c.kube_writer()
        for target in plan_a.lease_targets:
            assert await kube.lease_holder(NS, lease_name(target)) is None
        assert (await alice_2.take(plan_b)).ok  # free again once released by its holder
        await alice_2.release(plan_b)
