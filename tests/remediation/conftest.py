"""Fixtures of the remediation tests: `drill`, the drill's Kubernetes API
(tests/drill/kube/conftest.py), and `note`, the test-only action registered for one test."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from oncall.remediation import registry
from tests.drill.kube.conftest import kube_drill as drill
from tests.remediation.note_action import NoteStore, SetNote

__all__ = ["drill", "note"]


@pytest.fixture
def note() -> Iterator[SetNote]:
    """`set-note`, a remediation defined in tests/: its module, and its one registry line."""
    action = SetNote(NoteStore({"main": "all quiet"}))
    unregister = registry.register(action)
    yield action
    unregister()
