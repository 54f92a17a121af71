"""Runs one simulated GPU exporter as a process: argument parsing, serving, clean stop.

`python -m oncall.drill.gpu_sim --port N --hostname node-1 --gpu 0=http://127.0.0.1:A
[--gpu 1=...] [--pod 0=ai/vllm-xyz[/container]] [--weights-mib M]` binds 127.0.0.1 only and
refuses vLLM URLs that are not loopback. SIGTERM/SIGINT stop it with status 0; usage errors
exit with status 2.
"""

from __future__ import annotations

import argparse
import asyncio
import signal
import sys
from collections.abc import Sequence

from aiohttp import web

from oncall.drill.gpu_sim.devices import Gpu, MemoryModel, PodRef
from oncall.drill.gpu_sim.server import Exporter, build_app
from oncall.drill.loadgen.targets import NotLoopbackError, require_loopback_url

HOST = "127.0.0.1"
EXIT_USAGE = 2


def _pairs(parser: argparse.ArgumentParser, flag: str, values: list[str]) -> dict[str, str]:
    out: dict[str, str] = {}
    for value in values:
        index, sep, rest = value.partition("=")
        if not sep or not index.isdigit() or not rest:
            parser.error(f"{flag} {value!r}: expected INDEX=VALUE, e.g. 0=...")
        if index in out:
            parser.error(f"{flag}: GPU {index} given twice")
        out[index] = rest
    return out


def parse_args(argv: Sequence[str]) -> tuple[int, Exporter]:
    """(port, exporter) from the command line; exits with status 2 on a usage error."""
    parser = argparse.ArgumentParser(
        prog="python -m oncall.drill.gpu_sim",
        description="Simulated dcgm-exporter for the oncall drill (loopback only).",
    )
    parser.add_argument("--port", type=int, required=True, help="port on 127.0.0.1")
    parser.add_argument("--hostname", default="node-1", help="the Hostname label")
    parser.add_argument("--gpu", action="append", required=True, help="INDEX=VLLM_URL (repeatable)")
    parser.add_argument(
        "--pod", action="append", default=[], help="INDEX=NAMESPACE/POD[/CONTAINER]"
    )
    parser.add_argument("--weights-mib", type=int, default=MemoryModel.weights_mib)
    args = parser.parse_args(argv)
    if not 0 < args.port < 65536:
        parser.error(f"--port must be in 1..65535, not {args.port}")
    urls = _pairs(parser, "--gpu", args.gpu)
    pods = _pairs(parser, "--pod", args.pod)
    gpus: list[Gpu] = []
    try:
        for index, url in urls.items():
            pod = PodRef.parse(pods[index]) if index in pods else None
            gpus.append(
                Gpu(index, args.hostname, require_loopback_url(url, frozenset({"http"})), pod)
            )
    except (NotLoopbackError, ValueError) as exc:
        parser.error(str(exc))
    stray = sorted(set(pods) - set(urls))
    if stray:
        parser.error(f"--pod for GPUs without --gpu: {', '.join(stray)}")
    if not 0 <= args.weights_mib < 80000:
        parser.error("--weights-mib must be within 0..80000")
    return args.port, Exporter(gpus, memory=MemoryModel(weights_mib=args.weights_mib))


async def serve(port: int, exporter: Exporter) -> int:
    """Listen on 127.0.0.1 and serve until SIGTERM/SIGINT."""
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)
    runner = web.AppRunner(build_app(exporter), access_log=None, shutdown_timeout=0.5)
    await runner.setup()
    try:
        await web.TCPSite(runner, HOST, port).start()
        print(f"INFO gpu exporter listening on http://{HOST}:{port}", file=sys.stderr, flush=True)
        await stop.wait()
        return 0
    finally:
        await runner.cleanup()


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of `python -m oncall.drill.gpu_sim`; returns the exit status."""
    try:
        port, exporter = parse_args(sys.argv[1:] if argv is None else argv)
    except SystemExit as exc:
        return exc.code if isinstance(exc.code, int) else EXIT_USAGE
    return asyncio.run(serve(port, exporter))
