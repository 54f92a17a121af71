"""Configuration of one simulated vLLM server: the frozen `SimConfig` and the `Fault` kinds.

`SimConfig` is what the argv parser (`argv.py`) produces and what `build_app` consumes; the
drill orchestration may also build one directly. Values that vLLM itself has keep vLLM's names
(`max_num_seqs`, `max_model_len`, `served_model_name`, ...); the rest are simulator knobs.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field

#: `GET /version` answers, per metrics generation (backends.md §1.1, §1.5).
VLLM_VERSIONS = {"0.33": "0.33.0", "0.10": "0.10.2"}

#: Below this per-sequence rate the source article calls the model stuck (docs/drill.md).
STUCK_TOKENS_PER_SECOND = 2.0

LOOPBACK_HOSTS = frozenset({"127.0.0.1", "localhost", "::1"})


class Fault(enum.StrEnum):
    """A fault the drill can inject at runtime through `POST /drill/fault`."""

    NONE = "none"
    #: The engine core dies: /health answers 503 (500 on 0.10), in-flight requests fail with
    #: 500, and the process exits shortly after, as vLLM does (backends.md §1.2).
    ENGINE_DEATH = "engine-death"
    #: The server accepts connections but never answers (except the /drill/* endpoints, so the
    #: drill can clear the fault); the engine makes no progress meanwhile.
    HANG = "hang"
    #: The model generates fewer than 5 tokens/s per sequence.
    STUCK = "stuck"
    #: The EngineCore raises torch.OutOfMemoryError (its traceback goes to the log) and dies:
    #: engine death as above; the process exits 0 as vLLM's does after start-up (vllm issue
    #: #48966): Kubernetes records reason Completed — neither Error nor OOMKilled.
    GPU_OOM = "gpu-oom"
    #: The EngineCore hangs, not dies (vllm issue #39863): /health stays 200 and the API
    #: answers, requests wait for ever, the gauges freeze and the counters stop.
    ENGINE_HUNG = "engine-hung"


@dataclass(frozen=True)
class SimConfig:
    """Everything one simulated server needs; defaults give a small, healthy server."""

    model: str = "meta-llama/Llama-3.1-8B-Instruct"
    #: Names the server answers to; the first one labels the metrics (`model_name`).
    served_model_names: tuple[str, ...] = ()
    host: str = "127.0.0.1"
    port: int = 8000
    max_num_seqs: int = 256
    #: vLLM's --max-num-active-seqs (PR #56758): caps RUNNING admission, must be ≤
    #: max_num_seqs; None means the same as max_num_seqs.
    max_num_active_seqs: int | None = None
    #: KV-cache capacity in tokens (vLLM: `GPU KV cache size: N tokens`).
    kv_capacity_tokens: int = 65536
    block_size: int = 16
    #: Longest prompt + completion accepted; more than kv_capacity_tokens fails at startup.
    max_model_len: int = 8192
    gpu_memory_utilization: float = 0.92
    #: "0.33" or "0.10": which metric names and /version to present.
    metrics_version: str = "0.33"
    #: Real seconds during which the port refuses connections before the server listens.
    load_seconds: float = 0.0
    pod_name: str = ""
    #: Simulated seconds per real second; latencies and rates are reported in simulated time.
    speed: float = 1.0
    #: Decode rate of a sequence that runs alone.
    tokens_per_second: float = 50.0
    #: Prefill rate of one sequence (prompt tokens per second).
    prefill_tokens_per_second: float = 8000.0
    #: Batch size at which each sequence runs at half its solo rate (aggregate throughput
    #: saturates at about tokens_per_second x saturation_batch).
    saturation_batch: int = 32
    #: Per-sequence rate under the `stuck` fault.
    stuck_tokens_per_second: float = STUCK_TOKENS_PER_SECOND
    #: Real seconds between engine death and the process exiting.
    death_exit_seconds: float = 1.5
    #: Real seconds between two engine steps.
    tick_seconds: float = 0.015
    api_key: str | None = None
    #: vLLM's --disable-log-stats also removes every vllm:* metric (backends.md §1.3).
    disable_log_stats: bool = False
    #: vLLM flags the simulator accepted but does not model, for the startup log.
    ignored_flags: tuple[str, ...] = field(default=(), compare=False)

    @property
    def served_model_name(self) -> str:
        """The primary served name: the `model_name` label and the default request model."""
        return self.served_model_names[0] if self.served_model_names else self.model

    @property
    def vllm_version(self) -> str:
        """What `GET /version` reports."""
        return VLLM_VERSIONS[self.metrics_version]

    @property
    def running_cap(self) -> int:
        """How many sequences may run at once: --max-num-active-seqs, else --max-num-seqs."""
        if self.max_num_active_seqs is None:
            return self.max_num_seqs
        return min(self.max_num_seqs, self.max_num_active_seqs)

    @property
    def num_gpu_blocks(self) -> int:
        """KV capacity in blocks, as `vllm:cache_config_info` reports it."""
        return self.kv_capacity_tokens // self.block_size

    def problems(self) -> list[str]:
        """Every reason this configuration cannot start, all at once (empty when valid)."""
        out: list[str] = []
        if self.metrics_version not in VLLM_VERSIONS:
            out.append(
                f"--metrics-version must be one of {sorted(VLLM_VERSIONS)}, "
                f"not {self.metrics_version!r}"
            )
        if self.max_num_seqs < 1:
            out.append(f"--max-num-seqs must be >= 1, not {self.max_num_seqs}")
        if self.max_num_active_seqs is not None and self.max_num_active_seqs < 1:
            out.append(f"--max-num-active-seqs must be >= 1, not {self.max_num_active_seqs}")
        if self.kv_capacity_tokens < 1:
            out.append(f"--kv-capacity-tokens must be >= 1, not {self.kv_capacity_tokens}")
        if self.max_model_len < 2:
            out.append(f"--max-model-len must be >= 2, not {self.max_model_len}")
        if self.host not in LOOPBACK_HOSTS:
            out.append(
                f"--host must be a loopback address (the drill binds no other), not {self.host!r}"
            )
        if not 0 < self.port < 65536:
            out.append(f"--port must be in 1..65535, not {self.port}")
        for name in ("speed", "tokens_per_second", "prefill_tokens_per_second", "tick_seconds"):
            if getattr(self, name) <= 0:
                out.append(f"--{name.replace('_', '-')} must be > 0")
        for name in ("load_seconds", "death_exit_seconds", "stuck_tokens_per_second"):
            if getattr(self, name) < 0:
                out.append(f"--{name.replace('_', '-')} must be >= 0")
        if self.saturation_batch < 1:
            out.append("--saturation-batch must be >= 1")
        if self.block_size < 1:
            out.append("--block-size must be >= 1")
        return out

    def startup_error(self) -> str | None:
        """The error vLLM dies with at startup when one max-length request cannot fit in the
        KV cache (backends.md §1.7), or when --max-num-active-seqs exceeds --max-num-seqs
        (vLLM's SchedulerConfig refuses that at start-up, PR #56758); None when neither."""
        active = self.max_num_active_seqs
        if active is not None and active > self.max_num_seqs:
            return (
                f"ValueError: max_num_active_seqs ({active}) must be less than or equal to "
                f"max_num_seqs ({self.max_num_seqs})."
            )
        if self.max_model_len <= self.kv_capacity_tokens:
            return None
        return (
            f"ValueError: To serve at least one request with the models's max seq len "
            f"({self.max_model_len}), ({self.max_model_len} tokens) KV cache is needed, "
            f"which is larger than the available KV cache memory "
            f"({self.kv_capacity_tokens} tokens). Based on the available memory, try "
            f"decreasing `max_model_len` when initializing the engine."
        )
