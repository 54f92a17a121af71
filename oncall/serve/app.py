"""The HTTP side of `oncall serve` (aiohttp.web): the webhook, `/healthz`, `/readyz`, `/metrics`.

The webhook answers before any checklist runs: it checks the sender's credentials, reads the
body up to `serve.max_body_bytes`, parses it (oncall/serve/payload.py), queues each firing alert
instance that has a runbook and records each resolved one, and says what it did, as JSON. A bad
request is a 4xx with its reason, counted by reason in `oncall_serve_notifications_total`;
nothing of it is stored. Errors are answered as text, never a traceback.
"""

from __future__ import annotations

import logging
import time
from collections import Counter
from typing import Any

from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from oncall.serve.auth import Credentials
from oncall.serve.metrics import ServeMetrics
from oncall.serve.payload import PayloadError, parse
from oncall.serve.pool import Pool

log = logging.getLogger("oncall.serve")
POOL: web.AppKey[Pool] = web.AppKey("pool", Pool)
METRICS: web.AppKey[ServeMetrics] = web.AppKey("metrics", ServeMetrics)


def _reject(metrics: ServeMetrics, status: int, reason: str, text: str) -> web.Response:
    metrics.notifications.labels(reason).inc()
    return web.json_response({"status": "rejected", "reason": reason, "error": text}, status=status)


def make_app(
    pool: Pool, metrics: ServeMetrics, credentials: Credentials, *, path: str, max_body: int
) -> web.Application:
    # aiohttp refuses a larger body itself (413); the handler checks Content-Length first.
    app = web.Application(client_max_size=max_body)
    app[POOL] = pool
    app[METRICS] = metrics
    context = pool.settings.context.name

    async def webhook(request: web.Request) -> web.Response:
        received_at = time.time()
        if not credentials.allows(request.headers.get("Authorization")):
            return _reject(metrics, 401, "unauthorized", "missing or wrong credentials")
        if request.content_length is not None and request.content_length > max_body:
            return _reject(metrics, 413, "too_large", f"body over {max_body} bytes")
        try:
            body = await request.read()
        except web.HTTPRequestEntityTooLarge:
            return _reject(metrics, 413, "too_large", f"body over {max_body} bytes")
        try:
            parsed = parse(body, context=context, received_at=received_at)
        except PayloadError as exc:
            return _reject(metrics, 400, exc.reason, str(exc))
        outcomes: Counter[str] = Counter()
        for _ in parsed.refused:
            outcomes["refused"] += 1
        for firing in parsed.firings:
            if firing.status == "resolved":
                outcomes["resolved"] += 1
                pool.resolve_soon(firing)
                continue
            if await pool.runbook(firing) is None:
                outcomes["no_runbook"] += 1
                metrics.checklists.labels("no_runbook").inc()
                continue
            outcomes[pool.offer(firing)] += 1
        for outcome, count in outcomes.items():
            metrics.alerts.labels(outcome).inc(count)
        metrics.notifications.labels("accepted").inc()
        answer: dict[str, Any] = {
            "status": "accepted",
            "alerts": dict(outcomes),
            "refused": parsed.refused[:20],
        }
        if not outcomes.get("queued") and not outcomes.get("resolved"):
            answer["note"] = "accepted, nothing to check"
        return web.json_response(answer)

    async def healthz(_request: web.Request) -> web.Response:
        return web.Response(text="ok\n")

    async def readyz(_request: web.Request) -> web.Response:
        # Not ready while the queue is full: another replica takes the notification. Redis
        # down does not make it unready: the checklists still run (verdicts wait in memory).
        if pool.full():
            return web.Response(status=503, text="overloaded: the checklist queue is full\n")
        return web.Response(text="ready\n")

    async def metrics_page(_request: web.Request) -> web.Response:
        body = generate_latest(metrics.registry)
        return web.Response(body=body, headers={"Content-Type": CONTENT_TYPE_LATEST})

    app.router.add_post(path, webhook)
    app.router.add_get("/healthz", healthz)
    app.router.add_get("/readyz", readyz)
    app.router.add_get("/metrics", metrics_page)
    return app
