"""A fresh `oncall check ALERT` process against the same checks as a kubectl + curl script.

Issue 15, acceptance 1: for each shipped runbook, a fresh `oncall check` against the drill has a
median wall time <= 0.5 s and beats the shell script a person would run instead (the steps'
own command-line equivalents: `kubectl` for the Kubernetes steps, `curl` to Prometheus and
vLLM, `redis-cli`; scripts/bench/checklist.py builds it). The two are run alternately, N times
each, so that both see the same machine; also reported: the CPU time (user + system) of the
oncall process, steadier than wall time on a shared machine.

    .venv/bin/python scripts/bench/cold_check.py [--runs 7] [--dir DRILL_DIR] [ALERT ...]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import resource
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # `scripts.bench` from anywhere

from oncall.settings.loader import load_settings
from scripts.bench.checklist import bench_checklist, drill_dir, kube_access, shell_script

BUDGET_S = 0.5


def shipped_runbooks(root: Path) -> list[str]:
    return sorted(p.stem for p in (root / "runbooks").glob("*.yaml"))


def oncall_command() -> list[str]:
    script = Path(sys.executable).with_name("oncall")
    return [str(script)] if script.exists() else [sys.executable, "-m", "oncall"]


def timed(argv: list[str], env: dict[str, str] | None = None) -> tuple[float, float]:
    """(wall, CPU of the child) of one run; its output discarded, its exit code ignored
    (`oncall check` exits 1 when a step fails, as on an unhealthy drill)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    subprocess.run(argv, env=env, capture_output=True, check=False, timeout=120)
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("alerts", nargs="*", help="default: every shipped runbook")
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--dir", type=Path, help="a running drill (default: start one)")
    args = parser.parse_args()
    root = Path(__file__).resolve().parents[2]
    oncall = oncall_command()
    with drill_dir(args.dir, oncall, "bench-cold-") as directory:
        config = directory / "oncall.yaml"
        settings = load_settings(config=config).settings
        server, token = kube_access(directory)
        cacert = directory / "tls" / "apiserver.crt"
        bash = shutil.which("bash") or "/bin/bash"
        # HOME kept: kubectl's discovery cache stays warm, as on an engineer's machine.
        env = {
            "PATH": "/usr/bin:/bin:/usr/local/bin",
            "KUBE_TOKEN": token,
            "HOME": str(Path.home()),
        }
        print(f"drill {directory}; {args.runs} fresh runs each, alternating; medians; "
              f"{os.cpu_count()} CPUs, load {os.getloadavg()[0]:.1f}")  # fmt: skip
        print(f"{'runbook':24} {'oncall':>7} {'cpu':>6} {'script':>7} {'cmds':>4} {'ratio':>6}  ok")
        for name in args.alerts or shipped_runbooks(root):
            *_, results = asyncio.run(bench_checklist(settings, name, 0))
            script = shell_script(results, settings, server, "kubectl", cacert)
            ours, cpu, theirs = [], [], []
            for _ in range(args.runs):
                wall, used = timed([*oncall, "--config", str(config), "check", name])
                ours.append(wall)
                cpu.append(used)
                theirs.append(timed([bash, "-c", script], env)[0])
            mine, shell = statistics.median(ours), statistics.median(theirs)
            ok = "yes" if mine <= BUDGET_S and mine < shell else "NO"
            print(f"{name:24} {mine:7.3f} {statistics.median(cpu):6.3f} {shell:7.3f} "
                  f"{script.count(chr(10)) - 1:4d} {shell / mine:5.2f}x  {ok}")  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
