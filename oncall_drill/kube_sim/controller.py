"""The simulator's control loop: one asyncio task that reconciles after every write.

It wakes on store changes (and every `resync` seconds, for progress deadlines), runs the
Deployment/ReplicaSet controllers, then the scheduler/kubelet. Reconciling is synchronous and
cheap; the slow parts (start delays, the pod hook) run in per-pod tasks owned by the Kubelet.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging

from oncall_drill.kube_sim.deployments import DeploymentController
from oncall_drill.kube_sim.events import EventRecorder
from oncall_drill.kube_sim.hpa import HpaController
from oncall_drill.kube_sim.kubelet import Kubelet
from oncall_drill.kube_sim.podhook import NoopPodHook, PodHook
from oncall_drill.kube_sim.resources import EVENTS, ResourceType
from oncall_drill.kube_sim.store import Obj, Store

log = logging.getLogger(__name__)


class Controller:
    """Owns the reconcile loop of one simulated cluster."""

    def __init__(
        self,
        store: Store,
        events: EventRecorder,
        *,
        hook: PodHook | None = None,
        start_delay: float = 0.5,
        ready_delay: float = 0.5,
        resync: float = 1.0,
    ) -> None:
        self.kubelet = Kubelet(
            store, events, hook or NoopPodHook(), start_delay=start_delay, ready_delay=ready_delay
        )
        self.deployments = DeploymentController(store, events, self.kubelet)
        self.hpas = HpaController(store, events)
        self._resync = resync
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._stopping = False
        store.add_listener(self._on_change)

    def _on_change(self, event: str, rt: ResourceType, obj: Obj) -> None:
        if rt is not EVENTS:
            self._wake.set()

    def wake(self) -> None:
        self._wake.set()

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.create_task(self._loop(), name="kube-sim-controller")

    async def stop(self) -> None:
        self._stopping = True
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
        await self.kubelet.shutdown()

    def reconcile(self) -> None:
        self.hpas.reconcile()
        self.deployments.reconcile()
        self.kubelet.reconcile()

    async def _loop(self) -> None:
        while not self._stopping:
            self._wake.clear()
            try:
                self.reconcile()
            except Exception:  # one bad object must not stop the cluster
                log.exception("kube-sim reconcile failed")
            # A breather, so that a reconcile which keeps writing cannot starve the server.
            await asyncio.sleep(0.002)
            # asyncio.timeout, not wait_for: on 3.11 wait_for can swallow a cancellation that
            # races with the event being set, and stop() would wait forever.
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(self._resync):
                    await self._wake.wait()
