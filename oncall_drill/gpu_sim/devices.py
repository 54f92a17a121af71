"""The simulated GPUs: identity, the pods on them, faults, and the derived readings.

Pure functions and value types, no I/O. Framebuffer memory behaves as vLLM makes it behave:
vLLM pre-allocates `--gpu-memory-utilization` (default 0.92) of the memory CUDA can allocate
at start (weights, activations and the whole KV-cache pool) plus its CUDA context, and holds
it, so `FB_USED` is flat whatever the traffic or `--max-num-seqs` (vLLM docs, "Optimization
and Tuning"; `vllm/config/cache.py`). Load moves utilisation, temperature and power only.
The card is an H100 80GB HBM3 as dcgm-exporter's own test data shows it: 81559 MiB in all,
81079 MiB free when idle (the rest is the driver's reserve, `FB_RESERVED`).
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field

#: `DCGM_FI_DEV_XID_ERRORS` value the `xid` fault sets when none is given: 48 is a
#: double-bit ECC error.
DEFAULT_XID = 48
#: Framebuffer fraction the `fb-full` fault pins: a process outside Kubernetes (nothing the
#: exporter can map to a pod) fills the card.
FB_FULL_FRACTION = 0.985
DRIVER_VERSION = "575.51.03"
#: vLLM's default `--gpu-memory-utilization` (`vllm/config/cache.py`, `Field(default=0.92)`).
DEFAULT_GPU_MEMORY_UTILIZATION = 0.92


@dataclass(frozen=True)
class Span:
    """A reading that goes from `idle` (no load) to `full` in proportion to the load."""

    idle: float
    full: float

    def at(self, load: float) -> float:
        """The reading at `load` (0: idle, 1: full)."""
        return self.idle + (self.full - self.idle) * load


@dataclass(frozen=True)
class GpuSpec:
    """The card: H100 80GB HBM3 numbers as dcgm-exporter reports them."""

    model_name: str = "NVIDIA H100 80GB HBM3"
    total_mib: int = 81559
    reserved_mib: int = 480
    #: A vLLM process's CUDA context and what else it holds outside its utilisation budget.
    context_mib: int = 512
    #: MIG mode: each GPU split into instances of this profile and framebuffer size.
    mig_profile: str = "3g.40gb"
    mig_instances: int = 2
    mig_instance_mib: int = 40320
    #: Board power and temperature, from idle to full (the simulator's power reaches 90% of
    #: its span at 100% utilisation; the temperature all of it).
    power_w: Span = Span(70.0, 700.0)
    temp_c: Span = Span(33.0, 78.0)

    @property
    def usable_mib(self) -> int:
        """What CUDA can allocate (used + free): vLLM's utilisation is a fraction of this."""
        return self.total_mib - self.reserved_mib


@dataclass(frozen=True)
class PodClaim:
    """A container holding GPUs (the kubelet pod-resources view) and the vLLM it runs."""

    namespace: str
    pod: str
    container: str = "vllm"
    vllm_url: str | None = None
    gpu_memory_utilization: float = DEFAULT_GPU_MEMORY_UTILIZATION
    gpus: int = 1

    @property
    def key(self) -> tuple[str, str, str]:
        return (self.namespace, self.pod, self.container)


@dataclass(frozen=True)
class Slot:
    """Something the device plugin hands to a pod: a whole GPU, or one MIG instance of it."""

    index: str
    hostname: str
    instance_id: str | None = None
    profile: str | None = None

    @property
    def uuid(self) -> str:
        """Stable per host and index, shaped like NVML's `GPU-xxxxxxxx-...` (MIG: the parent's)."""
        return f"GPU-{uuid.uuid5(uuid.NAMESPACE_DNS, f'{self.hostname}/gpu{self.index}')}"

    @property
    def pci_bus_id(self) -> str:
        number = int(self.index) if self.index.isdigit() else 0
        return f"00000000:{0x18 + 0x10 * number:02X}:00.0"

    def capacity_mib(self, spec: GpuSpec) -> int:
        """used + free of this slot."""
        return spec.mig_instance_mib if self.instance_id else spec.usable_mib


@dataclass(frozen=True)
class VllmLoad:
    """What a pod's vLLM simulator reported; `reachable=False` = idle (memory still held)."""

    reachable: bool
    running: int = 0
    max_num_seqs: int = 256

    @classmethod
    def from_state(cls, state: object) -> VllmLoad:
        """From vLLM's `GET /drill/state` JSON (`running`, `max_num_seqs`, `dead`)."""
        if not isinstance(state, dict) or state.get("dead") is True:
            return cls(reachable=False)
        try:
            running = max(0, int(state.get("running", 0)))
            seqs = max(1, int(state.get("max_num_seqs", 256)))
        except (TypeError, ValueError):
            return cls(reachable=False)
        return cls(reachable=True, running=running, max_num_seqs=seqs)


@dataclass
class DeviceFaults:
    """Faults of one GPU (exporter-wide faults live on the server)."""

    fb_full: bool = False
    xid: int = 0

    def describe(self) -> list[str]:
        out = ["fb-full"] if self.fb_full else []
        return [*out, f"xid={self.xid}"] if self.xid else out


@dataclass(frozen=True)
class Reading:
    """One scrape's values for one slot, in dcgm-exporter units; `per_pod_used` is each pod's
    own processes' memory (what GPU sharing's per-pod rows show)."""

    fb_used_mib: int
    fb_free_mib: int
    fb_reserved_mib: int
    util_pct: int
    temp_c: int
    power_w: float
    xid: int
    per_pod_used: dict[tuple[str, str, str], int] = field(default_factory=dict)
    per_pod_util: dict[tuple[str, str, str], int] = field(default_factory=dict)


def vllm_used_mib(spec: GpuSpec, slot: Slot, utilization: float) -> int:
    """What one vLLM process holds on a slot from start to exit: utilisation × capacity +
    its context (`vllm/v1/worker/gpu_worker.py` sizes the KV pool to fill the budget)."""
    return round(max(0.0, min(1.0, utilization)) * slot.capacity_mib(spec)) + spec.context_mib


def _util(load: VllmLoad) -> int:
    if not load.reachable or load.running == 0:
        return 0
    busy = min(1.0, load.running / min(load.max_num_seqs, 16))
    return round(40 + 60 * busy)


def read_slot(
    spec: GpuSpec,
    slot: Slot,
    pods: list[tuple[PodClaim, VllmLoad]],
    faults: DeviceFaults,
) -> Reading:
    """The readings of a slot with these pods on it (independent of their load for memory)."""
    capacity = slot.capacity_mib(spec)
    shares = {
        claim.key: vllm_used_mib(spec, slot, claim.gpu_memory_utilization) for claim, _ in pods
    }
    used = float(sum(shares.values()))
    if faults.fb_full:
        used = max(used, FB_FULL_FRACTION * capacity)
    used_mib = min(capacity, round(used))
    utils = {claim.key: _util(load) for claim, load in pods}
    util = min(100, sum(utils.values()))
    temp = spec.temp_c.at(util / 100)
    power = spec.power_w.at(0.9 * (util / 100))
    return Reading(
        fb_used_mib=used_mib,
        fb_free_mib=capacity - used_mib,
        fb_reserved_mib=0 if slot.instance_id else spec.reserved_mib,
        util_pct=util,
        temp_c=round(temp),
        power_w=round(power, 3),
        xid=faults.xid,
        per_pod_used={key: min(capacity, mib) for key, mib in shares.items()},
        per_pod_util=utils,
    )
