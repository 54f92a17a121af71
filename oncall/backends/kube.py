"""Kubernetes, read-only: pods, events, deployments and nodes as the API server's JSON.

kubectl equivalents: `kubectl get pods -l SEL -o json`, `kubectl get pod NAME -o json`,
`kubectl get events --field-selector involvedObject.kind=K,involvedObject.name=N -o json`,
`kubectl get deployment NAME -o json`, `kubectl get nodes -l SEL -o json`, `kubectl logs
NAME -c C --previous --tail=N` (text, not JSON). Nothing here
changes the cluster; writes live in a separate module that only remediation imports.

The official client (`kubernetes` ≥ 37) is synchronous and takes ~2 s to import (backends.md
§2.1), so it is imported on first use, in a worker thread, never at module import. Every call
runs in a thread (`asyncio.to_thread`) with `_request_timeout` set and urllib3 retries off: a
hung API server releases the thread after `timeout` seconds (a CLI run exits promptly instead
of waiting on a blocked thread at shutdown), and the await is also bounded by
`asyncio.timeout` in case a server trickles its answer.

Answers are plain dicts, the server's own camelCase JSON: calls pass `_preload_content=False`
and the body goes through `json.loads`. Measured against the drill simulator with 50 pods
(109 kB): decoding took 1.7 ms with `json.loads` and 44 ms through the pydantic models and
`ApiClient.sanitize_for_serialization` (a whole list call: ~20 ms against ~75 ms); the models
add nothing a probe reads.

Failures are `BackendError("kubernetes", target, reason)` with reason "refused", "timeout",
"unreachable", "disconnected", "tls", "config", "bad payload", "not found" (a Status
NotFound) or "http <code>" (a 403 carries the server's message naming the verb and resource).
The target reads "CONTEXT (https://SERVER)".

`rollout_status_of` (`kubectl rollout status`'s rule) and `pod_ready` are pure readings of that
JSON; the writer (`oncall.backends.kube_write`) waits on them.
"""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Self

from oncall.errors import BackendError
from oncall.settings.model import KubernetesSettings

BACKEND = "kubernetes"
Obj = dict[str, Any]
#: Slack for the thread's own timeout to fire first and report the precise cause.
AWAIT_GRACE_S = 0.25
#: Kinds whose objects are cluster-scoped: their events are found in any namespace.
CLUSTER_SCOPED_KINDS = frozenset({"Node", "Namespace", "PersistentVolume", "StorageClass"})


def _kubeconfig_path(settings: KubernetesSettings) -> str:
    """The kubeconfig as kubectl picks it: the setting, else $KUBECONFIG, else ~/.kube/config."""
    if settings.kubeconfig is not None:
        return str(settings.kubeconfig.expanduser())
    # Read now, not at the client's import (it freezes KUBECONFIG then, backends.md §2.1).
    return os.environ.get("KUBECONFIG") or str(Path("~/.kube/config").expanduser())


def _in_cluster(path: str) -> bool:
    """No kubeconfig file but a service account: use it, as kubectl does inside a pod."""
    files = [p for p in path.split(os.pathsep) if p]
    exists = any(Path(p).expanduser().is_file() for p in files)
    return not exists and bool(os.environ.get("KUBERNETES_SERVICE_HOST"))


def _status_message(body: str | None) -> tuple[str | None, str]:
    """(reason, message) of a metav1.Status body; the raw text when it is not one."""
    try:
        status = json.loads(body or "")
    except ValueError:
        return None, (body or "").strip()[:200]
    if not isinstance(status, dict):
        return None, str(status)[:200]
    return status.get("reason"), str(status.get("message") or "")


@dataclass(frozen=True)
class RolloutStatus:
    """Where a Deployment's rollout stands, by the rule of `kubectl rollout status`."""

    done: bool
    message: str
    failed: bool = False  # Progressing=False with ProgressDeadlineExceeded: it will not finish
    generation: int = 0
    observed_generation: int = 0
    replicas: int = 0  # wanted (spec)
    updated: int = 0
    available: int = 0
    total: int = 0  # status.replicas: old and new pods that still run


def rollout_status_of(deployment: Obj) -> RolloutStatus:
    """Port of kubectl's DeploymentStatusViewer (pkg/polymorphichelpers/rollout_status.go)."""
    meta, spec = deployment.get("metadata") or {}, deployment.get("spec") or {}
    status = deployment.get("status") or {}
    name = meta.get("name", "?")
    want, total = int(spec.get("replicas", 1)), int(status.get("replicas") or 0)
    updated, available = (int(status.get(k) or 0) for k in ("updatedReplicas", "availableReplicas"))
    generation, observed = (
        int(meta.get("generation") or 0),
        int(status.get("observedGeneration") or 0),
    )

    def result(done: bool, message: str, failed: bool = False) -> RolloutStatus:
        counts = (generation, observed, want, updated, available, total)
        return RolloutStatus(done, message, failed, *counts)

    if generation > observed:
        return result(False, "Waiting for deployment spec update to be observed")
    for cond in status.get("conditions") or []:
        if cond.get("type") == "Progressing" and cond.get("reason") == "ProgressDeadlineExceeded":
            return result(False, f'deployment "{name}" exceeded its progress deadline', True)
    if updated < want:
        return result(False, f"{updated} out of {want} new replicas have been updated")
    if total > updated:
        return result(False, f"{total - updated} old replicas are pending termination")
    if available < updated:
        return result(False, f"{available} of {updated} updated replicas are available")
    return result(True, f'deployment "{name}" successfully rolled out')


def pod_ready(pod: Obj) -> bool:
    """Ready condition True and not terminating."""
    if (pod.get("metadata") or {}).get("deletionTimestamp"):
        return False
    conditions = (pod.get("status") or {}).get("conditions") or []
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)


class KubeReader:
    """One ApiClient for one cluster context; every method is a bounded, read-only GET."""

    def __init__(self, api_client: Any, *, timeout: float, target: str) -> None:
        from kubernetes import client  # already imported by `open`; cheap here

        self.timeout = float(timeout)
        self.target = target
        self._api = api_client
        self._core = client.CoreV1Api(api_client)
        self._apps = client.AppsV1Api(api_client)
        self._custom = client.CustomObjectsApi(api_client)

    @staticmethod
    def import_client() -> None:
        """Import the kubernetes client now (blocking, ~2 s): for callers that warm up early."""
        import kubernetes.client
        import kubernetes.config  # noqa: F401

    @classmethod
    async def open(cls, settings: KubernetesSettings) -> Self:
        """Load the kubeconfig (or in-cluster config) off the event loop and make a reader."""
        return await asyncio.to_thread(cls._open_blocking, settings)

    @classmethod
    def _open_blocking(cls, settings: KubernetesSettings) -> Self:
        # The import is deferred to here (~2 s with the API classes, backends.md §2.1).
        from kubernetes import client
        from kubernetes import config as untyped_config

        config: Any = untyped_config  # its loaders have no annotations

        path = _kubeconfig_path(settings)
        configuration = client.Configuration()
        where = settings.context or path
        try:
            if _in_cluster(path):
                config.load_incluster_config(client_configuration=configuration)
                context = "in-cluster"
            else:
                config.load_kube_config(
                    config_file=path,
                    context=settings.context,
                    client_configuration=configuration,
                    persist_config=False,
                )
                context = settings.context or config.list_kube_config_contexts(path)[1]["name"]
        # Loading reads YAML and files, decodes certificates and may run exec plugins: whatever
        # fails there, the answer is the same to the operator (fix the kubeconfig).
        except Exception as exc:
            raise BackendError(BACKEND, where, "config", f"{type(exc).__name__}: {exc}") from exc
        # No retries: a GET on a hung server would otherwise take 4 × timeout (urllib3 retries
        # reads of idempotent requests), and errors arrive as themselves, not MaxRetryError.
        configuration.retries = False
        api_client = client.ApiClient(configuration=configuration)
        return cls(api_client, timeout=settings.timeout, target=f"{context} ({configuration.host})")

    def close(self) -> None:
        """Close the connection pool."""
        self._api.close()

    async def aclose(self) -> None:
        self.close()

    def _error(self, reason: str, detail: str = "") -> BackendError:
        return BackendError(BACKEND, self.target, reason, detail)

    async def _fetch(
        self, decode: Callable[[bytes], Any], request: Callable[..., Any], *args: Any, **query: Any
    ) -> Any:
        """One API request in a worker thread; `decode` of its body."""

        def work() -> Any:
            try:
                response = request(
                    *args, _preload_content=False, _request_timeout=self.timeout, **query
                )
                try:
                    body = response.data
                finally:
                    response.release_conn()
                return decode(body)
            except Exception as exc:
                error = self._translate(exc)
                if error is exc:
                    raise
                raise error from exc

        try:
            async with asyncio.timeout(self.timeout + AWAIT_GRACE_S):
                return await asyncio.to_thread(work)
        except TimeoutError as exc:  # asyncio's; the thread ends at its own timeout
            raise self._error("timeout", f"no answer within {self.timeout:g}s") from exc

    async def _call(self, request: Callable[..., Any], *args: Any, **query: Any) -> Obj:
        """One API request in a worker thread; the decoded JSON body."""
        decoded = await self._fetch(json.loads, request, *args, **query)
        if not isinstance(decoded, dict):
            raise self._error("bad payload", f"expected an object, got {type(decoded).__name__}")
        return decoded

    def _translate(self, exc: Exception) -> Exception:
        """The BackendError for what the client raised; anything unexpected stays as it is."""
        import urllib3.exceptions as u3
        from kubernetes.client.exceptions import ApiException

        if isinstance(exc, BackendError):
            return exc
        if isinstance(exc, ApiException):
            if not exc.status:  # the client wraps TLS failures as status 0
                return self._error("tls", str(exc.reason or "").strip())
            reason, message = _status_message(exc.body)
            if exc.status == 404 and reason == "NotFound":
                return self._error("not found", message)
            return self._error(f"http {exc.status}", message or str(exc.reason or ""))
        if isinstance(exc, u3.NewConnectionError):  # before timeouts: it subclasses one
            text = str(exc)
            if "refused" in text.lower():
                return self._error("refused", text)
            return self._error("unreachable", text)
        if isinstance(exc, u3.TimeoutError | TimeoutError):
            return self._error("timeout", f"no answer within {self.timeout:g}s")
        if isinstance(exc, u3.SSLError):
            return self._error("tls", str(exc))
        if isinstance(exc, u3.ProtocolError | ConnectionError):
            return self._error("disconnected", str(exc))
        if isinstance(exc, json.JSONDecodeError | UnicodeDecodeError | u3.HTTPError):
            return self._error("bad payload", f"{type(exc).__name__}: {exc}")
        return exc  # a bug of ours (say, a parameter the client rejects): not the server's fault

    async def _list(self, request: Callable[..., Any], *args: Any, **query: Any) -> list[Obj]:
        body = await self._call(request, *args, **query)
        items = body.get("items")
        if not isinstance(items, list) or not all(isinstance(i, dict) for i in items):
            raise self._error("bad payload", f"{body.get('kind') or 'list'} without items")
        return items

    async def list_pods(
        self,
        namespace: str,
        label_selector: str | None = None,
        field_selector: str | None = None,
    ) -> list[Obj]:
        """`kubectl get pods -n NS [-l SEL] [--field-selector F] -o json` → the items."""
        return await self._list(
            self._core.list_namespaced_pod,
            namespace,
            label_selector=label_selector,
            field_selector=field_selector,
        )

    async def get_pod(self, namespace: str, name: str) -> Obj:
        """`kubectl get pod NAME -n NS -o json`; "not found" when there is none."""
        return await self._call(self._core.read_namespaced_pod, name, namespace)

    async def list_events(
        self, namespace: str | None, kind: str | None = None, name: str | None = None
    ) -> list[Obj]:
        """Events about objects of `kind` (and `name`), in `namespace` or (None) in all.

        `kubectl get events [-n NS | -A] --field-selector involvedObject.kind=K,…=N -o json`;
        unordered, as the server returns them.
        """
        selectors = []
        if kind:
            selectors.append(f"involvedObject.kind={kind}")
        if name:
            selectors.append(f"involvedObject.name={name}")
        field_selector = ",".join(selectors) or None
        if namespace is None:
            return await self._list(
                self._core.list_event_for_all_namespaces, field_selector=field_selector
            )
        return await self._list(
            self._core.list_namespaced_event, namespace, field_selector=field_selector
        )

    async def get_deployment(self, namespace: str, name: str) -> Obj:
        """`kubectl get deployment NAME -n NS -o json`; "not found" when there is none."""
        return await self._call(self._apps.read_namespaced_deployment, name, namespace)

    async def list_prometheus_rules(
        self, namespace: str | None, label_selector: str | None = None
    ) -> list[Obj]:
        """`kubectl get prometheusrules.monitoring.coreos.com [-n NS | -A] [-l SEL] -o json`."""
        where = ("monitoring.coreos.com", "v1")
        if namespace is None:
            return await self._list(
                self._custom.list_cluster_custom_object, *where, "prometheusrules",
                label_selector=label_selector,
            )  # fmt: skip
        return await self._list(
            self._custom.list_namespaced_custom_object, *where, namespace, "prometheusrules",
            label_selector=label_selector,
        )  # fmt: skip

    async def list_nodes(self, label_selector: str | None = None) -> list[Obj]:
        """`kubectl get nodes [-l SEL] -o json` → the items."""
        return await self._list(self._core.list_node, label_selector=label_selector)

    async def read_pod_log(
        self,
        namespace: str,
        name: str,
        container: str,
        *,
        previous: bool,
        tail_lines: int,
        limit_bytes: int,
    ) -> str:
        """`kubectl logs NAME -n NS -c C [--previous] --tail=N --limit-bytes=B` (text/plain).

        `GET /api/v1/namespaces/NS/pods/NAME/log?container=C&previous=…&tailLines=N&
        limitBytes=B`. At most `limit_bytes` bytes are kept even from a server that ignores
        limitBytes; undecodable bytes become U+FFFD. A missing previous instance is the
        server's 400 ("http 400", its message naming the container)."""

        def decode(body: bytes) -> str:
            return bytes(body[:limit_bytes]).decode("utf-8", errors="replace")

        text: str = await self._fetch(
            decode,
            self._core.read_namespaced_pod_log,
            name,
            namespace,
            container=container,
            previous=previous,
            tail_lines=tail_lines,
            limit_bytes=limit_bytes,
        )
        return text
