"""Wall time of headless commands (`oncall --help`, `oncall config show`), median of N runs.

Prints each figure with its ratio to a bare interpreter start measured in the same run, so
results compare across machines. Budget (docs/PERFORMANCE.md): < 0.3 s on 2 cores. oncall's modules
are byte-compiled first, as `pip install` leaves them (scripts/bench/installed.py).

    .venv/bin/python scripts/bench/startup.py [--runs 15]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # `scripts.bench` from anywhere

from scripts.bench.installed import byte_compile

VENV_BIN = Path(sys.executable).parent


def _time(argv: list[str], runs: int, cwd: str) -> float:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ONCALL_")}
    samples = []
    for _ in range(runs):
        started = time.perf_counter()
        subprocess.run(argv, cwd=cwd, env=env, stdout=subprocess.DEVNULL, check=True)
        samples.append(time.perf_counter() - started)
    return statistics.median(samples)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=15)
    args = parser.parse_args()
    byte_compile()
    oncall = str(VENV_BIN / "oncall")
    cases = {
        "python -c pass (baseline)": [sys.executable, "-c", "pass"],
        "oncall --version": [oncall, "--version"],
        "oncall --help": [oncall, "--help"],
        "oncall config show": [oncall, "config", "show"],
        "oncall config show -o json": [oncall, "config", "show", "-o", "json"],
    }
    with tempfile.TemporaryDirectory() as cwd:
        for argv in cases.values():  # warm the page cache and .pyc files
            subprocess.run(argv, cwd=cwd, stdout=subprocess.DEVNULL, check=True)
        results = {name: _time(argv, args.runs, cwd) for name, argv in cases.items()}
    baseline = results["python -c pass (baseline)"]
    print(f"median of {args.runs} runs, {os.cpu_count()} CPUs")
    print(f"{'command':32} {'seconds':>8} {'x baseline':>11}")
    for name, seconds in results.items():
        print(f"{name:32} {seconds:8.3f} {seconds / baseline:11.1f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
