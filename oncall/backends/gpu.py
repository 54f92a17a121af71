"""Read-only GPU facts from NVML on this host, or from dcgm-exporter metrics in Prometheus.

Two sources give the same `GpuDevice` values:

* NVML (`nvidia-ml-py`, module `pynvml`) reads the GPUs of the host oncall runs on — the
  numbers `nvidia-smi` prints. `pynvml` is imported on first use, NVML is initialised once
  per `NvmlClient`, and every call runs in a daemon thread bounded by the client's timeout,
  because NVML calls are blocking C calls that can hang on a sick driver. Without a driver the
  client raises `BackendError("gpu", "nvml", "unavailable", hint)`, the hint saying how to read
  DCGM instead. A field a card does not support (ECC on consumer cards) is None, not an error.
* DCGM: one instant query for the `DCGM_FI_DEV_*` gauges of every GPU Prometheus scrapes,
  grouped by `Hostname`, `gpu` and `UUID`. No series means dcgm-exporter is not scraped:
  `BackendError` with reason "no data".
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import json
import math
import socket
import threading
import warnings
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from types import ModuleType
from typing import TYPE_CHECKING, Any, Literal, TypeVar, cast

from oncall.errors import BackendError
from oncall.model.metrics import Sample

if TYPE_CHECKING:  # the client is only passed in: importing httpx is the caller's cost
    from oncall.backends.prometheus import PrometheusClient

BACKEND = "gpu"
NVML_TARGET = "nvml"
MIB = 1024 * 1024

#: Appended to every "NVML unavailable" reason: what the operator can do instead.
DCGM_HINT = "set gpu.source: dcgm to read dcgm-exporter metrics through Prometheus"

#: dcgm-exporter gauge → `_DcgmRow` attribute. FB_* are MiB, GPU_UTIL %, POWER_USAGE W;
#: XID_ERRORS is the last XID seen (0 = none), ECC_DBE_VOL_TOTAL the volatile double-bit
#: (uncorrectable) ECC count. FB_RESERVED is not in every exporter's default counters: when
#: present it is part of the card's total, as NVML's `total = used + reserved + free`.
DCGM_FIELDS = {
    "DCGM_FI_DEV_FB_USED": "fb_used",
    "DCGM_FI_DEV_FB_FREE": "fb_free",
    "DCGM_FI_DEV_FB_RESERVED": "fb_reserved",
    "DCGM_FI_DEV_GPU_UTIL": "util_pct",
    "DCGM_FI_DEV_GPU_TEMP": "temp_c",
    "DCGM_FI_DEV_POWER_USAGE": "power_w",
    "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL": "ecc_dbe",
    "DCGM_FI_DEV_XID_ERRORS": "xid",
}
DCGM_SELECTOR = "__name__=~" + json.dumps(
    "DCGM_FI_DEV_(" + "|".join(n.removeprefix("DCGM_FI_DEV_") for n in DCGM_FIELDS) + ")"
)

T = TypeVar("T")
NvmlOutcome = Literal["ok", "unavailable"]


@dataclass(frozen=True)
class GpuProcess:
    """A compute process on a GPU (NVML only); `used_mib` is None where NVML cannot say."""

    pid: int
    used_mib: float | None


@dataclass(frozen=True)
class GpuDevice:
    """One GPU as either source sees it; a reading the source lacks is None."""

    index: int
    uuid: str
    name: str
    node: str | None
    memory_used_mib: float | None
    memory_total_mib: float | None
    memory_free_mib: float | None
    utilization_ratio: float | None
    temperature_c: float | None
    power_w: float | None
    ecc_uncorrected: int | None
    last_xid: int | None
    processes: tuple[GpuProcess, ...] = ()

    @property
    def memory_used_ratio(self) -> float | None:
        """used / total, 0–1."""
        used, total = self.memory_used_mib, self.memory_total_mib
        return used / total if used is not None and total else None


# ---------------------------------------------------------------------------------------- NVML


def _unavailable(reason: str) -> BackendError:
    return BackendError(BACKEND, NVML_TARGET, "unavailable", f"{reason}; {DCGM_HINT}")


_last_outcome: NvmlOutcome | None = None


def nvml_last_outcome() -> NvmlOutcome | None:
    """Whether NVML last initialised in this process ("ok"), failed to, or was never tried.

    `gpu.devices` uses it to say which command line `auto` stands for without touching the
    driver from a synchronous call.
    """
    return _last_outcome


def _record(outcome: NvmlOutcome) -> None:
    global _last_outcome  # noqa: PLW0603 - one process-wide fact: is there a driver here
    _last_outcome = outcome


def _import_pynvml() -> ModuleType:
    # Deferred (STYLE 11): most hosts oncall runs on have no GPU and never need it. The
    # deprecated `pynvml` *package*, if some other dependency installed it, warns on import.
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", FutureWarning)
            return importlib.import_module("pynvml")
    except ImportError as exc:
        raise _unavailable(f"the nvidia-ml-py package is not installed ({exc})") from exc


def _init_failure(nvml: ModuleType, exc: Exception) -> str:
    if isinstance(exc, getattr(nvml, "NVMLError_LibraryNotFound", ())):
        return f"no NVIDIA driver on this host ({exc})"
    if isinstance(exc, getattr(nvml, "NVMLError_DriverNotLoaded", ())):
        return f"the NVIDIA driver is not loaded on this host ({exc})"
    return f"NVML did not start ({exc})"


def _not_available_errors(nvml: ModuleType) -> tuple[type[Exception], ...]:
    """The NVML errors that mean "this card or driver cannot tell", not "NVML is broken"."""
    names = (
        "NVMLError_NotSupported",
        "NVMLError_NoPermission",
        "NVMLError_FunctionNotFound",
        "NVMLError_NoData",
    )
    return tuple(getattr(nvml, name) for name in names if hasattr(nvml, name))


def _optional(nvml: ModuleType, call: Callable[[], T]) -> T | None:
    try:
        return call()
    except _not_available_errors(nvml):
        return None


def _text(value: object) -> str:
    """Old bindings return bytes for names and UUIDs."""
    return value.decode(errors="replace") if isinstance(value, bytes) else str(value)


def _memory(nvml: ModuleType, handle: Any) -> Any:
    # v2 separates driver-reserved memory from `used`; drivers before R510 only have v1.
    version = getattr(nvml, "nvmlMemory_v2", None)
    if version is not None:
        with contextlib.suppress(*_not_available_errors(nvml)):
            return nvml.nvmlDeviceGetMemoryInfo(handle, version=version)
    return nvml.nvmlDeviceGetMemoryInfo(handle)


def _temperature(nvml: ModuleType, handle: Any) -> float | None:
    # nvmlDeviceGetTemperature is deprecated (gone in CUDA 14); older drivers lack the V call.
    sensor = nvml.NVML_TEMPERATURE_GPU
    read_v = getattr(nvml, "nvmlDeviceGetTemperatureV", None)
    if read_v is not None:
        value = _optional(nvml, lambda: read_v(handle, sensor))
        if value is not None:
            return float(value)
    value = _optional(nvml, lambda: nvml.nvmlDeviceGetTemperature(handle, sensor))
    return None if value is None else float(value)


def _processes(nvml: ModuleType, handle: Any) -> tuple[GpuProcess, ...]:
    found = _optional(nvml, lambda: nvml.nvmlDeviceGetComputeRunningProcesses(handle)) or []
    return tuple(
        GpuProcess(
            pid=int(proc.pid),
            used_mib=None if proc.usedGpuMemory is None else proc.usedGpuMemory / MIB,
        )
        for proc in found
    )


def _read_device(nvml: ModuleType, index: int, node: str) -> GpuDevice:
    """One GPU through NVML: the fields of `nvidia-smi --query-gpu=...`."""
    handle = nvml.nvmlDeviceGetHandleByIndex(index)
    memory = _memory(nvml, handle)
    rates = _optional(nvml, lambda: nvml.nvmlDeviceGetUtilizationRates(handle))
    power_mw = _optional(nvml, lambda: nvml.nvmlDeviceGetPowerUsage(handle))
    ecc = _optional(
        nvml,
        lambda: nvml.nvmlDeviceGetTotalEccErrors(
            handle, nvml.NVML_MEMORY_ERROR_TYPE_UNCORRECTED, nvml.NVML_VOLATILE_ECC
        ),
    )
    return GpuDevice(
        index=index,
        uuid=_text(nvml.nvmlDeviceGetUUID(handle)),
        name=_text(nvml.nvmlDeviceGetName(handle)),
        node=node,
        memory_used_mib=memory.used / MIB,
        memory_total_mib=memory.total / MIB,
        memory_free_mib=memory.free / MIB,
        utilization_ratio=None if rates is None else rates.gpu / 100,
        temperature_c=_temperature(nvml, handle),
        power_w=None if power_mw is None else power_mw / 1000,
        ecc_uncorrected=None if ecc is None else int(ecc),
        last_xid=None,  # XIDs come as NVML events, not as a value to read; DCGM has them
        processes=_processes(nvml, handle),
    )


async def _in_thread(call: Callable[[], T], *, within: float, what: str) -> T:
    """`call()` in a daemon thread, awaited for at most `within` seconds.

    Not `asyncio.to_thread`: the default executor's threads are joined at exit, so one NVML
    call stuck in the driver would hang oncall's exit. A daemon thread is simply left behind.
    """
    loop = asyncio.get_running_loop()
    future: asyncio.Future[T] = loop.create_future()

    def finish(result: T | None, error: Exception | None) -> None:
        if future.done():  # the waiter timed out and cancelled it
            return
        if error is not None:
            future.set_exception(error)
        else:
            future.set_result(cast(T, result))

    def work() -> None:
        result: T | None = None
        error: Exception | None = None
        try:
            result = call()
        except Exception as exc:
            error = exc
        with contextlib.suppress(RuntimeError):  # the loop closed while the call was stuck
            loop.call_soon_threadsafe(finish, result, error)

    threading.Thread(target=work, name=f"nvml {what}", daemon=True).start()
    try:
        return await asyncio.wait_for(future, within)
    except TimeoutError:
        raise BackendError(
            BACKEND, NVML_TARGET, "timeout", f"{what} did not answer within {within:g}s"
        ) from None


class NvmlClient:
    """The GPUs of this host through NVML; initialised on first read, shut down by `aclose`."""

    def __init__(self, *, timeout: float) -> None:
        self.timeout = timeout
        self._lock = threading.Lock()
        self._nvml: ModuleType | None = None

    def _start(self) -> ModuleType:
        """The initialised `pynvml` module (blocking; called in the worker thread)."""
        with self._lock:
            if self._nvml is not None:
                return self._nvml
            try:
                nvml = _import_pynvml()
            except BackendError:
                _record("unavailable")
                raise
            try:
                nvml.nvmlInit()
            except nvml.NVMLError as exc:
                _record("unavailable")
                raise _unavailable(_init_failure(nvml, exc)) from exc
            _record("ok")
            self._nvml = nvml
            return nvml

    def _read(self) -> tuple[GpuDevice, ...]:
        nvml = self._start()
        node = socket.gethostname()
        try:
            count = int(nvml.nvmlDeviceGetCount())
            return tuple(_read_device(nvml, index, node) for index in range(count))
        except nvml.NVMLError as exc:
            raise BackendError(BACKEND, NVML_TARGET, "error", str(exc)) from exc

    async def devices(self) -> tuple[GpuDevice, ...]:
        """Every GPU of this host, in NVML index order.

        BackendError "unavailable" (with the DCGM hint) without a driver, "timeout" when NVML
        does not answer in time, "error" when a read NVML cannot do without fails.
        """
        return await _in_thread(self._read, within=self.timeout, what="NVML")

    async def aclose(self) -> None:
        """nvmlShutdown, if NVML was started; a driver that does not answer is left alone."""
        nvml, self._nvml = self._nvml, None
        if nvml is None:
            return
        with contextlib.suppress(BackendError, nvml.NVMLError):
            await _in_thread(nvml.nvmlShutdown, within=self.timeout, what="nvmlShutdown")


def is_this_host(node: str) -> bool:
    """Whether a node name (short or fully qualified) names the host oncall runs on."""
    here = socket.gethostname()
    return node == here or node.partition(".")[0] == here.partition(".")[0]


# ---------------------------------------------------------------------------------------- DCGM


def dcgm_query(node: str | None = None) -> str:
    """The one instant query for every DCGM gauge, optionally of one node (`Hostname`)."""
    if node is None:
        return "{" + DCGM_SELECTOR + "}"
    quoted = '"' + node.replace("\\", "\\\\").replace('"', '\\"') + '"'
    return "{" + DCGM_SELECTOR + ",Hostname=" + quoted + "}"


@dataclass
class _DcgmRow:
    labels: dict[str, str]
    values: dict[str, float] = field(default_factory=dict)

    def get(self, attr: str) -> float | None:
        value = self.values.get(attr)
        return None if value is None or math.isnan(value) else value

    def count(self, attr: str) -> int | None:
        value = self.get(attr)
        return None if value is None else int(value)

    def device(self) -> GpuDevice:
        used, free = self.get("fb_used"), self.get("fb_free")
        total = (
            None if used is None or free is None else used + free + (self.get("fb_reserved") or 0)
        )
        util = self.get("util_pct")
        index = self.labels.get("gpu", "")
        return GpuDevice(
            index=int(index) if index.isdigit() else -1,
            uuid=self.labels.get("UUID", ""),
            name=self.labels.get("modelName", ""),
            node=self.labels.get("Hostname") or None,
            memory_used_mib=used,
            memory_total_mib=total,
            memory_free_mib=free,
            utilization_ratio=None if util is None else util / 100,
            temperature_c=self.get("temp_c"),
            power_w=self.get("power_w"),
            ecc_uncorrected=self.count("ecc_dbe"),
            last_xid=self.count("xid"),
        )


def devices_from_dcgm(samples: Iterable[Sample]) -> tuple[GpuDevice, ...]:
    """Group DCGM samples into devices by (Hostname, gpu, UUID), ordered by node and index."""
    rows: dict[tuple[str, str, str], _DcgmRow] = {}
    for sample in samples:
        attr = DCGM_FIELDS.get(sample.labels.get("__name__", ""))
        if attr is None:
            continue
        labels = sample.labels
        key = (labels.get("Hostname", ""), labels.get("gpu", ""), labels.get("UUID", ""))
        # Two jobs scraping one exporter give the same GPU twice: one row, either value.
        rows.setdefault(key, _DcgmRow(labels)).values[attr] = sample.value
    devices = [row.device() for row in rows.values()]
    return tuple(sorted(devices, key=lambda d: (d.node or "", d.index, d.uuid)))


async def dcgm_devices(prom: PrometheusClient, *, node: str | None = None) -> tuple[GpuDevice, ...]:
    """Every GPU whose dcgm-exporter Prometheus scrapes (of `node` only, when given)."""
    devices = devices_from_dcgm(await prom.query(dcgm_query(node)))
    if not devices:
        where = f" with Hostname={node!r}" if node is not None else ""
        raise BackendError(
            BACKEND,
            prom.url,
            "no data",
            f"no DCGM_FI_DEV_* series{where} in Prometheus: dcgm-exporter is not scraped "
            "(check its scrape job or ServiceMonitor, and `up` of its targets)",
        )
    return devices
