"""Threat: a host's clock decides who holds a Lease (docs/audit.md): a clock 90 s ahead took
a live Lease, and a Lease was not renewed while its action was still verifying.

Against the drill's Kubernetes API (its `Date` header is the apiserver's clock) through
KubeWriter and TargetLease, as the executor uses them.
"""

from __future__ import annotations

import asyncio
import contextlib
from datetime import datetime, timedelta, tzinfo

import pytest

from oncall.backends import kube_leases
from oncall.remediation.actions.rebuild_pod import ACTION as REBUILD
from oncall.remediation.clients import Clients
from oncall.remediation.lease import TargetLease, holder_identity, lease_name
from oncall.settings import Settings
from oncall.settings.model import GuardsSettings, KubernetesSettings
from tests.drill.kube.conftest import NS, Cluster, kube_clients


class Ahead(datetime):
    """This host's clock, 90 s ahead of the apiserver's (an NTP-less bastion)."""

    @classmethod
    def now(cls, tz: tzinfo | None = None) -> datetime:  # type: ignore[override]
        return datetime.now(tz) + timedelta(seconds=90)


async def test_a_clock_90s_ahead_does_not_take_a_live_lease(
    drill: Cluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    pod = drill.ready_pods(2)[0].metadata.name
    async with kube_clients(drill) as first, kube_clients(drill) as second:
        plan = await REBUILD.plan(REBUILD.params(pod=pod), first)
        holder = TargetLease(first, holder_identity("oncall-operator"))
        assert (await holder.take(plan)).ok  # 60 s, by an honest clock
        try:
            monkeypatch.setattr(kube_leases, "datetime", Ahead)
            other = TargetLease(second, holder_identity("oncall-peer"))
            seen = await other.holder_verdict(plan)
            assert not seen.ok, seen  # by its own clock the Lease expired 30 s ago
            taken = await other.take(plan)
            assert not taken.ok and "is acting on" in taken.reason, taken
            monkeypatch.undo()
        finally:
            await holder.release(plan)


async def test_a_lease_is_renewed_while_its_action_runs(drill: Cluster) -> None:
    pod = drill.ready_pods(2)[0].metadata.name
    short = Settings(
        kubernetes=KubernetesSettings(kubeconfig=drill.kubeconfig, namespace=NS),
        guards=GuardsSettings(lease_duration=1.0),  # renewed every 0.5 s
    )
    first = Clients.from_settings(short)
    async with contextlib.aclosing(first), kube_clients(drill) as second:
        plan = await REBUILD.plan(REBUILD.params(pod=pod), first)
        holder = TargetLease(first, holder_identity("oncall-operator"))
        kube = await first.kube_writer()
        assert (await holder.take(plan)).ok
        try:
            taken = await kube.lease_holder(NS, lease_name(plan))
            assert taken is not None and taken.expires is not None
            async with holder.kept(plan):
                # The action is still verifying past the Lease's first expiry: wait (bounded)
                # until the apiserver's copy was renewed beyond it.
                async with asyncio.timeout(15):
                    while True:
                        now = await kube.lease_holder(NS, lease_name(plan))
                        assert now is not None and now.holder == holder.holder
                        if now.expires is not None and now.expires > taken.expires + timedelta(
                            seconds=1
                        ):
                            break
                        await asyncio.sleep(0.1)
                other = TargetLease(second, holder_identity("oncall-peer"))
                refused = await other.take(plan)
                assert not refused.ok, refused
        finally:
            await holder.release(plan)


async def test_rate_limits_are_decided_on_the_redis_servers_clock(
    redis_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A host whose clock runs 90 s ahead saw a 60 s window over early: one action recorded
    by an honest host, then checked from it, passed. The guards now ask Redis (TIME)."""
    import time

    import redis

    from oncall.backends.redis import RedisClient
    from oncall.backends.redis_write import RedisWriter
    from oncall.remediation.guards import RateLimit

    client = RedisClient(redis_url, timeout=2)
    try:
        honest = RateLimit(client, RedisWriter(client), actions=1, window_s=60)
        await honest.record("pod/ai/vllm-0")
        real = time.time
        monkeypatch.setattr(time, "time", lambda: real() + 90)
        ahead = RateLimit(client, RedisWriter(client), actions=1, window_s=60)
        verdict = await ahead.check("pod/ai/vllm-0")
        assert not verdict.ok, verdict
        server = redis.Redis.from_url(redis_url)
        seconds, micros = server.time()
        server.close()
        assert abs(await ahead.now() - (seconds + micros / 1e6)) < 5  # the server's, not +90
    finally:
        await client.aclose()
