"""Command line of the load generator: flags → `LoadConfig`, summary as JSON on stdout.

Exit status 0 after a run (whatever the answers were), 2 on a usage error (including a
target that is not loopback); diagnostics go to stderr.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from collections.abc import Sequence

from oncall_drill.loadgen.curve import CURVES
from oncall_drill.loadgen.runner import LoadConfig, run_load
from oncall_drill.options import from_args

EXIT_USAGE = 2


def build_parser() -> argparse.ArgumentParser:
    """The argument parser (also used for --help)."""
    parser = argparse.ArgumentParser(
        prog="python -m oncall_drill.loadgen",
        description="Bounded drill load (short 60%%, long 15%%, multi-step 10%%, "
        "low-quality 10%%, boundary 5%%) against the gateway's /chat; loopback only.",
    )
    parser.add_argument("--url", required=True, help="gateway base URL, http://127.0.0.1:PORT")
    parser.add_argument("--rate", type=float, required=True, help="base requests per second")
    parser.add_argument("--duration", type=float, required=True, help="seconds (≤ 3600)")
    parser.add_argument("--max-requests", type=int, required=True, help="requests (≤ 100000)")
    parser.add_argument("--curve", choices=CURVES, default="constant")
    parser.add_argument("--seed", type=int, default=None)
    parser.add_argument("--max-in-flight", type=int, default=32, help="concurrency (≤ 256)")
    parser.add_argument("--timeout", type=float, default=10.0, help="per request, seconds")
    parser.add_argument("--prompt-limit", type=int, default=4000, help="gateway's max chars")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point; returns the exit status."""
    parser = build_parser()
    try:
        args = parser.parse_args(sys.argv[1:] if argv is None else argv)
    except SystemExit as exc:
        return exc.code if isinstance(exc.code, int) else EXIT_USAGE
    config = from_args(LoadConfig, args, duration_s=args.duration, timeout_s=args.timeout)
    try:
        config.normalized()
    except ValueError as exc:
        print(f"loadgen: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    summary = asyncio.run(run_load(config))
    for note in summary.notes:
        print(f"loadgen: note: {note}", file=sys.stderr)
    print(json.dumps(summary.to_dict(), indent=2))
    return 0
