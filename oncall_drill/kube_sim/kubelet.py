"""The simulated scheduler + kubelet: places pods on nodes and runs them through the pod hook.

Scheduling honours allocatable minus the requests of the pods on a node (`nvidia.com/gpu`,
cpu, memory), taints and tolerations and nodeSelector (`scheduling.py`): a surge pod with no
spare GPU stays Pending with a `FailedScheduling` event on the pod worded as kube-scheduler
words it (`fit_error.py`, as on a real GPU fleet). A scheduled pod goes Running after
`start_delay`, then the hook's `started(pod)` runs, then Ready after `ready_delay`. Deletion
is graceful: the pod gets a deletionTimestamp, the hook's `stopped(pod)` runs, then the pod
leaves the store.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import logging
from datetime import UTC, datetime, timedelta
from decimal import Decimal

from oncall_drill.kube_sim import podstatus, scheduling
from oncall_drill.kube_sim.events import EventRecorder
from oncall_drill.kube_sim.fit_error import fit_error
from oncall_drill.kube_sim.podhook import PodHook
from oncall_drill.kube_sim.resources import NODES, PODS
from oncall_drill.kube_sim.store import Obj, Store, now_rfc3339

log = logging.getLogger(__name__)

SHUTDOWN_TIMEOUT_S = 10.0


def _node_ip(node: Obj) -> str:
    for addr in (node.get("status") or {}).get("addresses") or []:
        if addr.get("type") == "InternalIP":
            return str(addr.get("address"))
    return "10.0.0.1"


class Kubelet:
    """Runs pods: scheduling, start/ready, container restarts, graceful termination."""

    def __init__(
        self,
        store: Store,
        events: EventRecorder,
        hook: PodHook,
        *,
        start_delay: float,
        ready_delay: float,
    ) -> None:
        self._store = store
        self._events = events
        self._hook = hook
        self.start_delay = start_delay
        self.ready_delay = ready_delay
        self._runs: dict[str, asyncio.Task[None]] = {}  # pod uid -> start/restart task
        self._stops: dict[str, asyncio.Task[None]] = {}  # pod uid -> termination task
        self._hook_started: set[str] = set()  # uids whose hook.started ran without stopped
        self._next_ip = 10
        self._requests: dict[str, dict[str, Decimal]] = {}  # pod uid -> its requests (immutable)
        self._seen = (-1, -1)  # the pods' and nodes' revisions the last reconcile pass saw

    @property
    def hook(self) -> PodHook:
        """What runs the pods' processes (the log route reads their output through it)."""
        return self._hook

    # -- reconcile (called by the controller loop) -----------------------------------------

    def reconcile(self) -> None:
        # Over the stored pods without copying them (a fleet holds thousands, nearly all settled);
        # only a pod that needs work is copied.
        # Scheduling depends on the nodes too (a cleared taint lets a Pending pod in).
        seen = (self._store.changed(PODS), self._store.changed(NODES))
        if seen == self._seen:
            return  # nothing changed since the last pass, and that pass started what it needed
        self._seen = seen
        for stored in list(self._store.scan(PODS)):
            if not self._needs_work(stored):
                continue
            pod = copy.deepcopy(stored)
            uid = pod["metadata"]["uid"]
            if podstatus.is_terminating(pod):
                if uid not in self._stops:
                    self._stops[uid] = asyncio.create_task(self._terminate(pod))
            elif not (pod.get("spec") or {}).get("nodeName"):
                self._schedule(pod)
            elif (pod.get("status") or {}).get("phase", "Pending") == "Pending" and not (
                uid in self._runs or uid in self._hook_started
            ):
                self._runs[uid] = asyncio.create_task(self._run(pod))

    def _needs_work(self, pod: Obj) -> bool:
        uid = pod["metadata"]["uid"]
        if podstatus.is_terminating(pod):
            return uid not in self._stops
        if not (pod.get("spec") or {}).get("nodeName"):
            return True
        phase = (pod.get("status") or {}).get("phase", "Pending")
        return phase == "Pending" and not (uid in self._runs or uid in self._hook_started)

    def _schedule(self, pod: Obj) -> None:
        # The scheduler's filters and resource accounting: scheduling.py.
        used = scheduling.requested_by_node(self._store.scan(PODS), self._requests)
        reasons: list[str] = []
        for node in self._store.list(NODES):
            name = node["metadata"]["name"]
            reason = scheduling.unfit_reason(node, pod, used.get(name, {}))
            if reason is None:
                podstatus.mark_scheduled(pod, name)
                stored = self._store.replace(PODS, pod)
                ns, pod_name = pod["metadata"]["namespace"], pod["metadata"]["name"]
                self._events.record_scheduling(
                    stored, "Scheduled", f"Successfully assigned {ns}/{pod_name} to {name}"
                )
                return
            reasons.append(reason)
        short = {r for r in reasons if r.startswith("Insufficient ")}
        message = fit_error(reasons, short)
        before = [
            c
            for c in (pod.get("status") or {}).get("conditions") or []
            if c.get("type") == "PodScheduled"
        ]
        if not before or before[0].get("message") != message:
            podstatus.mark_unschedulable(pod, message)
            stored = self._store.replace(PODS, pod)
            self._events.record_scheduling(stored, "FailedScheduling", message, type_="Warning")

    # -- pod lifecycle ----------------------------------------------------------------------

    def _current(self, pod: Obj) -> Obj | None:
        """The stored version of pod if it is still the same, live object."""
        meta = pod["metadata"]
        now = self._store.get(PODS, meta["namespace"], meta["name"])
        if now is None or now["metadata"]["uid"] != meta["uid"] or podstatus.is_terminating(now):
            return None
        return now

    async def _run(self, pod: Obj) -> None:
        uid = pod["metadata"]["uid"]
        try:
            await asyncio.sleep(self.start_delay)
            current = self._current(pod)
            if current is None:
                return
            node = self._store.get(NODES, None, current["spec"]["nodeName"]) or {}
            podstatus.mark_running(current, _node_ip(node), self._allocate_ip())
            current = self._store.replace(PODS, current)
            for name in podstatus.container_names(current):
                path = f"spec.containers{{{name}}}"
                host = current["spec"]["nodeName"]
                self._events.record(
                    current, "Created", f"Created container {name}", host=host, field_path=path
                )
                self._events.record(
                    current, "Started", f"Started container {name}", host=host, field_path=path
                )
            await self._start_container(current)
        finally:
            if self._runs.get(uid) is asyncio.current_task():
                del self._runs[uid]

    def _allocate_ip(self) -> str:
        self._next_ip += 1
        return f"10.244.{(self._next_ip // 250) % 250}.{self._next_ip % 250 + 2}"

    async def _start_container(self, pod: Obj) -> None:
        uid = pod["metadata"]["uid"]
        self._hook_started.add(uid)
        try:
            annotations = await self._hook.started(pod)
        except Exception as exc:  # the hook's process failed: the container crash-loops
            log.warning("pod hook failed to start %s: %s", pod["metadata"]["name"], exc)
            current = self._current(pod)
            if current is not None:
                podstatus.mark_crashed(current, str(exc))
                current = self._store.replace(PODS, current)
                self._events.record(
                    current,
                    "BackOff",
                    f"Back-off restarting failed container in pod {pod['metadata']['name']}",
                    type_="Warning",
                    host=current["spec"].get("nodeName"),
                )
            return
        await asyncio.sleep(self.ready_delay)
        current = self._current(pod)
        if current is None:
            return
        if annotations:
            current["metadata"].setdefault("annotations", {}).update(dict(annotations))
        podstatus.mark_ready(current)
        self._store.replace(PODS, current)

    def restart_container(self, pod: Obj) -> None:
        """After a container died: stop its process, start it again, become Ready again."""
        uid = pod["metadata"]["uid"]
        previous = self._runs.pop(uid, None)
        self._runs[uid] = asyncio.create_task(self._restart(pod, previous))

    async def _restart(self, pod: Obj, previous: asyncio.Task[None] | None) -> None:
        uid = pod["metadata"]["uid"]
        try:
            if previous is not None:
                previous.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await previous
            await self._stop_hook(pod)
            await asyncio.sleep(self.start_delay)
            current = self._current(pod)
            if current is not None:
                await self._start_container(current)
        finally:
            if self._runs.get(uid) is asyncio.current_task():
                del self._runs[uid]

    async def _stop_hook(self, pod: Obj) -> None:
        uid = pod["metadata"]["uid"]
        if uid not in self._hook_started:
            return
        self._hook_started.discard(uid)
        try:
            await self._hook.stopped(pod)
        except Exception:
            log.exception("pod hook failed to stop %s", pod["metadata"]["name"])

    # -- deletion ---------------------------------------------------------------------------

    def begin_delete(self, pod: Obj, grace: int) -> Obj:
        """Start deleting a stored pod (what DELETE and the controllers do); returns the pod."""
        meta = pod["metadata"]
        if podstatus.is_terminating(pod):
            return pod
        if grace <= 0 or not (pod.get("spec") or {}).get("nodeName"):
            # Immediate deletion: gone from the store now, the process is stopped behind it.
            removed = self._store.delete(PODS, meta["namespace"], meta["name"]) or pod
            removed["metadata"]["deletionTimestamp"] = now_rfc3339()
            removed["metadata"]["deletionGracePeriodSeconds"] = 0
            self._stops[meta["uid"]] = asyncio.create_task(self._terminate(removed))
            return removed
        deadline = datetime.now(UTC) + timedelta(seconds=grace)
        meta["deletionTimestamp"] = deadline.strftime("%Y-%m-%dT%H:%M:%SZ")
        meta["deletionGracePeriodSeconds"] = grace
        stored = self._store.replace(PODS, pod)
        for name in podstatus.container_names(stored):
            self._events.record(
                stored,
                "Killing",
                f"Stopping container {name}",
                host=stored["spec"].get("nodeName"),
                field_path=f"spec.containers{{{name}}}",
            )
        return stored

    async def _terminate(self, pod: Obj) -> None:
        meta = pod["metadata"]
        uid = meta["uid"]
        try:
            run = self._runs.pop(uid, None)
            if run is not None:
                run.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await run
            await self._stop_hook(pod)
            current = self._store.get(PODS, meta["namespace"], meta["name"])
            if current is not None and current["metadata"]["uid"] == uid:
                self._store.delete(PODS, meta["namespace"], meta["name"])
        finally:
            self._stops.pop(uid, None)

    async def shutdown(self) -> None:
        """Cancel every pending transition and stop every process a hook started."""
        runs = list(self._runs.values())
        for task in runs:
            task.cancel()
        for task in runs:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        # Terminations are left to finish: cancelling one could orphan the process it stops.
        stops = list(self._stops.values())
        if stops:
            await asyncio.wait(stops, timeout=SHUTDOWN_TIMEOUT_S)
        # Only the pods whose hook started (not a copy of every pod of a 5,000-pod fleet).
        started = [p for p in self._store.scan(PODS) if p["metadata"]["uid"] in self._hook_started]
        for pod in started:
            await self._stop_hook(copy.deepcopy(pod))
        self._hook_started.clear()
