"""A running drill stack for the tests of this folder: `oncall drill up`, always `down`."""

from __future__ import annotations

import json
import math
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.cli_runner import run_oncall


@dataclass
class Drill:
    directory: Path
    up_returned_at: float
    targets_up_after: float = math.nan
    jobs_up: frozenset[str] = frozenset()

    @property
    def state(self) -> dict[str, Any]:
        loaded: dict[str, Any] = json.loads((self.directory / "state.json").read_text())
        return loaded

    @property
    def prometheus(self) -> str:
        return str(self.state["urls"]["prometheus"])

    def cli(self, *args: str) -> str:
        result = run_oncall("drill", *args, "--dir", str(self.directory), timeout=60)
        assert result.code == 0, result.stderr
        return result.stdout


def targets(prometheus: str) -> list[dict[str, Any]]:
    url = f"{prometheus}/api/v1/targets?state=active"
    with urllib.request.urlopen(url, timeout=2) as response:  # noqa: S310 - loopback
        found: list[dict[str, Any]] = json.load(response)["data"]["activeTargets"]
        return found


DRILL_TEST_TIMEOUT = 300


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Every test of this folder shares one drill: under xdist they all go to one worker.

    And each gets 300 s rather than the suite's 120 s unless it names its own: a test here waits
    on a chain of real processes (scrapes, rule `for`, Alertmanager's waits, rollouts) that took
    up to 71 s on an idle 2-core machine and twice that with the rest of the suite beside it.
    """
    here = Path(__file__).parent
    for item in items:
        if here in Path(str(item.fspath)).parents:
            item.add_marker(pytest.mark.xdist_group("drill"))
            if item.get_closest_marker("timeout") is None:
                item.add_marker(pytest.mark.timeout(DRILL_TEST_TIMEOUT))


FOR_SCALE = 0.05
JOBS = {"prometheus", "ai-gateway", "dcgm-exporter", "redis", "kube-state-metrics", "vllm"}


def start_drill(directory: Path, *extra: str) -> Drill:
    """`oncall drill up`, then how long until Prometheus has scraped every target (`up == 1`)."""
    result = run_oncall("drill", "up", "--dir", str(directory), *extra, timeout=90)
    returned = time.monotonic()
    if result.code != 0:
        run_oncall("drill", "down", "--dir", str(directory), timeout=60)
        pytest.fail(f"drill up failed:\n{result.stderr}", pytrace=False)
    drill = Drill(directory, returned)
    deadline = returned + 30
    while time.monotonic() < deadline:  # bounded poll: scrapes happen once a second
        found = targets(drill.prometheus)
        if {t["labels"]["job"] for t in found} >= JOBS and all(t["health"] == "up" for t in found):
            drill.targets_up_after = time.monotonic() - returned
            drill.jobs_up = frozenset(t["labels"]["job"] for t in found)
            break
        time.sleep(0.1)
    return drill


@pytest.fixture(scope="package")
def drill(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Drill]:
    directory = tmp_path_factory.mktemp("drill")
    # The alert packs of ./alerts are deployed with `for` x 0.05 (2m -> 6s) so they fire fast.
    running = start_drill(directory, "--for-scale", str(FOR_SCALE))
    try:
        yield running
    finally:
        run_oncall("drill", "down", "--dir", str(directory), timeout=60)


@pytest.fixture
def light(drill: Drill) -> None:
    """The drill with no replica saturated, for a test that takes an action: an earlier test's
    `kv-cache-pressure` would make the capacity guard refuse it (`wait_light`)."""
    # Imported here: the helpers import Drill from this module.
    from tests.drill.stack.remediation_helpers import wait_light

    wait_light(drill)
