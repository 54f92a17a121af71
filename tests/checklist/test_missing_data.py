"""No false green on missing data: every shipped runbook, against a Prometheus that has scraped
a vLLM served by Ray Serve (`ray_vllm:` names only) and a Helm-default dcgm-exporter before any
Xid (no `DCGM_FI_DEV_XID_ERRORS` series).

The payloads are `fixtures/vllm/metrics_ray_serve_0.33.txt` and
`fixtures/dcgm/helm-default-no-xid-4.5.3.prom` (sources in fixtures/README.md), scraped by a
real Prometheus. Steps whose probe reads Prometheus (`vllm.rates`, `prometheus.query`,
`gpu.devices` from DCGM) run their real probe against it; the other steps (Kubernetes, Redis,
vLLM's own endpoints) get the recorded facts of the runbook's first test case, so that the
steps that need them run too. Every step that reads vLLM metrics or the Xid must come out
`unknown`, naming what is missing and where the data is; the GPU memory steps, whose series
exist, are still judged. The probes are also asked directly: `prometheus.query` names the
selector that matched nothing, `vllm.metrics` scraping the Ray payload itself reports every fact
absent.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
import pytest_asyncio
import yaml
from aiohttp import web

from oncall.checklist.absence import facts_read
from oncall.checklist.compiled import CompiledStep
from oncall.checklist.engine import collect
from oncall.checklist.loader import load_runbook, runbook_files
from oncall.checklist.testing import AlertFixture, alert_facts
from oncall.errors import BackendError
from oncall.model.checklist_events import StepResult
from oncall.probes.context import ProbeContext
from oncall.probes.prometheus import QueryParams, run_query
from oncall.probes.vllm import MetricsParams, run_metrics
from oncall.service.checklists import LiveRunner
from oncall.settings.model import GpuSettings, PrometheusSettings, Settings, VllmSettings
from tests.drill.gateway.helpers import serve_app
from tests.harness.servers import RunningServer, prometheus_server
from tests.probes.dcgm_scraped import wait_scraped

ROOT = Path(__file__).resolve().parents[2]
RUNBOOKS = ROOT / "runbooks"
PAYLOADS = {
    "ray-vllm": ROOT / "fixtures" / "vllm" / "metrics_ray_serve_0.33.txt",
    "dcgm": ROOT / "fixtures" / "dcgm" / "helm-default-no-xid-4.5.3.prom",
}
module_loop = pytest.mark.asyncio(loop_scope="module")


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def prometheus(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[RunningServer]:
    app = web.Application()
    for job, path in PAYLOADS.items():
        text = path.read_text(encoding="utf-8")

        async def serve(_request: web.Request, text: str = text) -> web.Response:
            return web.Response(text=text, content_type="text/plain")

        app.router.add_get(f"/{job}", serve)
    async with (
        serve_app(app) as url,
        httpx.AsyncClient(trust_env=False, timeout=5) as http,
    ):
        target = url.removeprefix("http://")
        jobs = [
            {"job_name": job, "metrics_path": f"/{job}", "static_configs": [{"targets": [target]}]}
            for job in PAYLOADS
        ]
        with prometheus_server(tmp_path_factory.mktemp("missing"), scrape_configs=jobs) as prom:
            await wait_scraped(http, prom, "count(up == 1)", len(jobs), what="both payloads")
            yield prom


def _settings(prom: RunningServer) -> Settings:
    return Settings(prometheus=PrometheusSettings(url=prom.url), gpu=GpuSettings(source="dcgm"))


def _first_case(runbook: Path) -> dict[str, Any]:
    test_file = RUNBOOKS / "tests" / f"{runbook.stem}.test.yaml"
    case: dict[str, Any] = yaml.safe_load(test_file.read_text(encoding="utf-8"))["tests"][0]
    return case


def _reads_prometheus(step: CompiledStep) -> bool:
    return step.probe.backend == "prometheus" or step.probe.name == "gpu.devices"


@dataclass
class Ran:
    runbook: str
    step: CompiledStep
    result: StepResult

    @property
    def reads_vllm(self) -> bool:
        if self.step.probe.name == "vllm.rates":
            return True
        return self.step.probe.name == "prometheus.query" and "vllm:" in str(
            self.step.spec.params.get("query", "")
        )

    @property
    def reads_xid(self) -> bool:
        return self.step.probe.name == "gpu.devices" and "xid_count" in facts_read(self.step)


async def _run_all(prom: RunningServer) -> list[Ran]:
    ran: list[Ran] = []
    async with ProbeContext(_settings(prom)) as ctx:
        for path in runbook_files([RUNBOOKS]):
            loaded = load_runbook(path)
            assert loaded.runbook is not None, loaded.problems
            runbook = loaded.runbook
            case = _first_case(path)
            recorded: dict[str, dict[str, Any]] = case.get("facts") or {}
            live = LiveRunner(ctx)

            async def runner(
                step: CompiledStep,
                params: dict[str, Any],
                recorded: dict[str, dict[str, Any]] = recorded,
                live: LiveRunner = live,
            ) -> dict[str, Any]:
                if _reads_prometheus(step):
                    return await live(step, params)
                if step.spec.id in recorded:
                    return dict(recorded[step.spec.id])
                raise BackendError("recorded", step.spec.probe, "no recorded facts")

            alert = alert_facts(runbook.spec.alert, AlertFixture(**(case.get("alert") or {})))
            results = await collect(runbook, alert, runner)
            by_id = {step.spec.id: step for step in runbook.steps}
            ran.extend(Ran(path.name, by_id[r.id], r) for r in results)
    return ran


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def ran(prometheus: RunningServer) -> list[Ran]:
    return await _run_all(prometheus)


@module_loop
async def test_no_step_reading_absent_vllm_or_xid_series_is_green(ran: list[Ran]) -> None:
    vllm = [r for r in ran if r.reads_vllm]
    xid = [r for r in ran if r.reads_xid]
    # Every shipped step that reads them (the vllm.rates and vLLM PromQL steps, VllmEngineHung's
    # included, LLMHighP99Latency's kv_imbalance, GPUXidError's serving_load and capacity_left,
    # and the Xid).
    assert len(vllm) == 23 and len(xid) == 1
    for r in vllm:
        where = f"{r.runbook} {r.result.id}"
        if r.result.status == "skipped":  # after a step it needs, itself unknown: not green
            assert "which is unknown" in (r.result.reason or ""), (where, r.result.reason)
            continue
        assert r.result.status == "unknown", (where, r.result.status, r.result.reason)
        assert "ray_vllm:" in (r.result.reason or ""), (where, r.result.reason)
        assert "a Ray Serve deployment?" in (r.result.summary or ""), where
    (only,) = xid
    assert only.result.status == "unknown", only.result
    assert only.result.reason is not None
    assert only.result.reason.startswith(
        "no DCGM_FI_DEV_XID_ERRORS series for the 4 GPUs on gpu-node-1: dcgm-exporter exports it "
        "only after a GPU's first Xid"
    )
    # The steps after the Xid need a failed Xid step: they wait, they do not pass.
    after = {r.result.id: r.result.status for r in ran if r.runbook == "GPUXidError.yaml"}
    assert after == {"xid": "unknown", "restart_app": "skipped", "node_action": "skipped",
                     "serving_load": "skipped", "capacity_left": "skipped"}  # fmt: skip


@module_loop
async def test_steps_whose_series_exist_are_still_judged(ran: list[Ran]) -> None:
    """The GPU memory series exist in the same Prometheus: those steps are judged as before."""
    memory = {
        (r.runbook, r.result.id): r.result
        for r in ran
        if r.step.probe.name == "gpu.devices" and not r.reads_xid
    }
    assert memory, "no GPU memory step ran"
    for where, result in memory.items():
        assert result.status in ("ok", "warn", "fail"), (where, result.status, result.reason)
        assert result.reason is None, where
        # The probe's answer says the Xid is missing; these steps do not read it.
        assert result.facts is not None and set(result.facts["absent"]) == {"xid_count"}, where


@module_loop
@pytest.mark.parametrize(
    ("query", "absent"),
    [
        # Series there, nothing selected: an answer, not missing data.
        ("up == 0", None),
        ("sum(ray_vllm:num_requests_running) > 1000", None),
        (
            "sum(rate(vllm:generation_tokens_total[5m]))",
            "no series match vllm:generation_tokens_total; found "
            "ray_vllm:generation_tokens_total — a Ray Serve deployment?",
        ),
        (
            'max(DCGM_FI_DEV_XID_ERRORS{Hostname="gpu-node-1"})'
            ' or max(DCGM_FI_DEV_GPU_TEMP{gpu="9"})',
            'no series match DCGM_FI_DEV_XID_ERRORS{Hostname="gpu-node-1"}; '
            'no series match DCGM_FI_DEV_GPU_TEMP{gpu="9"}',
        ),
        # A metric that exists with a matcher that empties it: named with the matcher.
        ('DCGM_FI_DEV_GPU_TEMP{gpu="9"} > 0', 'no series match DCGM_FI_DEV_GPU_TEMP{gpu="9"}'),
    ],
)
async def test_an_empty_query_says_which_selector_found_nothing(
    prometheus: RunningServer, query: str, absent: str | None
) -> None:
    async with ProbeContext(_settings(prometheus)) as ctx:
        facts = await run_query(ctx, QueryParams(query=query))
    assert (facts["value"], facts["count"], facts["samples"]) == (None, 0, [])
    expected = {} if absent is None else dict.fromkeys(("count", "samples", "value"), absent)
    assert facts["absent"] == expected


async def test_vllm_metrics_of_a_ray_serve_payload_are_absent_not_zero() -> None:
    """The direct scrape (`vllm.metrics`) of a payload with only ray_vllm:* names."""
    text = PAYLOADS["ray-vllm"].read_text(encoding="utf-8")

    async def metrics(_request: web.Request) -> web.Response:
        return web.Response(text=text, content_type="text/plain")

    app = web.Application()
    app.router.add_get("/metrics", metrics)
    async with serve_app(app) as url:
        settings = Settings(vllm=VllmSettings(urls=[url]))
        async with ProbeContext(settings) as ctx:
            facts = await run_metrics(ctx, MetricsParams(interval=0))
    assert (facts["answered"], facts["running"], facts["kv_cache_usage"]) == (1, None, None)
    assert set(facts["absent"]) == set(facts["missing"]) >= {"running", "kv_cache_usage", "e2e_s"}
    assert "Ray Serve's ray_vllm:*" in facts["absent"]["kv_cache_usage"]
