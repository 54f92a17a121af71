"""The simulated GPUs: identity, the load read from vLLM, faults, and the derived readings.

Pure functions and value types, no I/O. Memory follows vLLM's KV usage the way a reader of
`nvidia-smi` expects on an 80 GiB H100: a CUDA context, the model weights, and the part of the
KV pool in use. (Real vLLM pre-allocates its whole pool, so real `FB_USED` is flat; the drill
makes memory move with load so the "GPU memory > 95%" alert can be reached by load alone.)
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field

#: `DCGM_FI_DEV_XID_ERRORS` value the `xid` fault sets when none is given: 48 is a
#: double-bit ECC error, the classic "drain the node" XID.
DEFAULT_XID = 48
#: Framebuffer fraction the `fb-full` fault pins (the brief: > 97%).
FB_FULL_FRACTION = 0.985
DRIVER_VERSION = "550.90.07"


@dataclass(frozen=True)
class GpuSpec:
    """The card: H100 80GB HBM3 numbers as dcgm-exporter reports them."""

    model_name: str = "NVIDIA H100 80GB HBM3"
    total_mib: int = 81559
    context_mib: int = 520
    idle_power_w: float = 70.0
    max_power_w: float = 700.0
    idle_temp_c: float = 33.0
    max_temp_c: float = 78.0


@dataclass(frozen=True)
class PodRef:
    """The Kubernetes container using the GPU (dcgm-exporter's pod mapping)."""

    namespace: str
    pod: str
    container: str = "vllm"

    @classmethod
    def parse(cls, text: str) -> PodRef:
        """`namespace/pod` or `namespace/pod/container`."""
        parts = text.split("/")
        if len(parts) not in (2, 3) or not all(parts):
            raise ValueError(f"{text!r}: expected NAMESPACE/POD[/CONTAINER]")
        return cls(*parts)


@dataclass(frozen=True)
class Gpu:
    """One simulated GPU and what it is bound to."""

    index: str
    hostname: str
    vllm_url: str
    pod: PodRef | None = None

    @property
    def uuid(self) -> str:
        """Stable per host and index, shaped like NVML's `GPU-xxxxxxxx-...`."""
        return f"GPU-{uuid.uuid5(uuid.NAMESPACE_DNS, f'{self.hostname}/gpu{self.index}')}"

    @property
    def pci_bus_id(self) -> str:
        """A plausible PCI bus id, distinct per index."""
        number = int(self.index) if self.index.isdigit() else 0
        return f"00000000:{0x18 + 0x10 * number:02X}:00.0"

    def labels(self, spec: GpuSpec) -> dict[str, str]:
        """Labels in dcgm-exporter's order; pod labels are empty when no pod is mapped."""
        pod = self.pod
        return {
            "gpu": self.index,
            "UUID": self.uuid,
            "pci_bus_id": self.pci_bus_id,
            "device": f"nvidia{self.index}",
            "modelName": spec.model_name,
            "Hostname": self.hostname,
            "DCGM_FI_DRIVER_VERSION": DRIVER_VERSION,
            "container": pod.container if pod else "",
            "namespace": pod.namespace if pod else "",
            "pod": pod.pod if pod else "",
        }


@dataclass(frozen=True)
class VllmLoad:
    """What the bound vLLM simulator reported; `reachable=False` = idle, weights loaded."""

    reachable: bool
    kv_usage: float = 0.0
    running: int = 0
    max_num_seqs: int = 256

    @classmethod
    def from_state(cls, state: object) -> VllmLoad:
        """From vLLM's `GET /drill/state` JSON (`kv_usage` 0–1, `running`, `max_num_seqs`)."""
        if not isinstance(state, dict) or state.get("dead") is True:
            return cls(reachable=False)
        try:
            kv = min(1.0, max(0.0, float(state.get("kv_usage", 0.0))))
            running = max(0, int(state.get("running", 0)))
            seqs = max(1, int(state.get("max_num_seqs", 256)))
        except (TypeError, ValueError):
            return cls(reachable=False)
        return cls(reachable=True, kv_usage=kv, running=running, max_num_seqs=seqs)


@dataclass
class DeviceFaults:
    """Faults of one GPU (exporter-wide faults live on the server)."""

    fb_full: bool = False
    xid: int = 0

    def describe(self) -> list[str]:
        """Active faults, for `GET /drill/state`."""
        out = ["fb-full"] if self.fb_full else []
        return [*out, f"xid={self.xid}"] if self.xid else out


@dataclass(frozen=True)
class Reading:
    """One scrape's values for one GPU, in dcgm-exporter units."""

    fb_used_mib: int
    fb_free_mib: int
    util_pct: int
    temp_c: int
    power_w: float
    xid: int
    notes: tuple[str, ...] = field(default=())


@dataclass(frozen=True)
class MemoryModel:
    """How much of the card vLLM takes: weights, and a KV pool up to `utilization`."""

    weights_mib: int = 15360
    #: vLLM's --gpu-memory-utilization for the pool's ceiling. 0.97 (not vLLM's 0.92) so a
    #: full KV cache crosses the 95% alert line, as in the source articles' incidents.
    utilization: float = 0.97


def read_gpu(spec: GpuSpec, memory: MemoryModel, load: VllmLoad, faults: DeviceFaults) -> Reading:
    """The readings of a GPU under load and faults."""
    base = spec.context_mib + memory.weights_mib
    pool = max(0.0, memory.utilization * spec.total_mib - base)
    used = base + load.kv_usage * pool if load.reachable else float(base)
    notes: list[str] = [] if load.reachable else ["vLLM state unavailable: idle, weights loaded"]
    if faults.fb_full:
        used = max(used, FB_FULL_FRACTION * spec.total_mib)
    used_mib = min(spec.total_mib, round(used))
    if load.reachable and load.running > 0:
        busy = min(1.0, load.running / min(load.max_num_seqs, 16))
        util = round(40 + 60 * busy)
    else:
        util = 0
    temp = spec.idle_temp_c + (spec.max_temp_c - spec.idle_temp_c) * util / 100
    power = spec.idle_power_w + (spec.max_power_w - spec.idle_power_w) * 0.9 * util / 100
    return Reading(
        fb_used_mib=used_mib,
        fb_free_mib=spec.total_mib - used_mib,
        util_pct=util,
        temp_c=round(temp),
        power_w=round(power, 3),
        xid=faults.xid,
        notes=tuple(notes),
    )
