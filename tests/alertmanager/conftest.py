"""Alerts and silences put into the session's real Alertmanager through its API v2.

Each test labels its alerts with a `test` label of its own, so the tests sharing the one
Alertmanager see only their alerts; the silences they make are expired afterwards.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import pytest

from tests.harness.servers import RunningServer

PostAlerts = Callable[[list[dict[str, str]]], None]
Silence = Callable[..., str]


def rfc3339(seconds: float) -> str:
    return datetime.fromtimestamp(seconds, UTC).isoformat().replace("+00:00", "Z")


@pytest.fixture
def test_label() -> str:
    """A label value unique to this test (its alerts carry `test=<it>`)."""
    return uuid.uuid4().hex[:12]


@pytest.fixture
def post_alerts(alertmanager_srv: RunningServer, test_label: str) -> PostAlerts:
    """post_alerts([labels, ...]): those alerts fire in Alertmanager (for 10 minutes), each
    with this test's `test` label, as Prometheus sends them (POST /api/v2/alerts)."""

    def post(label_sets: list[dict[str, str]]) -> None:
        now = time.time()
        body = [
            {"labels": {**labels, "test": test_label},
             "annotations": {"summary": f"{labels.get('alertname')} fires"},
             "startsAt": rfc3339(now - 60), "endsAt": rfc3339(now + 600),
             "generatorURL": "http://127.0.0.1:9090/graph"}
            for labels in label_sets
        ]  # fmt: skip
        response = httpx.post(f"{alertmanager_srv.url}/api/v2/alerts", json=body, timeout=5)
        response.raise_for_status()

    return post


@pytest.fixture
def silence(alertmanager_srv: RunningServer, test_label: str) -> Iterator[Silence]:
    """silence({name: value}, created_by=, comment=, hours=) → id: a silence on those labels
    and this test's `test` label; expired after the test."""
    made: list[str] = []

    def create(
        labels: dict[str, str], *, created_by: str = "alice", comment: str = "", hours: float = 2
    ) -> str:
        now = time.time()
        matchers: list[dict[str, Any]] = [
            {"name": k, "value": v, "isRegex": False, "isEqual": True}
            for k, v in {**labels, "test": test_label}.items()
        ]
        body = {"matchers": matchers, "startsAt": rfc3339(now),
                "endsAt": rfc3339(now + timedelta(hours=hours).total_seconds()),
                "createdBy": created_by, "comment": comment}  # fmt: skip
        response = httpx.post(f"{alertmanager_srv.url}/api/v2/silences", json=body, timeout=5)
        response.raise_for_status()
        made.append(str(response.json()["silenceID"]))
        return made[-1]

    yield create
    for silence_id in made:
        httpx.delete(f"{alertmanager_srv.url}/api/v2/silence/{silence_id}", timeout=5)
