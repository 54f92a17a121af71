"""A Kubernetes Service for the vLLM pods, and Prometheus discovery of them.

`ServiceProxy` listens on one stable loopback port and forwards each request, round-robin,
to a Ready pod's simulator (the port the pod hook annotated), streaming the answer back; no
Ready pod → 503, as a Service without endpoints gives. `write_file_sd` keeps a Prometheus
file_sd target list of the Ready pods, labelled like kubernetes_sd relabelling would.
"""

from __future__ import annotations

import itertools
import json
from pathlib import Path
from typing import Any

import aiohttp
from aiohttp import web

from oncall_drill.cluster.pods import PORT_ANNOTATION
from oncall_drill.kube_sim import KubeSim
from oncall_drill.netutil import LOOPBACK

HOP_HEADERS = {"connection", "keep-alive", "transfer-encoding", "content-length", "host"}


def ready_endpoints(sim: KubeSim, namespace: str, selector: str) -> list[tuple[str, int]]:
    """(pod name, port) of every Ready pod behind the Service."""
    endpoints = []
    for pod in sim.ready_pods(namespace, selector):
        meta = pod.get("metadata") or {}
        port = (meta.get("annotations") or {}).get(PORT_ANNOTATION)
        if port:
            endpoints.append((str(meta["name"]), int(port)))
    return sorted(endpoints)


class ServiceProxy:
    def __init__(self, sim: KubeSim, namespace: str, selector: str) -> None:
        self.sim = sim
        self.namespace = namespace
        self.selector = selector
        self._turn = itertools.count()
        self._session: aiohttp.ClientSession | None = None

    def app(self) -> web.Application:
        app = web.Application(client_max_size=16 * 1024 * 1024)
        app.router.add_route("*", "/{tail:.*}", self.forward)
        app.on_cleanup.append(self._close)
        return app

    async def _close(self, _app: web.Application) -> None:
        if self._session is not None:
            await self._session.close()

    async def forward(self, request: web.Request) -> web.StreamResponse:
        endpoints = ready_endpoints(self.sim, self.namespace, self.selector)
        if not endpoints:
            return web.json_response({"error": "no ready endpoints for service vllm"}, status=503)
        _, port = endpoints[next(self._turn) % len(endpoints)]
        if self._session is None:
            self._session = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=None))
        headers = {k: v for k, v in request.headers.items() if k.lower() not in HOP_HEADERS}
        url = f"http://{LOOPBACK}:{port}{request.rel_url}"
        try:
            async with self._session.request(
                request.method, url, headers=headers, data=await request.read()
            ) as upstream:
                response = web.StreamResponse(status=upstream.status)
                for key, value in upstream.headers.items():
                    if key.lower() not in HOP_HEADERS:
                        response.headers[key] = value
                await response.prepare(request)
                async for chunk in upstream.content.iter_any():
                    await response.write(chunk)
                await response.write_eof()
                return response
        except aiohttp.ClientError as exc:
            # The pod went away between the endpoint list and the request.
            return web.json_response({"error": f"upstream pod: {exc}"}, status=502)


def file_sd_targets(sim: KubeSim, namespace: str, selector: str) -> list[dict[str, Any]]:
    return [
        {
            "targets": [f"{LOOPBACK}:{port}"],
            "labels": {"namespace": namespace, "pod": name, "service": "vllm"},
        }
        for name, port in ready_endpoints(sim, namespace, selector)
    ]


def write_file_sd(path: Path, targets: list[dict[str, Any]]) -> bool:
    """Atomically replace the target file when its content changes; True if it did."""
    text = json.dumps(targets, indent=1, sort_keys=True)
    if path.exists() and path.read_text() == text:
        return False
    tmp = path.with_suffix(".tmp")
    tmp.write_text(text)
    tmp.replace(path)
    return True
