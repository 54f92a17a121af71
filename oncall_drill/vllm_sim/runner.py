"""Runs one simulated vLLM server as a process: slow start, serving, signals, death exit.

`main(argv)` is what `python -m oncall_drill.vllm_sim ...` calls; `serve(config)` is the
same lifecycle for a caller that already holds a `SimConfig`. The lifecycle mirrors vLLM's:
the port refuses connections while the "weights load" (`--load-seconds`), then listens; on
engine death the server keeps answering (503 on /health) for `--death-exit-seconds`, then
exits with status 0 — as vLLM does for an EngineCore that dies after start-up (vllm issue #48966,
until PR #52178 lands), so Kubernetes restarts the container with last termination reason
`Completed`, not `Error`; a start-up failure exits 1 (`Error`). SIGTERM and SIGINT stop it
cleanly with status 0. Log lines go to stderr in vLLM's wording where it matters.
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
from collections.abc import Sequence

from aiohttp import web

from oncall_drill.simhttp import signalled_stop
from oncall_drill.vllm_sim.argv import ArgvError, normalize_argv, parse_argv
from oncall_drill.vllm_sim.config import SimConfig
from oncall_drill.vllm_sim.engine import Engine
from oncall_drill.vllm_sim.server import SIM_KEY, build_app

#: vLLM logs its stats line every VLLM_LOG_STATS_INTERVAL seconds (default 10).
STATS_INTERVAL_SECONDS = 10.0
#: How long in-flight requests get to finish when the server stops.
SHUTDOWN_TIMEOUT_SECONDS = 0.5
#: vLLM's API server exits 0 when its EngineCore dies after start-up (vllm issue #48966).
EXIT_ENGINE_DEAD = 0
EXIT_STARTUP_ERROR = 1
EXIT_USAGE = 2

USAGE = """\
usage: python -m oncall_drill.vllm_sim [vllm serve] [MODEL] [options]

A simulated vLLM 0.33 OpenAI-compatible server for drills (loopback only).

vLLM options that matter (--x=v, --x v and --x_y forms; other vLLM flags are ignored):
  --model NAME | MODEL          model to serve (positional wins, as in `vllm serve`)
  --served-model-name N [N...]  names the server answers to; the first labels metrics
  --host HOST --port PORT       non-loopback hosts become 127.0.0.1 (default port 8000)
  --max-num-seqs N              sequences per batch (default 256)
  --max-model-len N             prompt + completion limit, e.g. 8192, 8k, 8K
  --block-size N                KV block size (default 16)
  --num-gpu-blocks-override N   KV capacity in blocks
  --gpu-memory-utilization F    reported in vllm:cache_config_info
  --api-key KEY                 guard /v1/* with a bearer token
  --disable-log-stats           no vllm:* metrics at all, as in vLLM
  --config FILE                 YAML of the options above (command line wins)

Simulator options:
  --kv-capacity-tokens T        KV cache size in tokens (default 65536)
  --metrics-version 0.33|0.10   metric names and /version to present
  --load-seconds S              refuse connections for S seconds before listening
  --pod-name NAME               reported by GET /drill/state
  --speed X                     simulated seconds per real second (default 1)
  --tokens-per-second R         decode rate of one sequence alone (default 50)
  --prefill-tokens-per-second R, --saturation-batch K, --stuck-tokens-per-second R,
  --death-exit-seconds S, --tick-seconds S

Drill routes: POST /drill/fault {"fault": F} (F: engine-death, gpu-oom, hang,
engine-hung, stuck, none), GET /drill/state.
"""


def log(level: str, message: str) -> None:
    """One log line on stderr."""
    print(f"{level} {message}", file=sys.stderr, flush=True)


async def _log_stats(engine: Engine) -> None:
    """vLLM's periodic INFO line (backends.md §1.7), when there was activity."""
    last_prompt, last_gen, last_preempt = 0, 0, 0
    while not engine.dead:
        await asyncio.sleep(STATS_INTERVAL_SECONDS)
        state = engine.state()
        prompt = engine.prompt_tokens - last_prompt
        gen = state.generation_tokens - last_gen
        preempted = state.preemptions - last_preempt
        last_prompt, last_gen = engine.prompt_tokens, state.generation_tokens
        last_preempt = state.preemptions
        if not (prompt or gen or state.running or state.waiting):
            continue
        hit = engine.prefix_hit_tokens / engine.prompt_tokens if engine.prompt_tokens else 0.0
        preemptions = f"Preemptions: {preempted}, " if preempted else ""
        log(
            "INFO",
            f"Avg prompt throughput: {prompt / STATS_INTERVAL_SECONDS:.1f} tokens/s, "
            f"Avg generation throughput: {gen / STATS_INTERVAL_SECONDS:.1f} tokens/s, "
            f"Running: {state.running} reqs, Waiting: {state.waiting} reqs, {preemptions}"
            f"GPU KV cache usage: {state.kv_usage * 100:.1f}%, "
            f"Prefix cache hit rate: {hit * 100:.1f}%",
        )


async def serve(config: SimConfig) -> int:
    """Load, listen, and serve until a signal (status 0) or engine death (status 1)."""
    stop = signalled_stop()
    log("INFO", f"vLLM API server version {config.vllm_version} (simulated)")
    log("INFO", f"Starting to load model {config.model}...")
    if config.load_seconds > 0:
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), timeout=config.load_seconds)
        if stop.is_set():
            return 0
    concurrency = config.kv_capacity_tokens / config.max_model_len
    log("INFO", f"GPU KV cache size: {config.kv_capacity_tokens:,} tokens")
    log(
        "INFO",
        f"Maximum concurrency for {config.max_model_len:,} tokens per request: {concurrency:.2f}x",
    )
    app = build_app(config)
    sim = app[SIM_KEY]
    runner = web.AppRunner(app, access_log=None, shutdown_timeout=SHUTDOWN_TIMEOUT_SECONDS)
    await runner.setup()
    stats = asyncio.create_task(_log_stats(sim.engine), name="vllm-sim-stats")
    try:
        site = web.TCPSite(runner, config.host, config.port)
        await site.start()
        log("INFO", f"Starting vLLM API server 0 on http://{config.host}:{config.port}")
        log("INFO", "Application startup complete.")
        stopped = asyncio.create_task(stop.wait())
        died = asyncio.create_task(sim.died.wait())
        await asyncio.wait({stopped, died}, return_when=asyncio.FIRST_COMPLETED)
        code = 0
        if sim.died.is_set():
            code = EXIT_ENGINE_DEAD
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), timeout=config.death_exit_seconds)
            log("INFO", "Shutting down: the engine is dead.")
        for task in (stopped, died):
            task.cancel()
        return code
    finally:
        stats.cancel()
        await runner.cleanup()


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of `python -m oncall_drill.vllm_sim`; returns the exit status."""
    args = sys.argv[1:] if argv is None else list(argv)
    if {"-h", "--help"} & set(normalize_argv(args)):
        print(USAGE, end="")
        return 0
    try:
        parsed = parse_argv(args)
    except ArgvError as exc:
        for problem in exc.problems:
            print(f"vllm_sim: error: {problem}", file=sys.stderr)
        return EXIT_USAGE
    for note in parsed.notes:
        log("WARNING", note)
    error = parsed.config.startup_error()
    if error is not None:
        log("ERROR", error)
        return EXIT_STARTUP_ERROR
    return asyncio.run(serve(parsed.config))
