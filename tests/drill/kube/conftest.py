"""Fixtures for the Kubernetes simulator tests: a simulator on a free loopback port (always
stopped), clients of the real kubernetes 37 package for both users, and strict response checks.

The remediation and security tests drive our own clients against the same simulator: they take
`kube_drill` (tests/remediation/conftest.py and tests/security/conftest.py name it `drill`) and
`kube_clients`, from here rather than a copy of their own."""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator, Callable, Generator, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import pytest

from oncall.drill.kube_sim import (
    OPERATOR_CONTEXT,
    READ_ONLY_CONTEXT,
    KubeSim,
    SimulatorThread,
    write_kubeconfig,
)
from oncall.remediation.clients import Clients
from oncall.settings import Settings
from oncall.settings.model import KubernetesSettings

T = TypeVar("T")
DELAY_S = 0.05
NS = "ai"


def wait_until(
    what: str, probe: Callable[[], T | None], timeout: float = 10.0, interval: float = 0.02
) -> T:
    """Poll probe until it returns something truthy (bounded in time and count)."""
    deadline = time.monotonic() + timeout
    last: T | None = None
    for _ in range(int(timeout / interval) + 1):
        last = probe()
        if last:
            return last
        if time.monotonic() > deadline:
            break
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout} s waiting for {what}; last value: {last!r}")


def status_of(exc: Any) -> dict[str, Any]:
    """The metav1.Status body of an ApiException."""
    body: dict[str, Any] = json.loads(exc.body or "{}")
    return body


class StrictCheck:
    """Validates every response body against the client's pydantic model with extra='forbid',
    so a field the model does not know (which from_dict would drop silently) fails the test."""

    def __init__(self) -> None:
        self.problems: list[str] = []
        self.checked = 0

    def check(self, type_name: str, raw: bytes) -> None:
        from kubernetes.client import models

        model = getattr(models, type_name, None)
        if model is None:
            return
        try:
            model.model_validate(json.loads(raw))
            self.checked += 1
        except Exception as exc:
            self.problems.append(f"{type_name}: {exc}")


@pytest.fixture
def strict(monkeypatch: pytest.MonkeyPatch) -> Iterator[StrictCheck]:
    from kubernetes.client import ApiClient

    checker = StrictCheck()
    original = ApiClient.response_deserialize

    def response_deserialize(self: Any, response_data: Any, response_types_map: Any = None) -> Any:
        result = original(self, response_data, response_types_map)
        type_name = (response_types_map or {}).get(str(response_data.status))
        if isinstance(type_name, str) and response_data.data:
            checker.check(type_name, response_data.data)
        return result

    monkeypatch.setattr(ApiClient, "response_deserialize", response_deserialize)
    yield checker
    assert not checker.problems, checker.problems


@dataclass
class Cluster:
    """A running simulator and the clients to talk to it."""

    sim: KubeSim
    server: SimulatorThread
    kubeconfig: Path
    api: Any  # kubernetes.client.ApiClient for the operator
    ro_api: Any  # ... for the read-only user

    def core(self, read_only: bool = False) -> Any:
        from kubernetes import client

        return client.CoreV1Api(self.ro_api if read_only else self.api)

    def apps(self, read_only: bool = False) -> Any:
        from kubernetes import client

        return client.AppsV1Api(self.ro_api if read_only else self.api)

    def coordination(self, read_only: bool = False) -> Any:
        from kubernetes import client

        return client.CoordinationV1Api(self.ro_api if read_only else self.api)

    def call(self, fn: Callable[[], T]) -> T:
        return self.server.call(fn)

    def ready_pods(self, expected: int, label_selector: str = "app=vllm") -> list[Any]:
        """Wait until exactly `expected` pods are Ready and none terminate; the client's view."""
        core = self.core()

        def probe() -> list[Any] | None:
            pods = core.list_namespaced_pod(NS, label_selector=label_selector).items
            ready = [
                p
                for p in pods
                if p.metadata.deletion_timestamp is None
                and any(c.type == "Ready" and c.status == "True" for c in p.status.conditions or [])
            ]
            return ready if len(ready) == expected == len(pods) else None

        return wait_until(f"{expected} ready pods", probe)


def start_cluster(tmp_path: Path, sim: KubeSim) -> Generator[Cluster, None, None]:
    from kubernetes import config

    server = SimulatorThread(sim).start()
    try:
        path = write_kubeconfig(tmp_path / "kubeconfig", server.port, sim.users)
        api = config.new_client_from_config(config_file=str(path), context=OPERATOR_CONTEXT)
        ro_api = config.new_client_from_config(config_file=str(path), context=READ_ONLY_CONTEXT)
        try:
            yield Cluster(sim, server, path, api, ro_api)
        finally:
            api.close()
            ro_api.close()
    finally:
        server.stop()


@pytest.fixture
def cluster(tmp_path: Path, strict: StrictCheck) -> Iterator[Cluster]:
    """The default drill cluster (2 vLLM replicas on one 4-GPU node), delays of 50 ms."""
    yield from start_cluster(tmp_path, KubeSim(start_delay=DELAY_S, resync=0.2))


@pytest.fixture
def kube_drill(tmp_path: Path) -> Iterator[Cluster]:
    """The default drill cluster without the strict response check: for tests of our own
    clients and remediations against it (the client's models are checked above)."""
    yield from start_cluster(tmp_path, KubeSim(start_delay=DELAY_S, resync=0.2))


@asynccontextmanager
async def kube_clients(cluster: Cluster) -> AsyncIterator[Clients]:
    """The remediation clients of settings pointing at `cluster` (namespace `NS`), closed after."""
    kube = KubernetesSettings(kubeconfig=cluster.kubeconfig, namespace=NS)
    made = Clients.from_settings(Settings(kubernetes=kube))
    try:
        yield made
    finally:
        await made.aclose()


#: The JSON Pointer of the vLLM container's args in the drill's Deployment.
ARGS = "/spec/template/spec/containers/0/args"


async def vllm_args(c: Clients) -> list[str]:
    """The vLLM Deployment's container args, as the writer reads them."""
    kube = await c.kube_writer()
    deployment = await kube.get_deployment(NS, "vllm")
    return list(deployment["spec"]["template"]["spec"]["containers"][0]["args"])
