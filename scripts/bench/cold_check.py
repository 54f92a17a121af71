"""A fresh `oncall check ALERT` process against the same checks as a kubectl + curl script.

The budget (docs/PERFORMANCE.md): for each shipped runbook, a fresh `oncall check` against the drill
has a median wall time <= 0.5 s and beats the shell script a person would run instead (the steps'
own command-line equivalents: `kubectl` for the Kubernetes steps, `curl` to Prometheus and vLLM,
`redis-cli`; scripts/bench/checklist.py builds it). The two are run alternately, N times each, so
that both see the same machine; also reported: the CPU time (user + system) of the oncall process,
steadier than wall time on a shared machine.

The script begins where `oncall check` begins: reading the alert's state and labels from
Prometheus (`curl PROM/api/v1/rules?type=alert`), then each step's equivalent. oncall's
modules are byte-compiled first, as `pip install` leaves them (scripts/bench/installed.py).

    .venv/bin/python scripts/bench/cold_check.py [--runs 7] [--dir DRILL_DIR] [ALERT ...]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import resource
import shlex
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # `scripts.bench` from anywhere

from oncall.settings import Settings
from oncall.settings.loader import load_settings
from scripts.bench.checklist import bench_checklist, drill_dir, kube_access, shell_script
from scripts.bench.installed import byte_compile

BUDGET_S = 0.5


def shipped_alerts(root: Path) -> list[str]:
    """The alert each shipped runbook is for: its `alert`, or for a generic runbook found by
    label matchers (kube-pod-not-ready.yaml) the alertname its `match` names: `oncall check`
    takes an alert name, and a file name with '-' is none (it would measure a usage error)."""
    alerts = []
    for path in sorted((root / "runbooks").glob("*.yaml")):
        spec = yaml.safe_load(path.read_text(encoding="utf-8"))
        named = re.search(r'alertname="([^"]+)"', str(spec.get("match", "")))
        alerts.append(spec.get("alert") or (named.group(1) if named else path.stem))
    return alerts


def oncall_command() -> list[str]:
    script = Path(sys.executable).with_name("oncall")
    return [str(script)] if script.exists() else [sys.executable, "-m", "oncall"]


def alert_state(settings: Settings) -> str:
    """The read of the alerts' state and labels that `oncall check` starts with."""
    url = f"{settings.prometheus.url.rstrip('/')}/api/v1/rules?type=alert"
    return f"curl -s {shlex.quote(url)} > /dev/null\n"


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
    compiled = byte_compile()
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
              f"{os.cpu_count()} CPUs, load {os.getloadavg()[0]:.1f}; "
              f"oncall byte-compiled: {'yes' if compiled else 'NO'}")  # fmt: skip
        print(f"{'runbook':24} {'oncall':>7} {'cpu':>6} {'script':>7} {'cmds':>4} {'ratio':>6}  ok")
        for name in args.alerts or shipped_alerts(root):
            *_, results = asyncio.run(bench_checklist(settings, name, 0))
            steps = shell_script(results, settings, server, "kubectl", cacert)
            script = steps.replace("set -u\n", "set -u\n" + alert_state(settings), 1)
            ours, cpu, theirs = [], [], []
            for _ in range(args.runs):
                wall, used = timed([*oncall, "--config", str(config), "check", name])
                ours.append(wall)
                cpu.append(used)
                theirs.append(timed([bash, "-c", script], env)[0])
            mine, shell = statistics.median(ours), statistics.median(theirs)
            ok = "yes" if mine <= BUDGET_S and mine < shell else "NO"
            commands = sum(1 for line in script.splitlines()[1:] if line.strip())
            print(f"{name:24} {mine:7.3f} {statistics.median(cpu):6.3f} {shell:7.3f} "
                  f"{commands:4d} {shell / mine:5.2f}x  {ok}")  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
