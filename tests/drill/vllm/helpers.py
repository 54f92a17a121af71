"""Helpers for the vLLM simulator tests: process start/stop, polling with deadlines, metrics."""

from __future__ import annotations

import contextlib
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.samples import Sample

from oncall_drill.netutil import free_loopback_port, wait_for_port
from tests.harness.processes import ListeningProcess

REPO_ROOT = Path(__file__).resolve().parents[3]
MODEL = "sim/llama"


SimProcess = ListeningProcess
"""A running simulator process."""


def start_sim(directory: Path, *args: str, wait: bool = True) -> SimProcess:
    """Start `python -m oncall_drill.vllm_sim` on a free port; wait until it listens."""
    port = free_loopback_port()
    log_path = directory / f"vllm_sim_{port}.log"
    argv = [sys.executable, "-m", "oncall_drill.vllm_sim", "--port", str(port), *args]
    if "--model" not in args and not any(a.startswith("vllm") for a in args):
        argv += ["--model", MODEL]
    with log_path.open("wb") as log:
        proc = subprocess.Popen(argv, cwd=REPO_ROOT, stdout=log, stderr=subprocess.STDOUT)
    sim = SimProcess(proc=proc, port=port, log_path=log_path)
    if wait and not wait_for_port(port, timeout=15):
        stop_sim(sim)
        raise AssertionError(f"simulator did not listen on {port}:\n{sim.log()}")
    return sim


def stop_sim(sim: SimProcess) -> None:
    """Terminate the process and wait for it; kill it if it does not stop."""
    if sim.proc.poll() is None:
        sim.proc.terminate()
        try:
            sim.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            sim.proc.kill()
            sim.proc.wait(timeout=5)


@contextlib.contextmanager
def running_sim(directory: Path, *args: str) -> Iterator[SimProcess]:
    """`start_sim` for a `with` block (or a fixture's `yield`): always stopped afterwards."""
    sim = start_sim(directory, *args)
    try:
        yield sim
    finally:
        stop_sim(sim)


@contextlib.contextmanager
def sim_factory(directory: Path, *base_args: str) -> Iterator[Callable[..., SimProcess]]:
    """A factory of simulators started with `base_args` and a test's own arguments; every one
    it started is stopped on the way out (for fixtures: `with sim_factory(...) as f: yield f`)."""
    started: list[SimProcess] = []

    def factory(*args: str) -> SimProcess:
        started.append(start_sim(directory, *base_args, *args))
        return started[-1]

    try:
        yield factory
    finally:
        for sim in started:
            stop_sim(sim)


def families(text: str) -> dict[str, tuple[str, list[Sample]]]:
    """Metric families by name -> (type, samples), via prometheus_client's parser."""
    return {f.name: (f.type, list(f.samples)) for f in text_string_to_metric_families(text)}


def sample_value(text: str, sample_name: str, **labels: str) -> float:
    """The value of the one sample with this name whose labels include `labels`."""
    found = [
        s.value
        for _, samples in families(text).values()
        for s in samples
        if s.name == sample_name and labels.items() <= s.labels.items()
    ]
    assert len(found) == 1, f"{sample_name}{labels}: {len(found)} samples"
    return found[0]


def metrics_text(url: str) -> str:
    """GET /metrics."""
    response = httpx.get(f"{url}/metrics", timeout=5)
    response.raise_for_status()
    return response.text


def completion_body(
    max_tokens: int, prompt: str = "hello world", **extra: object
) -> dict[str, object]:
    """A /v1/completions body that generates exactly `max_tokens` tokens."""
    return {"model": MODEL, "prompt": prompt, "max_tokens": max_tokens, "ignore_eos": True, **extra}
