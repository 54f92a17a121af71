"""Fixtures for the Kubernetes simulator tests: a simulator on a free loopback port (always
stopped), clients of the real kubernetes 37 package for both users, and strict response checks.

The remediation and security tests drive our own clients against the same simulator: they take
`kube_drill` (tests/remediation/conftest.py and tests/security/conftest.py name it `drill`) and
`kube_clients`, from here rather than a copy of their own."""

from __future__ import annotations

import asyncio
import json
import ssl
import threading
from collections.abc import AsyncIterator, Callable, Generator, Iterable, Iterator, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import pytest

from oncall.remediation.clients import Clients
from oncall.settings import Settings
from oncall.settings.model import KubernetesSettings
from oncall_drill.kube_sim import (
    OPERATOR_CONTEXT,
    READ_ONLY_CONTEXT,
    KubeSim,
    SimulatorThread,
    write_kubeconfig,
)
from oncall_drill.kube_sim.runner import serve
from oncall_drill.netutil import free_loopback_port
from tests.harness.waiting import wait_until

T = TypeVar("T")
DELAY_S = 0.05
NS = "ai"


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

        return wait_until(probe, within=10, what=f"{expected} ready pods")


class PrintingHook:
    """A pod hook whose every started container instance 'prints' `output(containerStatus)`:
    kept per containerID, as the kubelet keeps each instance's log (`ContainerLogs`)."""

    def __init__(self, output: Callable[[Mapping[str, Any]], bytes]) -> None:
        self._output = output
        self.logs: dict[str, bytes] = {}

    async def started(self, pod: Mapping[str, Any]) -> Mapping[str, str] | None:
        status = pod["status"]["containerStatuses"][0]
        self.logs[status["containerID"]] = self._output(status)
        return None

    async def stopped(self, pod: Mapping[str, Any]) -> None:
        return None

    def container_log(self, container_id: str) -> bytes | None:
        return self.logs.get(container_id)


class TlsSimulator:
    """A simulator on a plain and a TLS port, served from a thread with its own loop."""

    def __init__(self, context: ssl.SSLContext, routes: Iterable[Any] = ()) -> None:
        self.port, self.tls_port = free_loopback_port(), free_loopback_port()
        self.sim = KubeSim(start_delay=DELAY_S, resync=0.2)
        self._context, self._routes = context, list(routes)
        self._ready = threading.Event()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop: asyncio.Event | None = None
        self._thread = threading.Thread(target=lambda: asyncio.run(self._serve()), daemon=True)

    async def _serve(self) -> None:
        self._loop, self._stop = asyncio.get_running_loop(), asyncio.Event()
        runner = await serve(
            self.sim, self.port, tls=(self.tls_port, self._context), routes=self._routes
        )
        self._ready.set()
        try:
            await self._stop.wait()
        finally:
            await runner.cleanup()

    def __enter__(self) -> TlsSimulator:
        self._thread.start()
        assert self._ready.wait(10), "the simulator did not start within 10 s"
        return self

    def __exit__(self, *_exc: object) -> None:
        if self._loop is not None and self._stop is not None:
            self._loop.call_soon_threadsafe(self._stop.set)
        self._thread.join(15)
        assert not self._thread.is_alive(), "the simulator did not stop within 15 s"


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


# -- the drill's HTTPS API for oncall's own client (tests/drill/kube/test_kube_client_*.py) ------

#: Namespaces whose pod list the HTTPS simulator answers with a canned reply instead of the API:
#: what an apiserver (or a proxy in front of it) sends that the simulator never would.
CANNED = "canned-"
TOO_MANY = "Cannot evict pod as it would violate the pod's disruption budget."
BUDGET_CAUSE = "The disruption budget vllm needs 1 healthy pods and has 1 currently"


def _canned_routes(seen: list[dict[str, str]]) -> list[Any]:
    """aiohttp routes for /api/v1/namespaces/canned-*/pods (shapes: metav1.Status, as the
    apiserver writes it in staging/src/k8s.io/apimachinery/pkg/api/errors/errors.go)."""
    from aiohttp import web

    def status(code: int, reason: str, message: str, **extra: Any) -> Any:
        body = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                "message": message, "reason": reason, "code": code, **extra}  # fmt: skip
        return web.json_response(body, status=code)

    def page(names: list[str], token: str = "") -> Any:
        items = [{"metadata": {"name": n, "namespace": "x"}} for n in names]
        meta = {"resourceVersion": "1", **({"continue": token} if token else {})}
        return web.json_response({"kind": "PodList", "apiVersion": "v1", "metadata": meta,
                                  "items": items})  # fmt: skip

    async def pods(request: web.Request) -> Any:
        kind = request.match_info["ns"]
        query = dict(request.query)
        seen.append({"ns": kind, **query})
        token = query.get("continue")
        if kind == "500":
            return status(500, "InternalError", "Internal error occurred: etcd timeout")
        if kind == "html":
            return web.Response(text="<html><body>Sign in</body></html>", content_type="text/html")
        if kind == "html-502":
            return web.Response(
                status=502, text="<html>Bad Gateway</html>", content_type="text/html"
            )
        if kind == "429":
            cause = {"reason": "DisruptionBudget", "message": BUDGET_CAUSE}
            causes = {"causes": [cause]}
            return status(429, "TooManyRequests", TOO_MANY, details=causes)
        if kind == "endless":  # a server whose continue tokens never end
            return page([f"p{len(seen)}"], token=f"t{len(seen)}")
        if kind == "expiring":  # the first continue token has expired: 410 Gone, reason Expired
            if token == "t1":
                return status(410, "Expired", "The provided continue parameter is too old")
            first = sum(1 for s in seen if s["ns"] == "expiring" and not s.get("continue"))
            return page(["a"], token="t1") if first == 1 else page(["a", "b"])
        return status(404, "NotFound", f'namespaces "{kind}" not found')

    async def eviction(request: web.Request) -> Any:
        seen.append({"ns": request.match_info["ns"], "eviction": request.match_info["name"]})
        return await pods(request)

    base = "/api/v1/namespaces/" + CANNED + "{ns}/pods"
    return [web.get(base, pods), web.post(base + "/{name}/eviction", eviction)]


@dataclass
class Https:
    """The drill's simulator over TLS with the drill's certificate; kubeconfigs for it."""

    sim: TlsSimulator
    ca: Path  # the certificate chain, as `oncall drill up` names it in the kubeconfig
    key: Path  # its private key
    seen: list[dict[str, str]]  # the canned routes' requests

    def config(self, **user: Any) -> dict[str, Any]:
        """The drill's kubeconfig document for the operator, its user replaced by `user`."""
        from oncall_drill.kube_sim import kubeconfig

        doc = kubeconfig(self.sim.tls_port, self.sim.sim.users, ca_file=self.ca)
        if user:
            doc["users"][0]["user"] = user
        return doc

    @property
    def token(self) -> str:
        return self.sim.sim.users.operator.token


def write_config(path: Path, doc: dict[str, Any]) -> Path:
    import yaml

    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(doc), encoding="utf-8")
    return path


@pytest.fixture(scope="session")
def https(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Https]:
    """One HTTPS simulator for the client tests (they only read, or write what they undo)."""
    from oncall_drill.kube_sim.tls import make_certificate, server_context

    made = make_certificate(tmp_path_factory.mktemp("tls"))
    assert made is not None
    seen: list[dict[str, str]] = []
    with TlsSimulator(server_context(*made), _canned_routes(seen)) as running:
        yield Https(running, made[0], made[1], seen)
