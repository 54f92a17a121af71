"""Fixtures for the whole suite: real Redis, Prometheus and Alertmanager servers, and a leak
check.

`redis_srv`, `prometheus_srv` and `alertmanager_srv` are started once per session (they take a
second each); tests that need their own configuration use `start_prometheus` / `start_redis`.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.harness.processes import STARTED_PIDS, pid_alive
from tests.harness.servers import (
    RunningServer,
    alertmanager_server,
    prometheus_server,
    redis_server,
)


@pytest.fixture(scope="session")
def redis_srv(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningServer]:
    with redis_server(tmp_path_factory.mktemp("redis")) as server:
        yield server


@pytest.fixture(scope="session")
def prometheus_srv(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningServer]:
    with prometheus_server(tmp_path_factory.mktemp("prometheus")) as server:
        yield server


@pytest.fixture(scope="session")
def alertmanager_srv(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningServer]:
    """One real Alertmanager for the session; tests post their own alerts with unique labels
    (and expire the silences they make) so that they do not see each other's."""
    with alertmanager_server(tmp_path_factory.mktemp("alertmanager")) as server:
        yield server


@pytest.fixture
def start_prometheus(tmp_path: Path) -> Iterator[Callable[..., RunningServer]]:
    """Factory: start_prometheus(scrape_configs=[...], rule_files=[...]) → a running server."""
    with contextlib.ExitStack() as stack:
        count = 0

        def start(**kwargs: Any) -> RunningServer:
            nonlocal count
            count += 1
            return stack.enter_context(prometheus_server(tmp_path / f"prom{count}", **kwargs))

        yield start


@pytest.fixture
def start_redis(tmp_path: Path) -> Iterator[Callable[..., RunningServer]]:
    """Factory: start_redis(*extra_redis_args) → a running redis-server of the test's own."""
    with contextlib.ExitStack() as stack:
        count = 0

        def start(*args: str) -> RunningServer:
            nonlocal count
            count += 1
            return stack.enter_context(redis_server(tmp_path / f"redis{count}", *args))

        yield start


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """Fail the run if any server the harness started is still alive at the end."""
    leaked = sorted(pid for pid in STARTED_PIDS if pid_alive(pid))
    if leaked:
        print(f"\nharness: server processes left running: {leaked}")
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
