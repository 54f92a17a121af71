"""Fixtures of these tests: `drill`, the drill's Kubernetes API (tests/drill/kube/conftest.py),
and `redis_url`, a redis-server of the test's own (the guards' and the degradation key's state
must not leak from one test into the next)."""

from collections.abc import Callable

import pytest

from tests.drill.kube.conftest import kube_drill as drill
from tests.harness.servers import RunningServer

__all__ = ["drill", "redis_url"]


@pytest.fixture
def redis_url(start_redis: Callable[..., RunningServer]) -> str:
    return start_redis().url
