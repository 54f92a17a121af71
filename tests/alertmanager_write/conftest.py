"""Fixtures of the silence and acknowledgement tests: the session's real Alertmanager and
Redis, the drill's Kubernetes API (the operator's identity from SelfSubjectReview, and the
Leases every action holds), and an `oncall.yaml` naming them.

Each test posts its own alerts to the shared Alertmanager with a label `case` of its own, so it
sees only them; a silence it makes matches on that label too.
"""

from __future__ import annotations

import contextlib
import json
import secrets
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from oncall_drill.kube_sim import KubeSim
from tests.drill.kube.conftest import NS, Cluster, start_cluster
from tests.harness.faults import kubeconfig_for, refused_port, silent_listener
from tests.harness.servers import RunningServer

#: The user the drill's kubeconfig authenticates as (SelfSubjectReview), i.e. `createdBy`.
OPERATOR = "oncall-operator"


@dataclass
class World:
    """One test's view: its `case` label, the config file, the audit log, the servers."""

    case: str
    config: Path
    audit: Path
    am: str
    redis: str
    #: None: no Kubernetes API answers (`kubeless`).
    cluster: Cluster | None

    def post_alerts(self, *labels: dict[str, str]) -> None:
        """Send alerts to Alertmanager as Prometheus does (POST /api/v2/alerts)."""
        body = [{"labels": {"case": self.case, **one}, "annotations": {"summary": "s"}}
                for one in labels]  # fmt: skip
        response = httpx.post(f"{self.am}/api/v2/alerts", json=body, timeout=5, trust_env=False)
        response.raise_for_status()

    def silences(self) -> list[dict[str, Any]]:
        """This test's silences as Alertmanager lists them."""
        found = httpx.get(f"{self.am}/api/v2/silences", timeout=5, trust_env=False).json()
        return [s for s in found if any(m["value"] == self.case for m in s["matchers"])]

    def records(self) -> list[dict[str, Any]]:
        if not self.audit.exists():
            return []
        return [json.loads(line) for line in self.audit.read_text().splitlines()]

    def args(self, *argv: str) -> list[str]:
        return ["--config", str(self.config), *argv]


@pytest.fixture
def world(
    tmp_path: Path, alertmanager_srv: RunningServer, redis_srv: RunningServer
) -> Iterator[World]:
    for cluster in start_cluster(tmp_path, KubeSim(start_delay=0.05, resync=0.2)):
        kube = {"kubeconfig": str(cluster.kubeconfig), "namespace": NS}
        made = _world(tmp_path, alertmanager_srv, redis_srv, kube, cluster)
        yield made
        _expire_all(made)


def _world(
    tmp_path: Path,
    alertmanager_srv: RunningServer,
    redis_srv: RunningServer,
    kube: dict[str, Any],
    cluster: Cluster | None,
) -> World:
    case = f"c{secrets.token_hex(4)}"
    config = tmp_path / "oncall.yaml"
    audit = tmp_path / "audit.jsonl"
    config.write_text(yaml.safe_dump({
        "kubernetes": kube,
        "redis": {"url": redis_srv.url},
        "alertmanager": {"url": alertmanager_srv.url},
        "audit": {"path": str(audit), "kube_events": False},
    }))  # fmt: skip
    return World(case, config, audit, alertmanager_srv.url, redis_srv.url, cluster)


def _expire_all(made: World) -> None:
    for silence in made.silences():  # the session's Alertmanager is shared: leave none
        if silence["status"]["state"] != "expired":
            httpx.delete(f"{made.am}/api/v2/silence/{silence['id']}", trust_env=False)


@pytest.fixture(params=["no-kubeconfig", "api-refuses", "api-silent"])
def kubeless(
    request: pytest.FixtureRequest,
    tmp_path: Path,
    alertmanager_srv: RunningServer,
    redis_srv: RunningServer,
) -> Iterator[World]:
    """A world in which no Kubernetes API answers: no kubeconfig at all, an API server that
    refuses connections, or one that accepts and never answers (the 1 s timeout)."""
    with contextlib.ExitStack() as stack:
        kube: dict[str, Any] = {"kubeconfig": str(tmp_path / "no-such-kubeconfig"), "timeout": 1}
        if request.param == "api-refuses":
            server = f"https://127.0.0.1:{refused_port()}"
            kube["kubeconfig"] = str(kubeconfig_for(tmp_path / "kubeconfig", server))
        elif request.param == "api-silent":
            port = stack.enter_context(silent_listener())
            server = f"https://127.0.0.1:{port}"
            kube["kubeconfig"] = str(kubeconfig_for(tmp_path / "kubeconfig", server))
        made = _world(tmp_path, alertmanager_srv, redis_srv, kube, None)
        yield made
        _expire_all(made)


# The module-scoped Prometheus sending its rules' alerts to the session's Alertmanager
# (tests/alertmanager/conftest.py): the board's silence test runs over it.
from tests.alertmanager.conftest import routed  # noqa: E402, F401
