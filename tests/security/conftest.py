"""Fixtures of these tests: `drill`, the drill's Kubernetes API (tests/drill/kube/conftest.py)."""

from tests.drill.kube.conftest import kube_drill as drill

__all__ = ["drill"]
