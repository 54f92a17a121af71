"""Runs one simulated GPU exporter as a process: argument parsing, serving, clean stop.

`python -m oncall_drill.gpu_sim --port N [--hostname node-1] [--gpus 2]
[--pod NAMESPACE/POD[/CONTAINER]=VLLM_URL ...] [--gpu-memory-utilization 0.92]
[--dcgm-layout helm|honor-labels,hostname,virtual-gpus,mig]` binds 127.0.0.1 only and refuses
vLLM URLs that are not loopback. Pods take GPUs in the order given. SIGTERM/SIGINT stop it with
status 0; usage errors exit with status 2.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections.abc import Sequence

from oncall_drill.gpu_sim.devices import DEFAULT_GPU_MEMORY_UTILIZATION, PodClaim
from oncall_drill.gpu_sim.layout import Layout
from oncall_drill.gpu_sim.podresources import static_pods
from oncall_drill.gpu_sim.server import Exporter, build_app
from oncall_drill.loadgen.targets import NotLoopbackError, require_loopback_url
from oncall_drill.simhttp import serve_until_signal

HOST = "127.0.0.1"
EXIT_USAGE = 2


def _claim(text: str, utilization: float) -> PodClaim:
    ref, sep, url = text.partition("=")
    parts = ref.split("/")
    if not sep or not url or len(parts) not in (2, 3) or not all(parts):
        raise ValueError(f"--pod {text!r}: expected NAMESPACE/POD[/CONTAINER]=VLLM_URL")
    return PodClaim(
        parts[0],
        parts[1],
        parts[2] if len(parts) == 3 else "vllm",
        require_loopback_url(url, frozenset({"http"})),
        utilization,
    )


def parse_args(argv: Sequence[str]) -> tuple[int, Exporter]:
    """(port, exporter) from the command line; exits with status 2 on a usage error."""
    parser = argparse.ArgumentParser(
        prog="python -m oncall_drill.gpu_sim",
        description="Simulated dcgm-exporter for the oncall drill (loopback only).",
    )
    parser.add_argument("--port", type=int, required=True, help="port on 127.0.0.1")
    parser.add_argument("--hostname", default="node-1", help="the node label's value")
    parser.add_argument("--gpus", type=int, default=2, help="GPUs of the node (1..16)")
    parser.add_argument(
        "--pod", action="append", default=[], help="NAMESPACE/POD[/CONTAINER]=VLLM_URL"
    )
    parser.add_argument(
        "--gpu-memory-utilization", type=float, default=DEFAULT_GPU_MEMORY_UTILIZATION
    )
    parser.add_argument("--dcgm-layout", default="helm", help="helm, or options (layout.py)")
    args = parser.parse_args(argv)
    if not 0 < args.port < 65536:
        parser.error(f"--port must be in 1..65535, not {args.port}")
    if not 1 <= args.gpus <= 16:
        parser.error(f"--gpus must be in 1..16, not {args.gpus}")
    if not 0 < args.gpu_memory_utilization <= 1:
        parser.error("--gpu-memory-utilization must be within (0, 1]")
    try:
        layout = Layout.parse(args.dcgm_layout)
        claims = [_claim(text, args.gpu_memory_utilization) for text in args.pod]
    except (NotLoopbackError, ValueError) as exc:
        parser.error(str(exc))
    exporter = Exporter(args.hostname, args.gpus, pods=static_pods(claims), layout=layout)
    return args.port, exporter


async def serve(port: int, exporter: Exporter) -> int:
    """Listen on 127.0.0.1 and serve until SIGTERM/SIGINT."""
    banner = f"INFO gpu exporter listening on http://{HOST}:{port}"
    return await serve_until_signal(build_app(exporter), HOST, port, banner)


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of `python -m oncall_drill.gpu_sim`; returns the exit status."""
    try:
        port, exporter = parse_args(sys.argv[1:] if argv is None else argv)
    except SystemExit as exc:
        return exc.code if isinstance(exc.code, int) else EXIT_USAGE
    return asyncio.run(serve(port, exporter))
