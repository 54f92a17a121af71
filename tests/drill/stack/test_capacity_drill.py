"""The capacity preflight against the drill: under `kv-cache-pressure` with 2 replicas,
rebuilding a pod would send its sequences to a saturated one (refuse: nothing changes without
the override phrase, and the override is audited); with 4 replicas and light load it is ok."""

from __future__ import annotations

import json
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

from tests.drill.stack.conftest import Drill
from tests.drill.stack.remediation_helpers import records, remediate, transitions, vllm_pods
from tests.harness.processes import wait_until


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


def scale(drill: Drill, replicas: int | None) -> None:
    url = f"http://127.0.0.1:{drill.state['ports']['cluster_api']}/drill/scale"
    body = json.dumps({"replicas": replicas}).encode()
    request = urllib.request.Request(url, body, {"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=5) as response:  # noqa: S310 - loopback
        assert response.status == 200


def saturated(drill: Drill, pods: list[str]) -> bool:
    """Every pod's KV cache ≥ 90% and preempting, as Prometheus has it."""
    kv = query(drill, 'max by (pod) (vllm:kv_cache_usage_perc{namespace="ai"})')
    preempted = query(
        drill, 'sum by (pod) (increase(vllm:num_preemptions_total{namespace="ai"}[120s]))'
    )
    return all(kv.get(p, 0) >= 0.9 and preempted.get(p, 0) > 0 for p in pods)


def capacity_of(audit: Path, transition: str = "proposed") -> dict[str, Any]:
    record = next(r for r in records(audit) if r["transition"] == transition)
    found: dict[str, Any] = record["detail"]["capacity"]
    return found


def test_rebuild_under_kv_pressure_is_refused_unless_overridden(
    drill: Drill, tmp_path: Path
) -> None:
    drill.cli("inject", "kv-cache-pressure")
    try:
        wait_until(lambda: len(ready_pods(drill)) == 2, timeout=60, what="2 Ready vLLM pods")
        names = [p["metadata"]["name"] for p in ready_pods(drill)]
        wait_until(lambda: saturated(drill, names), timeout=90, what="both pods' KV saturated")
        pod = ready_pods(drill)[0]
        name, uid = pod["metadata"]["name"], pod["metadata"]["uid"]

        # The plain word is not enough: declined, nothing evicted.
        audit = tmp_path / "refused.jsonl"
        run = remediate(drill, audit, "rebuild-pod", name, answers=[("to confirm", name)])
        assert run.code == 1, run.output
        assert "capacity: refuse: the remaining replicas are saturated" in run.output
        assert f"override capacity {name}" in run.output
        assert transitions(audit) == ["proposed", "declined"]
        shown = capacity_of(audit)
        assert shown["verdict"] == "refuse"
        assert shown["moved_sequences"] > 0 and shown["saturated"] == [
            n for n in names if n != name
        ]
        assert {row["pod"] for row in shown["replicas"]} == set(names)
        assert uid in {p["metadata"]["uid"] for p in vllm_pods(drill)}

        # With the phrase: it runs, and the record says it was overridden, with the numbers.
        audit = tmp_path / "overridden.jsonl"
        run = remediate(
            drill, audit, "rebuild-pod", name, answers=[("to confirm", f"override capacity {name}")]
        )
        assert transitions(audit)[:3] == ["proposed", "approved", "started"], run.output
        approved = next(r for r in records(audit) if r["transition"] == "approved")
        override = approved["detail"]["capacity_override"]
        assert override["overridden"] is True and override["verdict"] == "refuse"
        assert override["moved_sequences"] > 0 and override["phrase"] == "override capacity"
        started = capacity_of(audit, "started")
        assert started["overridden"] is True, started
        wait_until(
            lambda: uid not in {p["metadata"]["uid"] for p in vllm_pods(drill)},
            timeout=60, what=f"pod {name} evicted",
        )  # fmt: skip
    finally:
        drill.cli("clear")


def test_rebuild_with_four_lightly_loaded_replicas_is_ok(drill: Drill, tmp_path: Path) -> None:
    scale(drill, 4)
    try:
        wait_until(lambda: len(ready_pods(drill)) == 4, timeout=120, what="4 Ready vLLM pods")

        def light() -> bool:
            names = {p["metadata"]["name"] for p in ready_pods(drill)}
            running = query(drill, 'sum by (pod) (vllm:num_requests_running{namespace="ai"})')
            kv = query(drill, 'max by (pod) (vllm:kv_cache_usage_perc{namespace="ai"})')
            preempted = query(
                drill, 'sum by (pod) (increase(vllm:num_preemptions_total{namespace="ai"}[10s]))'
            )
            return (
                names <= set(running) and names <= set(preempted)
                and all(kv.get(n, 1) < 0.9 and preempted[n] == 0 for n in names)
            )  # fmt: skip

        # The guard counts preemptions over 10 s here: those of the earlier test's pressure
        # would otherwise stay in its default 2-minute window.
        wait_until(light, timeout=90, what="4 pods scraped, KV below 90%, no preemptions")
        name = ready_pods(drill)[0]["metadata"]["name"]
        audit = tmp_path / "ok.jsonl"
        run = remediate(
            drill, audit, "rebuild-pod", name, "--dry-run", sets=["guards.capacity_window=10s"]
        )
        assert "ok      capacity: ok: " in run.output, run.output
        shown = capacity_of(audit)
        assert shown["verdict"] == "ok" and len(shown["others"]) == 3
        assert shown["moved_sequences"] <= shown["free_slots"]
        assert shown["time_to_ready_s"] is not None and shown["grace_period_s"] == 30
    finally:
        scale(drill, None)
