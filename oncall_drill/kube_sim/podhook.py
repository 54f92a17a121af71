"""The pluggable "kubelet" hook: what really runs when a simulated pod runs.

The controller calls `started(pod)` once the pod is scheduled and its container is running, and
marks the pod Ready when that coroutine returns (so a hook that spawns a vLLM simulator returns
when the process answers its health check). It calls `stopped(pod)` when the container stops: the
pod is deleted, or the container is killed (an OOM kill) before being restarted. `stopped` is
called exactly once for every `started` call, even one that raised or was cancelled, and never for
a pod whose container never started. Both receive a deep copy of the Pod (core/v1 JSON).

A hook that also keeps what its processes print implements `logs.ContainerLogs`
(`container_log(container_id)`), and the simulator serves `GET .../pods/NAME/log` from it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol


class PodHook(Protocol):
    """Start and stop the processes behind a pod."""

    async def started(self, pod: Mapping[str, Any]) -> Mapping[str, str] | None:
        """Start the pod's process; return when it is ready.

        Returned annotations (e.g. the loopback port of the spawned process) are added to the
        pod's metadata.annotations. Raising marks the container as crashed (CrashLoopBackOff).
        """
        ...

    async def stopped(self, pod: Mapping[str, Any]) -> None:
        """Stop the pod's process (SIGTERM, then SIGKILL within the grace period)."""
        ...


class NoopPodHook:
    """The default hook: nothing runs; pods become Ready after the controller's delay."""

    async def started(self, pod: Mapping[str, Any]) -> Mapping[str, str] | None:
        return None

    async def stopped(self, pod: Mapping[str, Any]) -> None:
        return None


def container(pod: Mapping[str, Any], name: str | None = None) -> Mapping[str, Any] | None:
    """The named container of a pod spec (the first one when name is None)."""
    containers = (pod.get("spec") or {}).get("containers") or []
    for c in containers:
        if name is None or c.get("name") == name:
            found: Mapping[str, Any] = c
            return found
    return None


def container_args(pod: Mapping[str, Any], name: str | None = None) -> list[str]:
    """The container's `args` (what a hook passes to the process it spawns)."""
    found = container(pod, name)
    return [str(a) for a in (found or {}).get("args") or []]
