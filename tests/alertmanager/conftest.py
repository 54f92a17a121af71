"""Alerts and silences put into the session's real Alertmanager through its API v2.

Each test labels its alerts with a `test` label of its own, so the tests sharing the one
Alertmanager see only their alerts; the silences they make are expired afterwards.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import pytest
import yaml

from tests.harness.servers import RunningServer, prometheus_server
from tests.harness.waiting import wait_until

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


def _two(value: float, first: dict[str, str], second: dict[str, str]) -> str:
    """An expression of two series: `value` labelled with `first`, and with `second`."""

    def one(labels: dict[str, str]) -> str:
        expr = f"vector({value:g})"
        for name, text in labels.items():
            expr = f'label_replace({expr}, "{name}", "{text}", "", "")'
        return expr

    return f"{one(first)} or {one(second)}"


def rules(label: str) -> dict[str, Any]:
    """Two firing rules of two instances each, and a quiet one, all labelled `test=label`."""
    oom = _two(
        1, {"pod": "vllm-a", "severity": "critical"}, {"pod": "vllm-b", "severity": "warning"}
    )
    p99 = _two(2.5, {"model": "qwen"}, {"model": "llama"})
    summary = "vLLM container OOM-killed in ai/{{ $labels.pod }}"
    return {"groups": [{"name": "amtest", "rules": [
        {"alert": "AmVllmOOMKilled", "expr": oom, "labels": {"namespace": "ai", "test": label},
         "annotations": {"summary": summary}},
        {"alert": "AmP99High", "expr": p99,
         "labels": {"severity": "page", "namespace": "ai", "test": label}},
        {"alert": "AmQuiet", "expr": "vector(0) > 1",
         "labels": {"severity": "page", "test": label}},
    ]}]}  # fmt: skip


#: What `rules` make Alertmanager hold: two alerts of each firing rule.
HELD = 4


@dataclass(frozen=True)
class Routed:
    """A Prometheus evaluating `rules` (label `test=<label>`) and sending to the session's
    Alertmanager: two instances of AmVllmOOMKilled (critical vllm-a inhibits warning vllm-b)
    and two of AmP99High (model qwen and llama); AmQuiet stays inactive."""

    prometheus: RunningServer
    alertmanager: RunningServer
    label: str

    def held(self) -> list[dict[str, Any]]:
        response = httpx.get(
            f"{self.alertmanager.url}/api/v2/alerts",
            params={"filter": f'test="{self.label}"'}, timeout=5,
        )  # fmt: skip
        response.raise_for_status()
        alerts: list[dict[str, Any]] = response.json()
        return alerts


@pytest.fixture(scope="module")
def routed(
    tmp_path_factory: pytest.TempPathFactory, alertmanager_srv: RunningServer
) -> Iterator[Routed]:
    """One Prometheus per module (the session's has no rules and sends nowhere), whose alerts
    the session's Alertmanager holds before the first test."""
    label = uuid.uuid4().hex[:12]
    directory = tmp_path_factory.mktemp("routed")
    rule_file = directory / "rules.yaml"
    rule_file.write_text(yaml.safe_dump(rules(label)))
    with prometheus_server(
        directory, rule_files=[rule_file], alertmanager_port=alertmanager_srv.port
    ) as prom:
        found = Routed(prom, alertmanager_srv, label)
        wait_until(
            lambda: len(found.held()) == HELD, within=30, what="Prometheus' alerts in Alertmanager"
        )
        yield found
