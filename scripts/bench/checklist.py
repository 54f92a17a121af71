"""Checklist wall time against its slowest step, and against the same checks run by a shell script.

In a drill environment (started here, or `--dir` of a running one), for each runbook:

- checklist: the engine runs the runbook against the drill with one shared `ProbeContext`
  (clients warm, as in the app; the first, cold run — importing the kubernetes client — is
  reported apart). Wall time per run against the slowest step of that run (target <= 1.3x).
- shell: a bash script running each step's command-line equivalent one after another —
  `curl` to Prometheus and vLLM, `redis-cli`, and for the `kube.*` steps either `kubectl` (the
  probes' own equivalents) or `curl` to the Kubernetes API with the drill's bearer token (the
  leanest possible client). Target: the checklist >= 5x faster.

    .venv/bin/python scripts/bench/checklist.py [--runs 10] [--dir DRILL_DIR] [ALERT ...]
"""

from __future__ import annotations

import argparse
import asyncio
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlencode

import yaml

from oncall.model.checklist_events import StepResult
from oncall.probes.context import ProbeContext
from oncall.service.checklists import (
    alert_facts,
    find_runbook,
    load_checked,
    stream_checklist,
)
from oncall.settings import Settings
from oncall.settings.loader import load_settings

DEFAULT_ALERTS = ["LLMHighP99Latency", "LLMOutOfMemory", "AIServiceUnavailable"]


def kube_access(directory: Path) -> tuple[str, str]:
    config = yaml.safe_load((directory / "kubeconfig").read_text())
    server = config["clusters"][0]["cluster"]["server"]
    token = next(u["user"]["token"] for u in config["users"] if "read-only" not in u["name"])
    return server, token


def kube_curl(step: StepResult, server: str, namespace: str, cacert: Path) -> str:
    params = step.params
    ns = params.get("namespace") or namespace
    tls = f"--cacert {shlex.quote(str(cacert))} " if server.startswith("https") else ""
    if step.probe == "kube.logs":  # the pods it chose from, then the log it read (if one)
        pod = params.get("pod") or (step.facts or {}).get("pod")
        query = {"labelSelector": params["selector"]} if params.get("selector") else {}
        path = f"/api/v1/namespaces/{ns}/pods" + (f"/{params['pod']}" if params.get("pod") else "")
        lines = [_kube_get(server, path, {} if params.get("pod") else query, tls)]
        if (step.facts or {}).get("found") and pod:
            log = {
                "container": params.get("container") or "",
                "previous": str(bool(params.get("previous"))).lower(),
                "tailLines": params["tail_lines"],
                "limitBytes": params["limit_bytes"],
            }
            lines.append(_kube_get(server, f"/api/v1/namespaces/{ns}/pods/{pod}/log", log, tls))
        return "\n".join(lines)
    if step.probe == "kube.pods":
        query = {"labelSelector": params["selector"]} if params.get("selector") else {}
        path = f"/api/v1/namespaces/{ns}/pods"
    elif step.probe == "kube.deployment":
        query, path = {}, f"/apis/apps/v1/namespaces/{ns}/deployments/{params['name']}"
    elif step.probe == "kube.events":
        field = f"involvedObject.kind={params['kind']}"
        if params.get("name"):
            field += f",involvedObject.name={params['name']}"
        query, path = {"fieldSelector": field}, f"/api/v1/namespaces/{ns}/events"
    else:  # kube.nodes
        query, path = {}, "/api/v1/nodes"
    return _kube_get(server, path, query, tls)


def _kube_get(server: str, path: str, query: dict[str, Any], tls: str) -> str:
    url = server + quote(path) + (f"?{urlencode(query)}" if query else "")
    return f'curl -s {tls}-H "Authorization: Bearer $KUBE_TOKEN" {shlex.quote(url)}'


def commands(equivalent: str) -> list[str]:
    """The shell commands of a step's equivalent, one each: a line ends its command unless a
    quote is still open (a PromQL query written over several lines is one argument)."""
    found, pending = [], ""
    for line in equivalent.splitlines():
        pending = f"{pending}\n{line}" if pending else line
        try:
            shlex.split(pending)
        except ValueError:  # no closing quotation: the command goes on on the next line
            continue
        found.append(pending)
        pending = ""
    return [*found, pending] if pending else found


def logs_commands(step: StepResult) -> list[str]:
    """`kube.logs` without a pod named lists the selector's pods and reads the log of the one
    whose container terminated last, and none when no container has terminated: its
    equivalent's `POD` is that choice, so the script does what the probe did."""
    prefix, _, rest = (step.equivalent or "").partition(" logs POD ")
    if not rest:  # a pod was named: the equivalent is the command itself
        return commands(step.equivalent or "")
    namespace = shlex.split(rest)[1]  # rest: "-n NS [-c C] [--previous] --tail=N ..."
    listing = f"{prefix} get pods -n {shlex.quote(namespace)}"
    if step.params.get("selector"):
        listing += f" -l {shlex.quote(step.params['selector'])}"
    facts = step.facts or {}
    if facts.get("found") and facts.get("pod"):
        return [listing, f"{prefix} logs {shlex.quote(str(facts['pod']))} {rest}"]
    return [listing]


def shell_script(
    results: list[StepResult], settings: Settings, server: str, kube: str, cacert: Path
) -> str:
    """The checks as bash; `kube` is "kubectl" (the probes' equivalents) or "curl"."""
    lines = ["set -u"]
    for step in results:  # a command two steps share runs once, as a person would run it
        if step.status == "skipped" or not step.equivalent:
            continue
        if step.probe.startswith("kube.") and kube == "curl":
            lines.extend(
                kube_curl(step, server, settings.kubernetes.namespace, cacert).splitlines()
            )
            continue
        lines.extend(
            logs_commands(step) if step.probe == "kube.logs" else commands(step.equivalent)
        )
    lines = list(dict.fromkeys(lines))
    return "\n".join(f"{line} > /dev/null" for line in lines[1:]).join([lines[0] + "\n", "\n"])


async def run_once(
    settings: Settings, runbook: Any, alert: dict[str, Any], ctx: ProbeContext
) -> tuple[float, list[StepResult]]:
    started = time.perf_counter()
    results = [
        e
        async for e in stream_checklist(settings, runbook, alert, ctx=ctx)
        if isinstance(e, StepResult)
    ]
    return time.perf_counter() - started, results


async def bench_checklist(
    settings: Settings, alert_name: str, runs: int
) -> tuple[float, list[float], list[float], list[StepResult]]:
    runbook = load_checked(find_runbook(settings, alert_name), settings)
    alert = alert_facts(alert_name, None)
    async with ProbeContext(settings) as ctx:
        cold, results = await run_once(settings, runbook, alert, ctx)
        walls, slowest = [], []
        for _ in range(runs):
            wall, results = await run_once(settings, runbook, alert, ctx)
            walls.append(wall)
            slowest.append(max(r.duration_s for r in results))
    return cold, walls, slowest, results


def bench_shell(script: str, token: str, runs: int) -> list[float]:
    bash = shutil.which("bash") or "/bin/bash"
    # HOME kept: kubectl's discovery cache stays warm, as on an engineer's machine.
    env = {"PATH": "/usr/bin:/bin:/usr/local/bin", "KUBE_TOKEN": token, "HOME": str(Path.home())}
    walls = []
    for _ in range(runs):
        started = time.perf_counter()
        subprocess.run([bash, "-c", script], env=env, check=False, capture_output=True)
        walls.append(time.perf_counter() - started)
    return walls


def kubectl_start(runs: int) -> float | None:
    kubectl = shutil.which("kubectl")
    if kubectl is None:
        return None
    walls = []
    for _ in range(runs):
        started = time.perf_counter()
        subprocess.run([kubectl, "version", "--client"], capture_output=True, check=False)
        walls.append(time.perf_counter() - started)
    return statistics.median(walls)


@contextmanager
def drill_dir(given: Path | None, oncall: list[str], prefix: str) -> Iterator[Path]:
    """The drill to measure: `given` (running), else one started here and stopped after."""
    if given is not None:
        yield given
        return
    directory = Path(tempfile.mkdtemp(prefix=prefix))
    subprocess.run([*oncall, "drill", "up", "--dir", str(directory)], check=True)
    try:
        time.sleep(10)  # a few scrapes, so that rates have data; bounded
        yield directory
    finally:
        subprocess.run([*oncall, "drill", "down", "--dir", str(directory)], check=False)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("alerts", nargs="*", default=DEFAULT_ALERTS)
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--dir", type=Path, help="a running drill (default: start one)")
    args = parser.parse_args()
    oncall = [sys.executable, "-m", "oncall"]
    with drill_dir(args.dir, oncall, "bench-checklist-") as directory:
        settings = load_settings(config=directory / "oncall.yaml").settings
        server, token = kube_access(directory)
        print(f"drill {directory}; {args.runs} runs each; medians")
        cacert = directory / "tls" / "apiserver.crt"
        print(f"{'runbook':24} {'cold':>6} {'wall':>6} {'slowest':>7} {'ratio':>5} {'cmds':>4}"
              f" {'kubectl':>7} {'faster':>6} {'curl':>6} {'faster':>6}")  # fmt: skip
        for name in args.alerts:
            cold, walls, slowest, results = asyncio.run(bench_checklist(settings, name, args.runs))
            wall, slow = statistics.median(walls), statistics.median(slowest)
            ratios = [w / s for w, s in zip(walls, slowest, strict=True)]
            row = f"{name:24} {cold:6.3f} {wall:6.3f} {slow:7.3f} {statistics.median(ratios):5.2f}"
            for kube in ("kubectl", "curl"):
                script = shell_script(results, settings, server, kube, cacert)
                shell = statistics.median(bench_shell(script, token, args.runs))
                if kube == "kubectl":
                    row += f" {script.count(chr(10)) - 1:4d}"
                row += f" {shell:7.3f} {shell / wall:5.1f}x"
            print(row)
        start = kubectl_start(5)
        if start is not None:
            print(f"context: `kubectl version --client` alone takes {start:.3f} s here")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
