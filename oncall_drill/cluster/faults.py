"""Drill routes on the cluster's API port: a vLLM fault in one pod, and a scale-up.

`POST /drill/pod-fault` `{"fault": "gpu-oom", "pod_index": 0}` (or `"pod": NAME`) forwards
`{"fault": ...}` to the `/drill/fault` route of that Ready pod's simulator (pods sorted by
name, as the drill's `oom_kill` step counts them). A fault that concerns one replica (a GPU OOM,
a hung engine) then behaves as on a real fleet: the other replicas keep serving.

`POST /drill/scale` `{"replicas": N}` sets the vLLM Deployment's replicas as `kubectl scale`
(or an autoscaler) would; `{"replicas": null}` goes back to the drill's own count. Past the
node's GPUs the extra pod stays Pending with the scheduler's `FailedScheduling` event.
"""

from __future__ import annotations

from typing import Any

import aiohttp
from aiohttp import web

from oncall_drill.cluster.service import ready_endpoints
from oncall_drill.kube_sim import KubeSim, verbs
from oncall_drill.kube_sim.errors import ApiError
from oncall_drill.kube_sim.resources import DEPLOYMENTS
from oncall_drill.netutil import LOOPBACK

FORWARD_TIMEOUT_S = 5.0
#: A drill's node holds a few GPUs: a scale-up far past them only starts processes.
MAX_REPLICAS = 8


def pod_fault_route(sim: KubeSim, namespace: str, selector: str) -> web.RouteDef:
    async def pod_fault(request: web.Request) -> web.Response:
        try:
            body: Any = await request.json()
            fault = str(body["fault"])
            endpoints = ready_endpoints(sim, namespace, selector)
            if "pod" in body:
                port = dict(endpoints)[str(body["pod"])]
            else:
                port = endpoints[int(body.get("pod_index", 0)) % len(endpoints)][1]
        except (ValueError, KeyError, TypeError, ZeroDivisionError) as exc:
            message = f"expected {{fault, pod | pod_index}} naming a Ready pod: {exc!r}"
            return web.json_response({"error": message}, status=400)
        timeout = aiohttp.ClientTimeout(total=FORWARD_TIMEOUT_S)
        url = f"http://{LOOPBACK}:{port}/drill/fault"
        try:
            async with (
                aiohttp.ClientSession(timeout=timeout) as session,
                session.post(url, json={"fault": fault}) as answer,
            ):
                return web.json_response(await answer.json(), status=answer.status)
        except (aiohttp.ClientError, TimeoutError, ValueError) as exc:
            return web.json_response({"error": f"pod simulator: {exc!r}"}, status=502)

    return web.post("/drill/pod-fault", pod_fault)


def scale_route(sim: KubeSim, namespace: str, deployment: str, base: int) -> web.RouteDef:
    async def scale(request: web.Request) -> web.Response:
        try:
            body: Any = await request.json()
            wanted = body["replicas"]
            replicas = base if wanted is None else int(wanted)
            if not 0 <= replicas <= MAX_REPLICAS:
                raise ValueError(f"replicas must be within 0..{MAX_REPLICAS}")
        except (ValueError, KeyError, TypeError) as exc:
            message = f"expected {{replicas: N | null}}: {exc!r}"
            return web.json_response({"error": message}, status=400)
        try:
            current = verbs.get(sim, DEPLOYMENTS, namespace, deployment)
            current["spec"]["replicas"] = replicas
            verbs.update(sim, DEPLOYMENTS, namespace, deployment, current, dry_run=False)
        except ApiError as exc:
            return web.json_response({"error": str(exc)}, status=exc.code)
        return web.json_response({"deployment": deployment, "replicas": replicas})

    return web.post("/drill/scale", scale)
