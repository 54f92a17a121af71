"""The capacity guard against a real Prometheus scraping vLLM-shaped /metrics we serve: stale
numbers between the preview and the write (the load doubles: the re-check refuses, and an
override typed on the old numbers does not carry over), a forged /metrics answer (nonsense
values, a login page), a missing vLLM endpoint and a Prometheus behind a login page: each
`unknown`, which passes with a warning that says so, never as ok.

The Kubernetes side (the Deployment and its pods) is given as the API's JSON (a stand-in
reader): what the guard reads from it is covered against the drill's simulator in
tests/drill/stack/test_capacity_drill.py.
"""

from __future__ import annotations

import asyncio
import dataclasses
import http.server
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

import httpx
import pytest

from oncall.backends.kube_write import KubeWriter
from oncall.model.write_path import GuardVerdict, Plan, Preview, Target
from oncall.remediation.actions.rebuild_pod import ACTION as REBUILD
from oncall.remediation.capacity_guard import overridable, preview_verdict, recheck_verdict
from oncall.remediation.clients import Clients
from oncall.settings import Settings
from oncall.settings.model import PrometheusSettings
from tests.harness.servers import prometheus_server
from tests.harness.waiting import wait_until

PODS = ("vllm-a", "vllm-b", "vllm-c")
LOGIN = "<html><body><form action='/sso/login'>Sign in</form></body></html>"


def exposition(running: float, waiting: float, kv: float, preemptions: float) -> str:
    model = '{model_name="qwen",engine="0"}'
    return (
        "# TYPE vllm:num_requests_running gauge\n"
        f"vllm:num_requests_running{model} {running}\n"
        "# TYPE vllm:num_requests_waiting gauge\n"
        f"vllm:num_requests_waiting{model} {waiting}\n"
        "# TYPE vllm:kv_cache_usage_perc gauge\n"
        f"vllm:kv_cache_usage_perc{model} {kv}\n"
        "# TYPE vllm:num_preemptions_total counter\n"
        f"vllm:num_preemptions_total{model} {preemptions}\n"
    )


@dataclass
class MetricsServer:
    """Serves /<pod> as that pod's /metrics: text set by the test (a login page included)."""

    pages: dict[str, tuple[str, str]] = field(default_factory=dict)
    port: int = 0

    def set(self, pod: str, text: str, kind: str = "text/plain; version=0.0.4") -> None:
        self.pages[pod] = (text, kind)


@pytest.fixture
def metrics() -> Iterator[MetricsServer]:
    served = MetricsServer()

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            text, kind = served.pages.get(self.path.strip("/"), ("", "text/plain"))
            body = text.encode()
            self.send_response(200 if text else 404)
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *_args: Any) -> None:
            pass

    class Server(http.server.ThreadingHTTPServer):
        def handle_error(self, request: Any, client_address: Any) -> None:
            pass  # a scraper that hangs up early (Prometheus' scrape timeout) is no test failure

    server = Server(("127.0.0.1", 0), Handler)
    served.port = server.server_address[1]
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield served
    finally:
        server.shutdown()
        server.server_close()


def scrape_configs(port: int, pods: tuple[str, ...]) -> list[dict[str, Any]]:
    return [
        {
            "job_name": f"vllm-{pod}",
            "metrics_path": f"/{pod}",
            "static_configs": [
                {"targets": [f"127.0.0.1:{port}"], "labels": {"namespace": "ai", "pod": pod}}
            ],
        }
        for pod in pods
    ]


def pod(name: str, *, cap: int = 32) -> dict[str, Any]:
    """A Ready vLLM pod as the API returns it: 90 s from startedAt to Ready."""
    return {
        "metadata": {"name": name, "namespace": "ai", "uid": f"uid-{name}"},
        "spec": {
            "containers": [
                {"name": "vllm", "args": ["--model", "qwen", "--max-num-seqs", str(cap)]}
            ],
            "terminationGracePeriodSeconds": 30,
        },
        "status": {
            "containerStatuses": [{"state": {"running": {"startedAt": "2026-01-01T10:00:00Z"}}}],
            "conditions": [
                {"type": "Ready", "status": "True", "lastTransitionTime": "2026-01-01T10:01:30Z"}
            ],
        },
    }


class Workload:
    """The Deployment ai/vllm and its pods, as the Kubernetes API answers."""

    def __init__(self, pods: tuple[str, ...]) -> None:
        self.pods = [pod(name) for name in pods]

    async def get_deployment(self, namespace: str, name: str) -> dict[str, Any]:
        return {
            "metadata": {"name": name, "namespace": namespace},
            "spec": {"replicas": len(self.pods), "selector": {"matchLabels": {"app": "vllm"}},
                     "strategy": {"rollingUpdate": {"maxSurge": "25%", "maxUnavailable": "25%"}}},
        }  # fmt: skip

    async def list_pods(
        self, namespace: str, label_selector: str | None = None, field_selector: str | None = None
    ) -> list[dict[str, Any]]:
        assert label_selector == "app=vllm"
        return self.pods


def clients(prometheus_url: str, pods: tuple[str, ...] = PODS) -> Clients:
    settings = Settings(prometheus=PrometheusSettings(url=prometheus_url, timeout=3.0))
    return Clients(settings, kube=cast(KubeWriter, Workload(pods)))


PLAN = Plan(
    action="rebuild-pod", params={"pod": "vllm-a"}, target=Target("Pod", "vllm-a", "ai", "uid-a"),
    before="", after="", request={}, dangerous=True, confirm_word="vllm-a",
    workload=Target("Deployment", "vllm", "ai"),
)  # fmt: skip


def seen(url: str, pod: str, metric: str, value: float) -> bool:
    """Whether Prometheus has `metric` of `pod` at `value` now."""
    answer = httpx.get(
        f"{url}/api/v1/query", params={"query": f'{metric}{{pod="{pod}"}}'}, trust_env=False
    ).json()
    return any(float(r["value"][1]) == value for r in answer["data"]["result"])


def counted(url: str, pods: tuple[str, ...]) -> bool:
    """Whether Prometheus has two samples of each pod's preemption counter (`increase()`
    needs two: the guard reads a counter with one as not read)."""
    answer = httpx.get(
        f"{url}/api/v1/query",
        params={"query": "sum by (pod) (increase(vllm:num_preemptions_total[120s]))"},
        trust_env=False,
    ).json()
    return {r["metric"]["pod"] for r in answer["data"]["result"]} >= set(pods)


def loads_scraped(url: str, *, running_a: int, running_others: int) -> None:
    """Until Prometheus holds vllm-a's and the other pods' running sequences as set."""
    wait_until(
        lambda: (
            all(seen(url, p, "vllm:num_requests_running", running_others) for p in PODS[1:])
            and seen(url, "vllm-a", "vllm:num_requests_running", running_a)
            and counted(url, PODS)
        ),
        within=30,
        what="the loads scraped",
    )


async def preview_of(c: Clients) -> Preview:
    verdict = await preview_verdict(REBUILD, PLAN, c)
    assert verdict is not None
    return overridable(Preview(PLAN, None, (verdict,)))


def recheck(url: str, preview: Preview) -> GuardVerdict | None:
    """The guard's re-check before the write, reading the Prometheus at `url`."""
    return asyncio.run(recheck_verdict(REBUILD, PLAN, clients(url), preview))


def load_of_a_changes(
    metrics: MetricsServer, url: str, load: tuple[int, int, float, float]
) -> None:
    """vllm-a's /metrics now says `exposition(*load)` (running, waiting, KV-cache usage,
    preemptions): after the preview; until Prometheus holds its running sequences."""
    running = load[0]
    metrics.set("vllm-a", exposition(*load))
    wait_until(
        lambda: seen(url, "vllm-a", "vllm:num_requests_running", running),
        within=30,
        what=f"vllm-a's new load ({running} running) scraped",
    )


def test_load_doubling_after_the_preview_is_refused(metrics: MetricsServer, tmp_path: Path) -> None:
    metrics.set("vllm-a", exposition(10, 0, 0.3, 0))
    for other in PODS[1:]:
        metrics.set(other, exposition(12, 0, 0.4, 0))
    with prometheus_server(tmp_path, scrape_configs=scrape_configs(metrics.port, PODS)) as prom:
        loads_scraped(prom.url, running_a=10, running_others=12)
        preview = asyncio.run(preview_of(clients(prom.url)))
        (shown,) = preview.verdicts
        assert shown.ok and not shown.warning and shown.reason.startswith("ok: 10 sequences")
        assert shown.detail["moved_sequences"] == 10 and shown.detail["free_slots"] == 40
        assert shown.detail["time_to_ready_s"] == 90 and shown.detail["grace_period_s"] == 30

        # Unchanged: the re-check passes.
        again = recheck(prom.url, preview)
        assert again is not None and again.ok

        load_of_a_changes(metrics, prom.url, (20, 2, 0.6, 0))  # 22 sequences: more than 1.5 x 10
        later = recheck(prom.url, preview)
        assert later is not None and not later.ok and later.override is None
        assert "grew from 10 to 22 sequences" in later.reason


def test_an_override_does_not_carry_over_to_a_grown_load(
    metrics: MetricsServer, tmp_path: Path
) -> None:
    metrics.set("vllm-a", exposition(8, 2, 0.95, 3))
    for other in PODS[1:]:
        metrics.set(other, exposition(32, 5, 0.97, 4))  # at the cap (32) with waiting
    with prometheus_server(tmp_path, scrape_configs=scrape_configs(metrics.port, PODS)) as prom:
        loads_scraped(prom.url, running_a=8, running_others=32)
        preview = asyncio.run(preview_of(clients(prom.url)))
        (shown,) = preview.verdicts
        assert not shown.ok and shown.override == "override capacity"
        assert preview.refusal is None  # the phrase, not a hard refusal, stands in the way
        assert preview.plan.confirm_word == "override capacity vllm-a"
        same = recheck(prom.url, preview)
        assert same is not None and same.ok and same.detail["overridden"] is True

        load_of_a_changes(metrics, prom.url, (16, 10, 0.99, 5))
        grown = recheck(prom.url, preview)
        assert grown is not None and not grown.ok and grown.override is None


@pytest.mark.parametrize(
    ("forged", "says"),
    [
        (exposition(12, 0, 7.5, 0), "kv_cache_usage=7.5 above 1"),
        (exposition(-4, 0, 0.4, 0), "running=-4"),
        (exposition(900, 0, 0.4, 0), "running=900 above the cap 32"),
        (LOGIN, "capacity unknown, not read: vllm-b"),  # the scrape fails: no series
    ],
)
def test_a_forged_metrics_answer_is_unknown(
    metrics: MetricsServer, tmp_path: Path, forged: str, says: str
) -> None:
    metrics.set("vllm-a", exposition(4, 0, 0.2, 0))
    metrics.set("vllm-b", forged, "text/html" if forged == LOGIN else "text/plain; version=0.0.4")
    metrics.set("vllm-c", exposition(4, 0, 0.2, 0))
    with prometheus_server(tmp_path, scrape_configs=scrape_configs(metrics.port, PODS)) as prom:
        wait_until(
            lambda: (
                seen(prom.url, "vllm-c", "vllm:num_requests_running", 4)
                and seen(prom.url, "vllm-a", "vllm:num_requests_running", 4)
                and counted(prom.url, ("vllm-a", "vllm-c"))
            ),
            within=30,
            what="the honest pods scraped",
        )
        # The forged pod scraped too: its numbers in Prometheus, or its scrape failed (`up` 0).
        forged_seen = (
            (lambda: seen(prom.url, "vllm-b", "up", 0))
            if forged == LOGIN
            else (lambda: counted(prom.url, PODS))
        )
        wait_until(forged_seen, within=30, what="the forged answer scraped")
        preview = asyncio.run(preview_of(clients(prom.url)))
        (shown,) = preview.verdicts
        assert shown.detail["verdict"] == "unknown", shown
        assert shown.ok and shown.warning and shown.reason.startswith("unknown: ")
        assert says in shown.reason


def test_a_missing_vllm_endpoint_is_unknown(metrics: MetricsServer, tmp_path: Path) -> None:
    """vllm-c is a Ready pod Prometheus has no target for (its /metrics not scraped)."""
    for name in PODS[:2]:
        metrics.set(name, exposition(4, 0, 0.2, 0))
    with prometheus_server(tmp_path, scrape_configs=scrape_configs(metrics.port, PODS[:2])) as p:
        wait_until(
            lambda: (
                all(seen(p.url, n, "vllm:num_requests_running", 4) for n in PODS[:2])
                and counted(p.url, PODS[:2])
            ),
            within=30,
            what="the scraped pods",
        )
        preview = asyncio.run(preview_of(clients(p.url)))
        (shown,) = preview.verdicts
        assert shown.detail["verdict"] == "unknown" and shown.warning
        assert "not read: vllm-c: running, waiting, kv_cache_usage, preemptions" in shown.reason


def test_prometheus_behind_a_login_page_is_unknown_and_refused_if_the_preview_was_ok(
    metrics: MetricsServer,
) -> None:
    """An SSO proxy answering for Prometheus: every load unread."""
    metrics.set("api/v1/query", LOGIN, "text/html")
    c = clients(f"http://127.0.0.1:{metrics.port}")
    preview = asyncio.run(preview_of(c))
    (shown,) = preview.verdicts
    assert shown.detail["verdict"] == "unknown" and shown.warning
    assert "Prometheus did not answer the load queries" in shown.reason
    ok = shown.__class__(
        "capacity", True, "ok: 4 sequences fit", {"verdict": "ok", "moved_sequences": 4}
    )
    after = asyncio.run(recheck_verdict(REBUILD, PLAN, c, Preview(PLAN, None, (ok,))))
    assert after is not None and not after.ok and "ok -> unknown" in after.reason


def test_a_pod_outside_the_deployment_is_unknown(metrics: MetricsServer, tmp_path: Path) -> None:
    """The pod named is not one of the Deployment's (its selector's): no "0 sequences" ok."""
    plan = dataclasses.replace(PLAN, target=Target("Pod", "stray-pod", "ai", "uid-s"))
    for name in PODS:
        metrics.set(name, exposition(4, 0, 0.2, 0))
    with prometheus_server(tmp_path, scrape_configs=scrape_configs(metrics.port, PODS)) as prom:
        wait_until(lambda: counted(prom.url, PODS), within=30, what="the pods scraped")
        shown = asyncio.run(preview_verdict(REBUILD, plan, clients(prom.url)))
        assert shown is not None and shown.detail["verdict"] == "unknown" and shown.warning
        assert "stray-pod not among Deployment ai/vllm's pods" in shown.reason
