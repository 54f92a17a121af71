"""Helpers shared by the gateway, GPU-exporter and load-generator tests.

In-process aiohttp servers on free loopback ports, real simulator processes started through
the harness (so the leak check sees them), and reading metrics the way Prometheus would:
parsed with prometheus_client's parser, quantiles interpolated from histogram buckets.
"""

from __future__ import annotations

import contextlib
import functools
import math
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import httpx
from aiohttp import web
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.samples import Sample

from oncall_drill.netutil import free_loopback_port, port_accepts
from tests.harness.processes import ListeningProcess, serving

REPO_ROOT = Path(__file__).resolve().parents[3]
MODEL = "sim/llama"


@contextlib.asynccontextmanager
async def serve_app(app: web.Application) -> AsyncIterator[str]:
    """Serve app on a free 127.0.0.1 port; yields its base URL; always cleans up."""
    runner = web.AppRunner(app, access_log=None, shutdown_timeout=0.2)
    await runner.setup()
    try:
        port = free_loopback_port()
        await web.TCPSite(runner, "127.0.0.1", port).start()
        yield f"http://127.0.0.1:{port}"
    finally:
        await runner.cleanup()


Proc = ListeningProcess
"""A simulator process started for a test."""


@contextlib.contextmanager
def module_process(directory: Path, module: str, *args: str) -> Iterator[Proc]:
    """`python -m module --port P args...` until the port accepts; stopped afterwards."""
    port = free_loopback_port()
    log = directory / f"{module.rsplit('.', 1)[-1]}_{port}.log"
    argv = [sys.executable, "-m", module, "--port", str(port), *args]
    ready = functools.partial(port_accepts, port)
    with serving(argv, log, ready, timeout=20, what=f"{module} to listen") as proc:
        yield Proc(proc, port, log)


def run_module(module: str, *args: str) -> subprocess.CompletedProcess[str]:
    """`python -m module args...` to its end (30 s at most), its output captured as text."""
    return subprocess.run(
        [sys.executable, "-m", module, *args],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )


def vllm_sim(directory: Path, *args: str) -> contextlib.AbstractContextManager[Proc]:
    """A real vLLM simulator (fast: 20 simulated seconds per real second by default)."""
    defaults = ["--model", MODEL] + ([] if "--speed" in args else ["--speed", "20"])
    return module_process(directory, "oncall_drill.vllm_sim", *defaults, *args)


class Metrics:
    """One scrape, parsed."""

    def __init__(self, text: str) -> None:
        self.families = {f.name: f for f in text_string_to_metric_families(text)}
        self.samples: list[Sample] = [s for f in self.families.values() for s in f.samples]

    def matching(self, name: str, **labels: str) -> list[Sample]:
        return [
            s
            for s in self.samples
            if s.name == name and all(s.labels.get(k) == v for k, v in labels.items())
        ]

    def value(self, name: str, **labels: str) -> float:
        """Sum of the samples of name whose labels include labels (0 when none)."""
        return sum(s.value for s in self.matching(name, **labels))

    def buckets(self, name: str, **labels: str) -> list[tuple[float, float]]:
        """(le, cumulative count) of histogram name, summed over the other labels."""
        out: dict[float, float] = {}
        for s in self.matching(f"{name}_bucket", **labels):
            le = float(s.labels["le"])
            out[le] = out.get(le, 0.0) + s.value
        return sorted(out.items())


async def scrape(client: httpx.AsyncClient, url: str) -> Metrics:
    response = await client.get(f"{url}/metrics")
    assert response.status_code == 200, response.text
    return Metrics(response.text)


def bucket_delta(
    after: list[tuple[float, float]], before: list[tuple[float, float]]
) -> list[tuple[float, float]]:
    """Buckets of the observations made between two scrapes."""
    prior = dict(before)
    return [(le, count - prior.get(le, 0.0)) for le, count in after]


def histogram_quantile(q: float, buckets: list[tuple[float, float]]) -> float:
    """Prometheus' histogram_quantile over cumulative buckets (linear within a bucket)."""
    total = buckets[-1][1]
    assert total > 0, "empty histogram"
    rank = q * total
    lower_le, lower_count = 0.0, 0.0
    for le, count in buckets:
        if count >= rank:
            if math.isinf(le):
                return lower_le
            return lower_le + (le - lower_le) * (rank - lower_count) / (count - lower_count)
        lower_le, lower_count = le, count
    return lower_le
