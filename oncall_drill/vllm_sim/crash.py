"""What a vLLM server prints when its EngineCore runs out of GPU memory, then dies.

The shape follows vLLM v1 logs in upstream reports (vllm-project/vllm issues #19186, #13582,
#15039; recorded in `fixtures/vllm/engine_core_cuda_oom.log`): the EngineCore process logs
"EngineCore encountered a fatal error" with the Python traceback ending in
`torch.OutOfMemoryError: CUDA out of memory. Tried to allocate …` (PyTorch's message), then the
API server's output handler fails with `EngineDeadError`, each request in flight logs its own
`EngineDeadError` traceback (`fixtures/vllm/engine_dead_after_oom_64_requests.log`), and the
server shuts down. Every line carries vLLM's prefix: `(EngineCore_DP0 pid=N) ERROR MM-DD
HH:MM:SS [file.py:line] text`.
"""

from __future__ import annotations

import os
import time

from oncall_drill.vllm_sim.config import SimConfig

#: The card the drill's GPUs pretend to be (an H100 80GB: what torch reports as total).
TOTAL_GIB = 79.19
SITE = "/usr/local/lib/python3.12/dist-packages"


def cuda_oom_message(config: SimConfig, tried_gib: float = 2.0) -> str:
    """PyTorch's OutOfMemoryError text for a card filled to `gpu_memory_utilization`."""
    in_use = round(TOTAL_GIB * config.gpu_memory_utilization + 0.9, 2)
    free = max(0.01, round(TOTAL_GIB - in_use, 2))
    allocated = round(in_use - 1.42, 2)
    return (
        f"CUDA out of memory. Tried to allocate {tried_gib:.2f} GiB. GPU 0 has a total capacity "
        f"of {TOTAL_GIB:.2f} GiB of which {free:.2f} GiB is free. Including non-PyTorch memory, "
        f"this process has {in_use:.2f} GiB memory in use. Of the allocated memory "
        f"{allocated:.2f} GiB is allocated by PyTorch, with 312.00 MiB allocated in private "
        "pools (e.g., CUDA Graphs), and 1.10 GiB is reserved by PyTorch but unallocated. If "
        "reserved but unallocated memory is large try setting "
        "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to avoid fragmentation.  See "
        "documentation for Memory Management  "
        "(https://docs.pytorch.org/docs/stable/notes/cuda.html"
        "#optimizing-memory-usage-with-pytorch-cuda-alloc-conf)"
    )


def cuda_oom_log(config: SimConfig, now: float | None = None, in_flight: int = 0) -> list[str]:
    """The lines the EngineCore and the API server print for a GPU OOM mid-serving, with
    one `EngineDeadError` traceback for each of `in_flight` requests."""
    stamp = time.strftime("%m-%d %H:%M:%S", time.localtime(now))
    core = f"(EngineCore_DP0 pid={os.getpid() + 1}) ERROR {stamp} [core.py:862]"
    api = f"(APIServer pid={os.getpid()}) ERROR {stamp} [async_llm.py:485]"
    frames = [
        ("v1/engine/core.py", 853, "run_engine_core", "engine_core.run_busy_loop()"),
        ("v1/engine/core.py", 880, "run_busy_loop", "self._process_engine_step()"),
        (
            "v1/engine/core.py",
            907,
            "_process_engine_step",
            "outputs, model_executed = self.step_fn()",
        ),
        ("v1/engine/core.py", 353, "step", "model_output = self.execute_model_with_error_logging("),
        (
            "v1/worker/gpu_model_runner.py",
            2233,
            "execute_model",
            "logits = self.model.compute_logits(sample_hidden_states)",
        ),
        (
            "torch/nn/modules/module.py",
            1773,
            "_wrapped_call_impl",
            "return self._call_impl(*args, **kwargs)",
        ),
    ]
    lines = [
        f"{core} EngineCore encountered a fatal error.",
        f"{core} Traceback (most recent call last):",
    ]
    for path, line, func, code in frames:
        where = f"{SITE}/{path}" if path.startswith("torch/") else f"{SITE}/vllm/{path}"
        lines.append(f'{core}   File "{where}", line {line}, in {func}')
        lines.append(f"{core}     {code}")
    lines.append(f"{core} torch.OutOfMemoryError: {cuda_oom_message(config)}")
    lines += [
        f"{api} AsyncLLM output_handler failed.",
        f"{api} Traceback (most recent call last):",
        f'{api}   File "{SITE}/vllm/v1/engine/async_llm.py", line 444, in output_handler',
        f"{api}     outputs = await engine_core.get_output_async()",
        f"{api} vllm.v1.engine.exceptions.EngineDeadError: EngineCore encountered an issue. "
        "See stack trace (above) for the root cause.",
    ]
    request = f"(APIServer pid={os.getpid()}) ERROR {stamp} [serving.py:1173]"
    for _ in range(in_flight):
        lines += [
            f"{request} Error in completion stream generator.",
            f"{request} Traceback (most recent call last):",
            f'{request}   File "{SITE}/vllm/v1/engine/output_processor.py", line 87, in get',
            f"{request}     raise output",
            f"{request} vllm.v1.engine.exceptions.EngineDeadError: EngineCore encountered an "
            "issue. See stack trace (above) for the root cause.",
        ]
    return lines
