"""Runs one simulated AI gateway as a process: argument parsing, serving, clean stop.

`main(argv)` is what `python -m oncall_drill.gateway_sim` calls; `serve(settings)` is the
same lifecycle for a caller that already holds `GatewaySettings`. SIGTERM and SIGINT stop it
with status 0; usage errors exit with status 2. It binds 127.0.0.1 only and refuses Redis or
vLLM URLs that are not loopback.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections.abc import Sequence

from oncall_drill.gateway_sim.config import GatewaySettings
from oncall_drill.gateway_sim.server import build_app
from oncall_drill.loadgen.targets import NotLoopbackError, require_loopback_url
from oncall_drill.simhttp import serve_until_signal

EXIT_USAGE = 2


def parse_args(argv: Sequence[str]) -> GatewaySettings:
    """Settings from the command line; exits with status 2 on a usage error."""
    parser = argparse.ArgumentParser(
        prog="python -m oncall_drill.gateway_sim",
        description="Simulated AI gateway for the oncall drill (loopback only).",
    )
    parser.add_argument("--port", type=int, required=True, help="port on 127.0.0.1")
    parser.add_argument("--redis-url", required=True, help="redis://127.0.0.1:PORT/DB")
    parser.add_argument(
        "--vllm-url", action="append", required=True, help="vLLM base URL (repeatable)"
    )
    parser.add_argument("--model", required=True, help="model name sent to vLLM")
    parser.add_argument("--max-prompt-chars", type=int, default=4000)
    parser.add_argument("--seed", type=int, default=None, help="seed of the random draws")
    args = parser.parse_args(argv)
    try:
        redis_url = require_loopback_url(args.redis_url, frozenset({"redis"}))
        vllm_urls = tuple(require_loopback_url(u, frozenset({"http"})) for u in args.vllm_url)
    except NotLoopbackError as exc:
        parser.error(str(exc))
    if not 0 < args.port < 65536:
        parser.error(f"--port must be in 1..65535, not {args.port}")
    if args.max_prompt_chars < 1:
        parser.error("--max-prompt-chars must be >= 1")
    return GatewaySettings(
        redis_url=redis_url,
        vllm_urls=vllm_urls,
        model=args.model,
        port=args.port,
        max_prompt_chars=args.max_prompt_chars,
        seed=args.seed,
    )


async def serve(settings: GatewaySettings) -> int:
    """Listen on 127.0.0.1 and serve until SIGTERM/SIGINT."""
    banner = (
        f"INFO gateway listening on http://{settings.host}:{settings.port} "
        f"(upstreams: {', '.join(settings.vllm_urls)})"
    )
    return await serve_until_signal(build_app(settings), settings.host, settings.port, banner)


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of `python -m oncall_drill.gateway_sim`; returns the exit status."""
    try:
        settings = parse_args(sys.argv[1:] if argv is None else argv)
    except SystemExit as exc:
        return exc.code if isinstance(exc.code, int) else EXIT_USAGE
    return asyncio.run(serve(settings))
