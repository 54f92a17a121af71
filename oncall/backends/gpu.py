"""Read-only GPU facts from NVML on this host, or from dcgm-exporter metrics in Prometheus.

Two sources give the same `GpuDevice` values:

* NVML (`nvidia-ml-py`, module `pynvml`) reads the GPUs of the host oncall runs on — the
  numbers `nvidia-smi` prints. `pynvml` is imported on first use, NVML is initialised once
  per `NvmlClient`, and every call runs in a daemon thread bounded by the client's timeout,
  because NVML calls are blocking C calls that can hang on a sick driver. Without a driver the
  client raises `BackendError("gpu", "nvml", "unavailable", hint)`, the hint saying how to read
  DCGM instead. A field a card does not support (ECC on consumer cards) is None, not an error.
* DCGM (dcgm-exporter's gauges through Prometheus): `oncall.backends.dcgm`, which reads every
  label layout dcgm-exporter and its scrape configuration produce into these same values.

`memory_used_ratio` is used / (used + free): the memory CUDA can allocate, which is what vLLM's
`--gpu-memory-utilization` is a fraction of and what the GPUMemoryHigh alert compares.
`memory_total_mib` is the card's total as `nvidia-smi` prints it (used + free + reserved).
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import socket
import threading
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from types import ModuleType
from typing import Any, Literal, TypeVar, cast

from oncall.errors import BackendError

BACKEND = "gpu"
NVML_TARGET = "nvml"
MIB = 1024 * 1024

#: Appended to every "NVML unavailable" reason: what the operator can do instead.
DCGM_HINT = "set gpu.source: dcgm to read dcgm-exporter metrics through Prometheus"

T = TypeVar("T")
NvmlOutcome = Literal["ok", "unavailable"]


@dataclass(frozen=True)
class GpuProcess:
    """A compute process on a GPU (NVML only); `used_mib` is None where NVML cannot say."""

    pid: int
    used_mib: float | None


@dataclass(frozen=True)
class GpuPod:
    """A Kubernetes container dcgm-exporter maps to a GPU (from the kubelet's pod resources).

    `memory_used_mib` is that pod's own processes' framebuffer memory, known only where the
    exporter splits it per pod (GPU sharing, `KUBERNETES_VIRTUAL_GPUS`); None otherwise.
    """

    namespace: str | None
    pod: str
    container: str | None
    memory_used_mib: float | None = None


@dataclass(frozen=True)
class GpuDevice:
    """One GPU (or one MIG instance of it) as either source sees it; a missing reading is None.

    A MIG instance has `instance_id` (DCGM's `GPU_I_ID`) and `mig_profile` (`GPU_I_PROFILE`),
    the parent's `index` and `uuid`, and its own memory.
    """

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
    memory_reserved_mib: float | None = None
    instance_id: str | None = None
    mig_profile: str | None = None
    pods: tuple[GpuPod, ...] = ()

    @property
    def memory_used_ratio(self) -> float | None:
        """used / (used + free), 0–1: of the memory CUDA can allocate (the driver's reserve
        is neither), as vLLM's --gpu-memory-utilization and the GPUMemoryHigh alert count it."""
        used, free = self.memory_used_mib, self.memory_free_mib
        return (
            used / (used + free) if used is not None and free is not None and used + free else None
        )


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
        # v2 only; under v1 `used` includes the reserve and `total` = used + free.
        memory_reserved_mib=(
            memory.reserved / MIB if getattr(memory, "reserved", None) is not None else None
        ),
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
