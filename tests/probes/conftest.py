"""Fixtures of the probe tests."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.probes.kube_cluster import Cluster, printing_cluster


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[Cluster]:
    """The drill's Kubernetes simulator with its 2 vLLM pods Ready, every container printing a
    healthy start (a test makes one print a recorded log and die: `died_after`). The modules
    that need another cluster (test_kube_logs.py, test_kube_probes.py) define their own."""
    with printing_cluster(tmp_path) as running:
        yield running
