"""A simulated vLLM 0.33 OpenAI-compatible server for the drill (docs/drill.md).

It behaves, to a client, like `vllm serve` (backends.md §1): the same ops and OpenAI routes,
the same `/metrics` names, types, labels and buckets (0.33, or 0.10 with
`--metrics-version 0.10`), a continuous-batching engine with a KV cache that queues and
preempts, and responses paced by simulated token generation. Faults are injected at runtime.

Run it as a process (only loopback binds; a non-loopback --host becomes 127.0.0.1):

    python -m oncall_drill.vllm_sim --port 8000 --model NAME --max-num-seqs 8 \\
        --kv-capacity-tokens 4096 [--metrics-version 0.33|0.10] [--load-seconds S] \\
        [--pod-name NAME] [--speed X] [--tokens-per-second R]
    python -m oncall_drill.vllm_sim vllm serve NAME --max_num_seqs=8 --host 0.0.0.0 ...

Every form of vLLM arguments a Kubernetes container spec carries is accepted (see `argv`);
unknown vLLM flags are accepted and ignored. `--speed X` runs simulated time X times faster
than real time; latencies and rates in /metrics are in simulated seconds.

Drill-only routes: `POST /drill/fault {"fault": F}` (F: engine-death, gpu-oom, hang,
engine-hung, stuck, none) and
`GET /drill/state` (running, waiting, kv usage, max_num_seqs, fault, ...); they answer even
while the server hangs.

Importable API, for the drill orchestration:

* `SimConfig` — frozen dataclass of one server's settings; `Fault` — the fault kinds.
* `parse_argv(argv) -> ParsedArgv` (`.config`, `.notes`); raises `ArgvError` (`.problems`).
* `normalize_argv(argv)` — container command/args → plain vLLM flags.
* `build_app(config) -> aiohttp.web.Application`; `app[SIM_KEY]` is the `SimServer`
  (`.engine`, `.metrics`, `.set_fault()`, `.state_body()`, `.died` event).
* `serve(config)` — the whole process lifecycle in the running event loop; `main(argv)`.
* `Engine` — the scheduler alone, driven by `step(dt)` for deterministic use.
"""

from __future__ import annotations

from oncall_drill.vllm_sim.argv import ArgvError, ParsedArgv, normalize_argv, parse_argv
from oncall_drill.vllm_sim.config import Fault, SimConfig
from oncall_drill.vllm_sim.engine import Engine, EngineState
from oncall_drill.vllm_sim.runner import main, serve
from oncall_drill.vllm_sim.server import SIM_KEY, SimServer, build_app

__all__ = [
    "SIM_KEY",
    "ArgvError",
    "Engine",
    "EngineState",
    "Fault",
    "ParsedArgv",
    "SimConfig",
    "SimServer",
    "build_app",
    "main",
    "normalize_argv",
    "parse_argv",
    "serve",
]
