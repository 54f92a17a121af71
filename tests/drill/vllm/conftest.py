"""Fixtures for the vLLM simulator tests: real processes on free loopback ports."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.drill.vllm.helpers import SimProcess, start_sim, stop_sim

Starter = Callable[..., SimProcess]


@pytest.fixture
def sim_factory(tmp_path: Path) -> Iterator[Starter]:
    """Start simulator processes (`factory(*args, wait=True)`); all are stopped afterwards."""
    started: list[SimProcess] = []

    def factory(*args: str, wait: bool = True) -> SimProcess:
        sim = start_sim(tmp_path, *args, wait=wait)
        started.append(sim)
        return sim

    try:
        yield factory
    finally:
        for sim in started:
            stop_sim(sim)


@pytest.fixture(scope="module")
def shared_sim(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SimProcess]:
    """One healthy server for tests that do not change its state (faults do not go here)."""
    sim = start_sim(
        tmp_path_factory.mktemp("shared_sim"),
        "--model",
        "sim/llama",
        "--max-num-seqs",
        "8",
        "--kv-capacity-tokens",
        "8192",
        "--speed",
        "10",
    )
    try:
        yield sim
    finally:
        stop_sim(sim)
