"""Shared helpers of the remediation tests: run `oncall remediate` on a terminal against the
drill with a test's own audit log, and read the cluster, Redis and the log back. And of the
tests of the app against the drill: its settings, and the app running while faults are on."""

from __future__ import annotations

import asyncio
import json
import re
import urllib.parse
import urllib.request
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, TypeVar

from textual.pilot import Pilot

from oncall.backends.kube_write import KubeWriter
from oncall.settings import Settings
from oncall.settings.loader import load_settings
from oncall.tui.app import OncallApp
from tests.drill.stack.conftest import Drill
from tests.harness.terminal import TerminalRun, run_on_terminal
from tests.harness.waiting import wait_until

T = TypeVar("T")
NS = "ai"


def drill_settings(drill: Drill) -> Settings:
    return load_settings(config=drill.directory / "oncall.yaml").settings


def app_settings(drill: Drill, audit: Path) -> Settings:
    """The drill's settings for a test of the app: its own audit log, and the rate limit
    raised as for `remediate` (the drill tests share one drill)."""
    base = drill_settings(drill)
    return base.model_copy(
        update={"audit": base.audit.model_copy(update={"path": audit}),
                "guards": base.guards.model_copy(update={"rate_limit_actions": 100})}
    )  # fmt: skip


@asynccontextmanager
async def app_on_faults(
    drill: Drill, settings: Settings, *faults: str, size: tuple[int, int] = (120, 40)
) -> AsyncIterator[tuple[OncallApp, Pilot[Any]]]:
    """The app on Textual's headless terminal, the drill's `faults` injected (in that order)
    once it runs, and every fault cleared on the way out, before the app stops."""
    app = OncallApp(settings)
    async with app.run_test(size=size) as pilot:
        for fault in faults:
            await asyncio.to_thread(drill.cli, "inject", fault)
        try:
            yield app, pilot
        finally:
            await asyncio.to_thread(drill.cli, "clear")


def remediate(
    drill: Drill,
    audit: Path,
    *args: str,
    answers: Sequence[tuple[str, str | Callable[[str], str]]] = (),
    sets: Sequence[str] = (),
    timeout: float = 200.0,
) -> TerminalRun:
    """`oncall remediate ARGS` on a terminal, with the drill's settings and its own audit log;
    the rate limit is raised so tests do not trip each other (the rate-limit test sets it)."""
    options = [
        "--config", str(drill.directory / "oncall.yaml"),
        "--set", f"audit.path={audit}",
        "--set", "guards.rate_limit_actions=100",
    ]  # fmt: skip
    for item in sets:
        options += ["--set", item]
    return run_on_terminal([*options, "remediate", *args], answers, timeout=timeout)


def as_asked(word: str) -> Callable[[str], str]:
    """The answer to the confirmation prompt: `word`, or the override phrase the prompt asks
    for when a guard refuses with one (the capacity preflight under the pressure a test
    injected: its verdict moves between warn and refuse with the KV cache scrape to scrape)."""

    def answer(output: str) -> str:
        asked = re.findall(r"type '([^']+)' \(its override\)", output)
        return asked[-1] if asked else word

    return answer


def records(audit: Path) -> list[dict[str, Any]]:
    if not audit.exists():
        return []
    return [json.loads(line) for line in audit.read_text().splitlines() if line.strip()]


def transitions(audit: Path) -> list[str]:
    return [r["transition"] for r in records(audit)]


def kube_call(drill: Drill, call: Callable[[KubeWriter], Any]) -> Any:
    """Run one KubeWriter call (a coroutine factory) with the drill's operator kubeconfig."""

    async def go() -> Any:
        writer = await KubeWriter.open(drill_settings(drill).kubernetes)
        try:
            return await call(writer)
        finally:
            writer.close()

    return asyncio.run(go())


def vllm_pods(drill: Drill) -> list[dict[str, Any]]:
    pods: list[dict[str, Any]] = kube_call(
        drill, lambda k: k.list_pods(NS, label_selector="app=vllm")
    )
    return [p for p in pods if not (p.get("metadata") or {}).get("deletionTimestamp")]


def ready_pod(drill: Drill) -> tuple[str, str]:
    """(name, uid) of a Ready vLLM pod."""
    for pod in vllm_pods(drill):
        conditions = (pod.get("status") or {}).get("conditions") or []
        if any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions):
            meta = pod["metadata"]
            return meta["name"], meta["uid"]
    raise AssertionError("no Ready vLLM pod in the drill")


def query(drill: Drill, expr: str) -> dict[str, float]:
    """pod -> value of an instant query over the drill's Prometheus."""
    url = f"{drill.prometheus}/api/v1/query?{urllib.parse.urlencode({'query': expr})}"
    with urllib.request.urlopen(url, timeout=5) as response:  # noqa: S310 - loopback
        result = json.load(response)["data"]["result"]
    return {r["metric"].get("pod", ""): float(r["value"][1]) for r in result}


def ready_pods(drill: Drill) -> list[dict[str, Any]]:
    def ready(pod: dict[str, Any]) -> bool:
        conditions = (pod.get("status") or {}).get("conditions") or []
        return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)

    return [p for p in vllm_pods(drill) if ready(p)]


def wait_light(drill: Drill) -> None:
    """Until every Ready pod is scraped, its KV below 90% and not preempting over 10 s (the
    guard counts preemptions over 10 s in these tests: an earlier test's pressure would
    otherwise stay in its default 2-minute window)."""
    seen: dict[str, Any] = {}

    def light() -> bool:
        names = {p["metadata"]["name"] for p in ready_pods(drill)}
        running = query(drill, 'sum by (pod) (vllm:num_requests_running{namespace="ai"})')
        kv = query(drill, 'max by (pod) (vllm:kv_cache_usage_perc{namespace="ai"})')
        preempted = query(
            drill, 'sum by (pod) (increase(vllm:num_preemptions_total{namespace="ai"}[10s]))'
        )
        seen.update(names=names, running=running, kv=kv, preempted=preempted)
        return (
            names <= set(running) and names <= set(preempted)
            and all(kv.get(n, 1) < 0.9 and preempted[n] == 0 for n in names)
        )  # fmt: skip

    wait_until(
        light, within=150, what="pods scraped, KV below 90%, no preemptions", seen=lambda: seen
    )


def wait_calm(drill: Drill) -> None:
    """Until every vLLM pod is Ready (a rollout an earlier test started, or its rollback, has
    ended: the Deployment step would fail on it) and the replicas are light (`wait_light`)."""
    wait_until(
        lambda: len(ready_pods(drill)) == len(vllm_pods(drill)) >= 2,
        within=120,
        what="every vLLM pod Ready",
        seen=lambda: [p["metadata"]["name"] for p in vllm_pods(drill)],
    )
    wait_light(drill)
