"""Which pod holds which GPU: the kubelet pod-resources view dcgm-exporter maps pods from.

`Allocator` plays the device plugin: a pod that appears gets the lowest free slot (a whole GPU,
a MIG instance, or a time-slicing replica) and keeps it while it exists; a pod that is gone
frees it. `kube_pod_claims` lists, from the drill's Kubernetes simulator, the containers that
hold `nvidia.com/gpu` on a node and whose vLLM process runs, with the
`--gpu-memory-utilization` that process was started with (parsed as the vLLM simulator parses
it).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from oncall_drill.gpu_sim.devices import DEFAULT_GPU_MEMORY_UTILIZATION, PodClaim, Slot

if TYPE_CHECKING:
    from oncall_drill.kube_sim import KubeSim

PodSource = Callable[[], Sequence[PodClaim]]
PORT_ANNOTATION = "drill.oncall.dev/port"
GPU_RESOURCE = "nvidia.com/gpu"


def static_pods(claims: Sequence[PodClaim]) -> PodSource:
    """A fixed set of pods (tests, the stand-alone exporter)."""
    frozen = tuple(claims)
    return lambda: frozen


class Allocator:
    """Stable pod → slot assignment; `per_slot` pods may share a slot (time-slicing)."""

    def __init__(self, slots: Sequence[Slot], per_slot: int = 1) -> None:
        self.slots = list(slots)
        self.per_slot = per_slot
        self._held: dict[tuple[str, str, str], list[tuple[int, int]]] = {}

    def assign(self, claims: Sequence[PodClaim]) -> dict[int, list[tuple[PodClaim, int]]]:
        """slot position → [(pod, replica)], after pods came and went. A pod that does not fit
        holds nothing (on a real node it would stay Pending)."""
        current = {claim.key: claim for claim in claims}
        for key in list(self._held):
            if key not in current:
                del self._held[key]
        taken = {place for places in self._held.values() for place in places}
        for key, claim in current.items():
            if key in self._held:
                continue
            # Fill replicas of a GPU before the next GPU, as the device plugin's packing does.
            free = [
                (slot, replica)
                for slot in range(len(self.slots))
                for replica in range(self.per_slot)
                if (slot, replica) not in taken
            ]
            if len(free) < claim.gpus:
                continue
            places = free[: claim.gpus]
            self._held[key] = places
            taken.update(places)
        out: dict[int, list[tuple[PodClaim, int]]] = {}
        for key, places in self._held.items():
            for slot, replica in places:
                out.setdefault(slot, []).append((current[key], replica))
        return out


def _gpu_memory_utilization(args: list[str]) -> float:
    """What the pod's vLLM simulator process runs with (it parses the same args)."""
    from oncall_drill.vllm_sim.argv import ArgvError, parse_argv

    try:
        return float(parse_argv(args).config.gpu_memory_utilization)
    except (ArgvError, ValueError):
        return DEFAULT_GPU_MEMORY_UTILIZATION


def kube_pod_claims(sim: KubeSim, namespace: str, selector: str, node: str) -> PodSource:
    """The GPU-holding containers on `node` whose process runs (they have a port)."""
    from oncall_drill.kube_sim.podhook import container_args

    def claims() -> list[PodClaim]:
        found: list[PodClaim] = []
        for pod in sim.pods(namespace, selector):
            meta, spec = pod.get("metadata") or {}, pod.get("spec") or {}
            port = (meta.get("annotations") or {}).get(PORT_ANNOTATION)
            if not port or spec.get("nodeName") != node:
                continue
            for container in spec.get("containers") or []:
                limits = (container.get("resources") or {}).get("limits") or {}
                gpus = int(str(limits.get(GPU_RESOURCE, "0")) or 0)
                if gpus <= 0:
                    continue
                name = str(container.get("name") or "")
                found.append(
                    PodClaim(
                        namespace=str(meta.get("namespace") or namespace),
                        pod=str(meta.get("name")),
                        container=name,
                        vllm_url=f"http://127.0.0.1:{port}",
                        gpu_memory_utilization=_gpu_memory_utilization(container_args(pod, name)),
                        gpus=gpus,
                    )
                )
        return found

    return claims
