"""`python -m oncall_drill.kube_sim`: serve a simulated cluster on a loopback port until SIGTERM."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from oncall_drill.kube_sim.kubeconfig import write_kubeconfig
from oncall_drill.kube_sim.runner import serve
from oncall_drill.kube_sim.seed import load_objects
from oncall_drill.kube_sim.sim import KubeSim
from oncall_drill.netutil import free_loopback_port
from oncall_drill.simhttp import signalled_stop, simulator_main


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m oncall_drill.kube_sim", description=__doc__)
    parser.add_argument("--port", type=int, default=0, help="loopback port (default: a free one)")
    parser.add_argument(
        "--seed-file",
        "--state-file",
        dest="seed_file",
        type=Path,
        help="YAML/JSON objects to start with (default: the built-in drill cluster)",
    )
    parser.add_argument("--kubeconfig", type=Path, help="write a kubeconfig for the two users here")
    parser.add_argument(
        "--namespace", default="ai", help="default namespace of the kubeconfig contexts"
    )
    parser.add_argument(
        "--start-delay", type=float, default=0.5, help="seconds from Pending to Running"
    )
    parser.add_argument(
        "--ready-delay", type=float, default=None, help="seconds from started to Ready"
    )
    return parser.parse_args(argv)


async def amain(args: argparse.Namespace) -> int:
    try:
        objects = load_objects(args.seed_file) if args.seed_file else None
        sim = KubeSim(objects, start_delay=args.start_delay, ready_delay=args.ready_delay)
    except (OSError, ValueError) as exc:
        print(f"kube-sim: {exc}", file=sys.stderr)
        return 2
    port = args.port or free_loopback_port()
    runner = await serve(sim, port)
    if args.kubeconfig:
        write_kubeconfig(args.kubeconfig, port, sim.users, namespace=args.namespace)
    print(f"kube-sim listening on http://127.0.0.1:{port}", file=sys.stderr, flush=True)
    stop = signalled_stop()
    try:
        await stop.wait()
    finally:
        await runner.cleanup()
    return 0


main = simulator_main("kube-sim", parse_args, amain)


if __name__ == "__main__":
    sys.exit(main())
