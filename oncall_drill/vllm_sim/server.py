"""The aiohttp application of the simulated vLLM server: OpenAI routes, ops routes, drill routes.

`build_app(config)` returns an `aiohttp.web.Application` whose `SIM_KEY` entry is the
`SimServer` (engine, metrics, fault state). The engine's scheduler task starts and stops with
the application. Routes:

* ops, as vLLM 0.33 (backends.md §1.1): `GET /health`, `GET|POST /ping`, `GET /version`,
  `GET /load`, `GET /metrics`;
* OpenAI: `GET /v1/models`, `POST /v1/completions`, `POST /v1/chat/completions` (JSON, or SSE
  with `"stream": true`); `--api-key` guards `/v1/*` only, as vLLM does;
* drill only: `POST /drill/fault` `{"fault": F}` (F: engine-death, gpu-oom, hang, engine-hung,
  stuck, none; see `config.Fault`) and `GET /drill/state`. They keep answering under the
  `hang` fault so the drill can clear it. `hang` is a server that answers nothing;
  `engine-hung` a frozen EngineCore behind a live API server (/health 200, gauges frozen).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

from aiohttp import web

from oncall_drill.vllm_sim.config import Fault, SimConfig
from oncall_drill.vllm_sim.crash import cuda_oom_log
from oncall_drill.vllm_sim.engine import Engine, EngineState, FinishedRequest, Sequence
from oncall_drill.vllm_sim.http_metrics import HttpAnswer
from oncall_drill.vllm_sim.metrics import CONTENT_TYPE, VllmMetrics
from oncall_drill.vllm_sim.openai_api import (
    ApiError,
    GenerationRequest,
    Kind,
    engine_dead_body,
    models_body,
    new_request_id,
    parse_generation,
    response_body,
    stream_chunk,
    usage_chunk,
)

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


class _StepWatch:
    """The metrics observer, plus a call after every engine step that produced tokens."""

    def __init__(self, metrics: VllmMetrics, after_step: Callable[[], None]) -> None:
        self.metrics = metrics
        self.after_step = after_step

    def on_scheduled(self, prompt_tokens: int, prefix_hit_tokens: int) -> None:
        self.metrics.on_scheduled(prompt_tokens, prefix_hit_tokens)

    def on_first_token(self, ttft: float) -> None:
        self.metrics.on_first_token(ttft)

    def on_tokens(self, count: int, inter_token_latency: float | None) -> None:
        self.metrics.on_tokens(count, inter_token_latency)

    def on_iteration(self, tokens: int) -> None:
        self.metrics.on_iteration(tokens)
        self.after_step()

    def on_preemption(self) -> None:
        self.metrics.on_preemption()

    def on_finished(self, request: FinishedRequest) -> None:
        self.metrics.on_finished(request)


class SimServer:
    """State shared by the handlers of one simulated server."""

    def __init__(self, config: SimConfig) -> None:
        self.config = config
        self.metrics = VllmMetrics(config)
        self.engine = Engine(config, self.metrics)
        self.created = int(time.time())
        #: Set while no `hang` fault is active; hung requests wait on it.
        self.unhung = asyncio.Event()
        self.unhung.set()
        #: Set when the engine dies; the process runner exits shortly after.
        self.died = asyncio.Event()
        self.engine.death_listeners.append(self._on_death)
        #: The engine state the gauges show while the EngineCore is hung (None otherwise).
        self.frozen: EngineState | None = None
        #: Requests whose client left while the core was hung: aborted once it works again.
        self.orphans: list[Sequence] = []
        #: The cause of an engine death is already in the log (a GPU OOM's traceback).
        self.cause_logged = False
        #: `engine-hung` was asked for while nothing ran: it hangs at the next busy step.
        self.hang_armed = False
        self.engine.observer = _StepWatch(self.metrics, self._after_step)

    def _on_death(self) -> None:
        if not self.cause_logged:
            print(
                "ERROR EngineCore encountered an issue. See stack trace (above) for the root "
                "cause.",
                file=sys.stderr,
                flush=True,
            )
        self.died.set()
        self.unhung.set()

    def set_fault(self, fault: Fault) -> None:
        """Inject or clear a fault (engine death cannot be undone)."""
        if fault is Fault.GPU_OOM:
            self._gpu_oom()
            return
        was_hung = self.engine.fault is Fault.ENGINE_HUNG
        # A core hangs inside a step (a forward pass, a collective): with nothing running it
        # has no step to hang in, so the fault waits for the next step that runs a request.
        self.hang_armed = fault is Fault.ENGINE_HUNG and not self.engine.running and not was_hung
        if self.hang_armed:
            return
        self.engine.set_fault(fault)
        if self.engine.fault is Fault.ENGINE_HUNG:
            # The API server keeps the last stats the EngineCore sent: the gauges freeze.
            self.frozen = self.frozen or self.engine.state()
        else:
            self.frozen = None
            if was_hung:  # the core works again and handles the aborts it was sent meanwhile
                for seq in self.orphans:
                    self.engine.abort(seq)
                self.orphans.clear()
        if self.engine.fault is Fault.HANG:
            self.unhung.clear()
        else:
            self.unhung.set()

    def _after_step(self) -> None:
        if self.hang_armed and self.engine.running:
            self.hang_armed = False
            self.set_fault(Fault.ENGINE_HUNG)

    def _gpu_oom(self) -> None:
        """The EngineCore's torch.OutOfMemoryError: its traceback, then engine death."""
        if self.engine.dead:
            return
        log = cuda_oom_log(self.config, in_flight=len(self.engine.running))
        print("\n".join(log), file=sys.stderr, flush=True)
        self.cause_logged = True
        self.engine.kill()

    def state_body(self) -> dict[str, Any]:
        """The `GET /drill/state` object."""
        state = self.engine.state()
        cfg = self.config
        return {
            "model": cfg.model,
            "served_model_name": cfg.served_model_name,
            "pod_name": cfg.pod_name,
            "metrics_version": cfg.metrics_version,
            "vllm_version": cfg.vllm_version,
            "max_num_seqs": cfg.max_num_seqs,
            "max_model_len": cfg.max_model_len,
            "kv_capacity_tokens": state.kv_capacity_tokens,
            "kv_used_tokens": state.kv_used_tokens,
            "kv_usage": state.kv_usage,
            "running": state.running,
            "waiting": state.waiting,
            "preemptions": state.preemptions,
            "generation_tokens": state.generation_tokens,
            "per_seq_tokens_per_second": self.engine.per_seq_rate(),
            "fault": state.fault.value,
            "hang_armed": self.hang_armed,
            "dead": state.dead,
            "speed": cfg.speed,
            "sim_time": self.engine.now,
        }


SIM_KEY = web.AppKey("vllm_sim", SimServer)


def _sim(request: web.Request) -> SimServer:
    return request.app[SIM_KEY]


# ---- middlewares ---------------------------------------------------------------------------


@web.middleware
async def _hang_middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
    """Under the `hang` fault, hold every non-drill request until the fault is cleared."""
    if not request.path.startswith("/drill/"):
        await _sim(request).unhung.wait()
    return await handler(request)


@web.middleware
async def _auth_middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
    """`--api-key` guards only `/v1` paths (vLLM's GUARDED_PREFIX)."""
    key = _sim(request).config.api_key
    authorized = request.headers.get("Authorization") == f"Bearer {key}"
    if key and request.path.startswith("/v1") and not authorized:
        return web.json_response({"error": "Unauthorized"}, status=401)
    return await handler(request)


@web.middleware
async def _http_metrics_middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
    """Record answered requests in the instrumentator's families, by route template."""
    started = time.perf_counter()
    response = await handler(request)
    resource = request.match_info.route.resource
    template = resource.canonical if resource is not None else request.path
    answer = HttpAnswer(
        template, request.method, response.status, time.perf_counter() - started,
        request.content_length or 0, response.content_length or 0,
    )  # fmt: skip
    _sim(request).metrics.on_http(answer)
    return response


# ---- ops routes ----------------------------------------------------------------------------


async def health(request: web.Request) -> web.Response:
    """200 while the engine lives; 503 once dead (500 on 0.10, backends.md §1.2)."""
    sim = _sim(request)
    if sim.engine.dead:
        return web.Response(status=503 if sim.config.metrics_version == "0.33" else 500)
    return web.Response(status=200)


async def version(request: web.Request) -> web.Response:
    """`{"version": "0.33.0"}`."""
    return web.json_response({"version": _sim(request).config.vllm_version})


async def load(request: web.Request) -> web.Response:
    """`{"server_load": 0}`: vLLM counts only with --enable-server-load-tracking."""
    return web.json_response({"server_load": 0})


async def metrics(request: web.Request) -> web.Response:
    """Prometheus exposition text."""
    sim = _sim(request)
    body = sim.metrics.render(sim.frozen or sim.engine.state())
    return web.Response(body=body, headers={"Content-Type": CONTENT_TYPE})


async def models(request: web.Request) -> web.Response:
    """The OpenAI model list."""
    sim = _sim(request)
    return web.json_response(models_body(sim.config, sim.created))


# ---- generation ----------------------------------------------------------------------------


def _sse(payload: dict[str, Any] | str) -> bytes:
    data = payload if isinstance(payload, str) else json.dumps(payload, separators=(",", ":"))
    return f"data: {data}\n\n".encode()


async def _collect(req: GenerationRequest, seq: Sequence, rid: str, created: int) -> web.Response:
    parts: list[str] = []
    while True:
        event = await seq.events.get()
        if event.kind == "error":
            return web.json_response(engine_dead_body(), status=500)
        parts.extend(event.tokens)
        if event.finish_reason is not None:
            body = response_body(
                req,
                rid,
                created,
                text="".join(parts),
                finish_reason=event.finish_reason,
                completion_tokens=len(parts),
            )
            return web.json_response(body)


async def _stream(
    request: web.Request, req: GenerationRequest, seq: Sequence, rid: str, created: int
) -> web.StreamResponse:
    response = web.StreamResponse(
        headers={"Content-Type": "text/event-stream; charset=utf-8", "Cache-Control": "no-cache"}
    )
    await response.prepare(request)
    if req.kind == "chat":
        await response.write(_sse(stream_chunk(req, rid, created, None, role=True)))
    generated = 0
    while True:
        event = await seq.events.get()
        if event.kind == "error":
            await response.write(_sse(engine_dead_body()) + _sse("[DONE]"))
            break
        out = bytearray()
        last = len(event.tokens) - 1
        for i, token in enumerate(event.tokens):
            reason = event.finish_reason if i == last else None
            out += _sse(stream_chunk(req, rid, created, token, reason))
        generated += len(event.tokens)
        if event.finish_reason is not None:
            if req.include_usage:
                out += _sse(usage_chunk(req, rid, created, generated))
            out += _sse("[DONE]")
        await response.write(bytes(out))
        if event.finish_reason is not None:
            break
    await response.write_eof()
    return response


async def _generate(request: web.Request, kind: Kind) -> web.StreamResponse:
    sim = _sim(request)
    if sim.engine.dead:
        return web.json_response(engine_dead_body(), status=500)
    try:
        body = await request.json()
    except ValueError:
        return web.json_response(ApiError(400, "request body is not valid JSON").body(), status=400)
    try:
        req = parse_generation(kind, body, sim.config)
    except ApiError as exc:
        return web.json_response(exc.body(), status=exc.status)
    seq = sim.engine.submit(req.prompt_tokens, req.max_tokens, req.target_tokens, req.prefix_key)
    rid, created = new_request_id(kind), int(time.time())
    try:
        if req.stream:
            return await _stream(request, req, seq, rid, created)
        return await _collect(req, seq, rid, created)
    except ConnectionError:
        # The client went away mid-stream; vLLM aborts the request.
        return web.Response(status=499)
    finally:
        if not seq.done and sim.engine.fault is Fault.ENGINE_HUNG:
            sim.orphans.append(seq)  # a hung core never sees the abort
        elif not seq.done:
            sim.engine.abort(seq)


async def completions(request: web.Request) -> web.StreamResponse:
    """`POST /v1/completions`."""
    return await _generate(request, "completion")


async def chat_completions(request: web.Request) -> web.StreamResponse:
    """`POST /v1/chat/completions`."""
    return await _generate(request, "chat")


# ---- drill routes --------------------------------------------------------------------------


async def drill_state(request: web.Request) -> web.Response:
    """Running/waiting counts, KV usage, limits and the active fault."""
    return web.json_response(_sim(request).state_body())


async def drill_fault(request: web.Request) -> web.Response:
    """Inject or clear a fault: `{"fault": F}`, F one of `config.Fault`'s values."""
    sim = _sim(request)
    try:
        body = await request.json()
        fault = Fault(body["fault"])
    except (ValueError, KeyError, TypeError):
        valid = ", ".join(f.value for f in Fault)
        return web.json_response({"error": f"expected {{'fault': one of {valid}}}"}, status=400)
    if sim.engine.dead and fault is not Fault.ENGINE_DEATH:
        return web.json_response(
            {"error": "the engine is dead; the process is exiting"}, status=409
        )
    sim.set_fault(fault)
    return web.json_response(sim.state_body())


# ---- application ---------------------------------------------------------------------------


def build_app(config: SimConfig) -> web.Application:
    """The application of one simulated server; `app[SIM_KEY]` is its `SimServer`."""
    app = web.Application(
        middlewares=[_hang_middleware, _auth_middleware, _http_metrics_middleware]
    )
    sim = SimServer(config)
    app[SIM_KEY] = sim

    async def engine_task(app: web.Application) -> AsyncIterator[None]:
        task = asyncio.create_task(sim.engine.run(), name="vllm-sim-engine")
        yield
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task

    app.cleanup_ctx.append(engine_task)
    app.router.add_get("/health", health)
    app.router.add_route("*", "/ping", health)
    app.router.add_get("/version", version)
    app.router.add_get("/load", load)
    app.router.add_get("/metrics", metrics)
    app.router.add_get("/v1/models", models)
    app.router.add_post("/v1/completions", completions)
    app.router.add_post("/v1/chat/completions", chat_completions)
    app.router.add_get("/drill/state", drill_state)
    app.router.add_post("/drill/fault", drill_fault)
    return app
