"""The pod hook that makes a simulated vLLM pod a real process.

When the Kubernetes simulator starts a pod's container, `VllmPodHook.started` runs
`python -m oncall_drill.vllm_sim` with the container's own args (so a Deployment patch of
`--max-num-seqs` really changes behaviour) on a free loopback port, waits until `/health`
answers, and returns the port as a pod annotation; `stopped` ends the process (SIGTERM, or
SIGKILL at once when the kubelet reports the container OOMKilled: the kernel does not wait).
The processes die with the cluster process (PR_SET_PDEATHSIG) and share its process group, so
stopping the cluster stops every pod.

Each container instance writes to its own file, named after its containerID, as the kubelet
keeps one log per instance: `container_log(id)` serves `kubectl logs [--previous]`.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import signal
import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp

from oncall_drill.kube_sim.podhook import container_args
from oncall_drill.netutil import LOOPBACK, free_loopback_port

PORT_ANNOTATION = "drill.oncall.dev/port"
ExitCallback = Callable[[str, str, int], None]
"""Called with (namespace, pod, exit code) when a pod's process dies on its own."""
PR_SET_PDEATHSIG = 1
#: The most of one container's log kept for reading (the kubelet rotates at 10 MiB).
LOG_READ_LIMIT = 4 * 1024 * 1024


def _die_with_parent() -> None:
    libc = ctypes.CDLL("libc.so.6", use_errno=True)
    libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL)


@dataclass
class RunningPod:
    name: str
    uid: str
    port: int
    process: asyncio.subprocess.Process
    container_id: str = ""


def _container_id(pod: Mapping[str, Any]) -> str:
    """The containerID the kubelet gave the instance being started (first container)."""
    statuses = (pod.get("status") or {}).get("containerStatuses") or []
    return str(statuses[0].get("containerID") or "") if statuses else ""


def _oom_killed(pod: Mapping[str, Any], container_id: str) -> bool:
    """Whether the kubelet reports this very instance terminated OOMKilled."""
    for status in (pod.get("status") or {}).get("containerStatuses") or []:
        terminated = (status.get("lastState") or {}).get("terminated") or {}
        if terminated.get("containerID") == container_id:
            return bool(terminated.get("reason") == "OOMKilled")
    return False


@dataclass
class VllmPodHook:
    """Spawns one vLLM simulator per started pod; `pods` maps pod UID to the running process."""

    log_dir: Path
    kv_capacity_tokens: int = 12_000
    tokens_per_second: float = 150.0
    ready_timeout: float = 30.0
    grace: float = 3.0
    on_exit: ExitCallback | None = None
    #: Run a process only for pods with these labels (the fleet's other pods run nothing).
    only_labels: Mapping[str, str] | None = None
    pods: dict[str, RunningPod] = field(default_factory=dict)
    #: containerID -> the file its instance writes to
    logs: dict[str, Path] = field(default_factory=dict)
    #: pod UID -> its instances' containerIDs, oldest first (the current and the previous)
    _instances: dict[str, list[str]] = field(default_factory=dict)
    _watchers: set[asyncio.Task[None]] = field(default_factory=set)

    async def started(self, pod: Mapping[str, Any]) -> Mapping[str, str] | None:
        meta = pod.get("metadata") or {}
        labels = meta.get("labels") or {}
        if self.only_labels and any(labels.get(k) != v for k, v in self.only_labels.items()):
            return None
        name, uid = str(meta.get("name", "pod")), str(meta.get("uid", ""))
        port = free_loopback_port()
        # Defaults first: the container's own args come after them and win.
        argv = [
            sys.executable,
            "-m",
            "oncall_drill.vllm_sim",
            "--kv-capacity-tokens",
            str(self.kv_capacity_tokens),
            "--tokens-per-second",
            f"{self.tokens_per_second:g}",
            *container_args(pod),
            "--host",
            LOOPBACK,
            "--port",
            str(port),
            "--pod-name",
            name,
        ]
        container_id = _container_id(pod)
        path = self.log_dir / f"pod-{name}-{container_id.rpartition('/')[2][:12]}.log"
        self.logs[container_id] = path
        instances = self._instances.setdefault(uid, [])
        instances.append(container_id)
        for gone in instances[:-2]:  # the kubelet keeps the current and the previous log
            self.logs.pop(gone, None)
        del instances[:-2]
        log = path.open("ab")
        try:
            process = await asyncio.create_subprocess_exec(
                *argv,
                stdin=asyncio.subprocess.DEVNULL,
                stdout=log,
                stderr=asyncio.subprocess.STDOUT,
                preexec_fn=_die_with_parent,  # only prctl: no locks taken
            )
        finally:
            log.close()
        self.pods[uid] = RunningPod(name, uid, port, process, container_id)
        if not await self._healthy(port, process):
            await self.stopped(pod)
            raise RuntimeError(f"vLLM simulator of pod {name} did not become healthy")
        watcher = asyncio.create_task(self._watch(str(meta.get("namespace", "")), name, uid))
        self._watchers.add(watcher)
        watcher.add_done_callback(self._watchers.discard)
        return {PORT_ANNOTATION: str(port)}

    async def _watch(self, namespace: str, name: str, uid: str) -> None:
        """Report a process that exits by itself (engine death) so the pod restarts."""
        running = self.pods.get(uid)
        if running is None:
            return
        code = await running.process.wait()
        if self.pods.get(uid) is running:  # not stopped by us
            del self.pods[uid]
            if self.on_exit is not None:
                self.on_exit(namespace, name, code)

    async def _healthy(self, port: int, process: asyncio.subprocess.Process) -> bool:
        """Poll /health until 200: a starting server has nothing else to wait on."""
        deadline = time.monotonic() + self.ready_timeout
        timeout = aiohttp.ClientTimeout(total=1.0)
        async with aiohttp.ClientSession(timeout=timeout) as session:
            while time.monotonic() < deadline and process.returncode is None:
                with contextlib.suppress(aiohttp.ClientError, TimeoutError):
                    async with session.get(f"http://{LOOPBACK}:{port}/health") as response:
                        if response.status == 200:
                            return True
                await asyncio.sleep(0.05)
        return False

    def container_log(self, container_id: str) -> bytes | None:
        """What the instance with this containerID printed (its last LOG_READ_LIMIT bytes)."""
        path = self.logs.get(container_id)
        if path is None or not path.exists():
            return None
        with path.open("rb") as file:
            size = file.seek(0, 2)
            file.seek(max(0, size - LOG_READ_LIMIT))
            return file.read()

    async def stopped(self, pod: Mapping[str, Any]) -> None:
        uid = str((pod.get("metadata") or {}).get("uid", ""))
        running = self.pods.pop(uid, None)
        if running is None or running.process.returncode is not None:
            return
        with contextlib.suppress(ProcessLookupError):
            if _oom_killed(pod, running.container_id):
                running.process.kill()
            else:
                running.process.terminate()
        try:
            await asyncio.wait_for(running.process.wait(), self.grace)
        except TimeoutError:
            with contextlib.suppress(ProcessLookupError):
                running.process.kill()
            await running.process.wait()

    async def stop_all(self) -> None:
        for uid in list(self.pods):
            running = self.pods[uid]
            await self.stopped({"metadata": {"uid": uid, "name": running.name}})
