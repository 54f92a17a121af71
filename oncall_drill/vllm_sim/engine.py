"""The simulated engine core: a continuous-batching scheduler with a KV cache, in simulated time.

One `Engine.step(dt)` is one scheduler iteration that advances simulated time by `dt` seconds;
`Engine.run()` calls it from a single asyncio task every few milliseconds (no task per token).
Tests drive `step()` by hand, which makes the model fully deterministic.

The model, after vLLM's V1 scheduler (backends.md §1.6, §1.7):

* at most `max_num_seqs` sequences run (`--max-num-active-seqs` when it is lower); the rest
  wait in FIFO order. Above the number of sequences the KV cache holds, the cap has no effect
  (the cache is the limit); below it, fewer sequences share the cache: KV usage falls,
  preemptions stop, more requests wait;
* a running sequence holds KV tokens for its prompt and what it generated so far;
* a waiting sequence is admitted only when its tokens fit in the free KV cache;
* admitted sequences prefill (prompt at `prefill_tokens_per_second`), emit the first token,
  then decode at `tokens_per_second * k / (k + n - 1)` each, with `n` running and
  `k = saturation_batch`, so aggregate throughput saturates near `tokens_per_second * k`;
* when a running sequence needs a KV slot and none is free, the most recently admitted
  sequence is preempted by recompute: its KV is freed and it goes back to the front of the
  queue (it must prefill its prompt and output again when readmitted).

Each sequence reports to its handler through an `asyncio.Queue` of `SeqEvent`s; the engine
reports measurements to a `StatsObserver` (the Prometheus metrics implement it).
"""

from __future__ import annotations

import asyncio
import itertools
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

from oncall_drill.vllm_sim.config import Fault, SimConfig

#: Longest simulated step taken at once when the event loop stalls, in real seconds.
_MAX_REAL_STEP = 0.25


@dataclass(frozen=True)
class SeqEvent:
    """What a handler receives: new tokens (the last batch carries finish_reason), or an error."""

    kind: str  # "tokens" (finish_reason set on the last ones) | "error"
    tokens: tuple[str, ...] = ()
    finish_reason: str | None = None
    message: str = ""


@dataclass(frozen=True)
class FinishedRequest:
    """Timings (simulated seconds) and sizes of one request, for the latency histograms."""

    finish_reason: str
    prompt_tokens: int
    generation_tokens: int
    max_tokens: int
    num_preemptions: int
    e2e: float
    queue: float
    ttft: float
    prefill: float
    decode: float
    inference: float


class StatsObserver(Protocol):
    """Receives what the engine measures; `metrics.VllmMetrics` records it for /metrics."""

    def on_scheduled(self, prompt_tokens: int, prefix_hit_tokens: int) -> None: ...
    def on_first_token(self, ttft: float) -> None: ...
    def on_tokens(self, count: int, inter_token_latency: float | None) -> None: ...
    def on_iteration(self, tokens: int) -> None: ...
    def on_preemption(self) -> None: ...
    def on_finished(self, request: FinishedRequest) -> None: ...


class NullObserver:
    """Discards every measurement."""

    def on_scheduled(self, prompt_tokens: int, prefix_hit_tokens: int) -> None:
        """Ignore."""

    def on_first_token(self, ttft: float) -> None:
        """Ignore."""

    def on_tokens(self, count: int, inter_token_latency: float | None) -> None:
        """Ignore."""

    def on_iteration(self, tokens: int) -> None:
        """Ignore."""

    def on_preemption(self) -> None:
        """Ignore."""

    def on_finished(self, request: FinishedRequest) -> None:
        """Ignore."""


_WORDS = (
    "the", "service", "is", "healthy", "and", "every", "request", "gets", "an", "answer",
    "while", "on-call", "engineers", "watch", "latency", "tokens", "queue", "cache", "batch",
    "model", "GPU", "memory", "stays", "below", "its", "limit", "today", ".",
)  # fmt: skip


@dataclass(eq=False)
class Sequence:
    """One request inside the engine; `events` is what its HTTP handler reads."""

    seq_id: int
    prompt_tokens: int
    max_tokens: int
    #: Tokens generated before it stops: `max_tokens` (finish "length") or fewer ("stop").
    target_tokens: int
    arrival: float
    prefix_key: int | None = None
    events: asyncio.Queue[SeqEvent] = field(default_factory=asyncio.Queue)
    generated: int = 0
    num_preemptions: int = 0
    first_scheduled: float | None = None
    first_token_at: float | None = None
    last_token_at: float = 0.0
    prefill_left: float = 0.0
    progress: float = 0.0
    running: bool = False
    done: bool = False

    @property
    def kv_tokens(self) -> int:
        """KV slots this sequence holds while running: its prompt plus its output so far."""
        return self.prompt_tokens + self.generated

    def word(self, index: int) -> str:
        """Deterministic text of output token `index`."""
        return " " + _WORDS[(self.seq_id * 7 + index) % len(_WORDS)]


@dataclass(frozen=True)
class EngineState:
    """A snapshot for /metrics and `GET /drill/state`."""

    running: int
    waiting: int
    kv_used_tokens: int
    kv_capacity_tokens: int
    preemptions: int
    generation_tokens: int
    fault: Fault
    dead: bool

    @property
    def kv_usage(self) -> float:
        """KV-cache usage as a 0-1 fraction, like `vllm:kv_cache_usage_perc`."""
        return self.kv_used_tokens / self.kv_capacity_tokens


class Engine:
    """The scheduler; all methods run on the event loop thread (no locking needed)."""

    def __init__(self, config: SimConfig, observer: StatsObserver | None = None) -> None:
        self.config = config
        self.observer: StatsObserver = observer or NullObserver()
        self.now = 0.0
        self.fault = Fault.NONE
        self.dead = False
        self.running: list[Sequence] = []
        self.waiting: deque[Sequence] = deque()
        self.kv_used = 0
        self.preemptions = 0
        self.generation_tokens = 0
        self.prompt_tokens = 0
        self.prefix_hit_tokens = 0
        self._ids = itertools.count(1)
        self._seen_prefixes: deque[int] = deque(maxlen=256)
        self.death_listeners: list[Callable[[], None]] = []

    # ---- requests -------------------------------------------------------------------------

    def submit(
        self, prompt_tokens: int, max_tokens: int, target_tokens: int, prefix_key: int | None = None
    ) -> Sequence:
        """Queue a request; it runs when a batch slot and KV space are free."""
        seq = Sequence(
            seq_id=next(self._ids),
            prompt_tokens=max(1, prompt_tokens),
            max_tokens=max_tokens,
            target_tokens=max(1, min(target_tokens, max_tokens)),
            arrival=self.now,
            prefix_key=prefix_key,
        )
        if self.dead:
            seq.events.put_nowait(SeqEvent("error", message="engine is dead"))
        else:
            self.waiting.append(seq)
        return seq

    def abort(self, seq: Sequence) -> None:
        """Drop a request whose client went away. Reported finished with reason `abort`; the
        metrics count none of it (vLLM does not: `metrics.VllmMetrics.on_finished`)."""
        if seq.done:
            return
        if seq.running:
            self._remove_running(seq)
        elif seq in self.waiting:
            self.waiting.remove(seq)
        self._finish(seq, "abort")

    # ---- faults ---------------------------------------------------------------------------

    def set_fault(self, fault: Fault) -> None:
        """Inject or clear a fault; engine death is final."""
        if self.dead:
            return
        self.fault = fault
        if fault is Fault.ENGINE_DEATH:
            self.kill()

    def kill(self) -> None:
        """Engine death: every in-flight request fails and death listeners are called."""
        if self.dead:
            return
        self.dead = True
        self.fault = Fault.ENGINE_DEATH
        for seq in [*self.running, *self.waiting]:
            seq.done = True
            seq.running = False
            seq.events.put_nowait(SeqEvent("error", message="EngineDeadError"))
        self.running.clear()
        self.waiting.clear()
        self.kv_used = 0
        for listener in self.death_listeners:
            listener()

    # ---- scheduling -----------------------------------------------------------------------

    def per_seq_rate(self) -> float:
        """Decode tokens/s of each running sequence at the current batch size and fault."""
        k = self.config.saturation_batch
        n = max(1, len(self.running))
        rate = self.config.tokens_per_second * k / (k + n - 1)
        if self.fault is Fault.STUCK:
            rate = min(rate, self.config.stuck_tokens_per_second)
        return rate

    def step(self, dt: float) -> None:
        """One scheduler iteration covering `dt` simulated seconds."""
        if self.dead or self.fault in (Fault.HANG, Fault.ENGINE_HUNG) or dt <= 0:
            return
        self.now += dt
        self._admit()
        rate = self.per_seq_rate()
        emitted_total = 0
        for seq in list(self.running):
            if not seq.running:
                continue  # preempted earlier in this iteration
            decode_time = dt
            if seq.prefill_left > 0:
                seq.prefill_left -= dt
                if seq.prefill_left > 0:
                    continue
                decode_time = -seq.prefill_left
                seq.prefill_left = 0.0
                if seq.generated == 0:
                    if not self._reserve(seq, 1):
                        continue
                    emitted_total += self._emit(seq, 1)
                    seq.first_token_at = self.now
                    if seq.generated >= seq.target_tokens:
                        continue
            seq.progress += rate * decode_time
            wanted = min(int(seq.progress), seq.target_tokens - seq.generated)
            if wanted <= 0:
                continue
            if not self._reserve(seq, wanted):
                continue
            seq.progress -= wanted
            emitted_total += self._emit(seq, wanted)
        if emitted_total:
            self.observer.on_iteration(emitted_total)

    def _admit(self) -> None:
        free = self.config.kv_capacity_tokens - self.kv_used
        while self.waiting and len(self.running) < self.config.running_cap:
            seq = self.waiting[0]
            if seq.kv_tokens > free:
                break  # FIFO: the head of the queue waits for space
            self.waiting.popleft()
            self.running.append(seq)
            seq.running = True
            self.kv_used += seq.kv_tokens
            free -= seq.kv_tokens
            seq.prefill_left = seq.kv_tokens / self.config.prefill_tokens_per_second
            seq.progress = 0.0
            if seq.first_scheduled is None:
                seq.first_scheduled = self.now
                hit = 0
                if seq.prefix_key is not None:
                    hit = seq.prompt_tokens if seq.prefix_key in self._seen_prefixes else 0
                    self._seen_prefixes.append(seq.prefix_key)
                self.prompt_tokens += seq.prompt_tokens
                self.prefix_hit_tokens += hit
                self.observer.on_scheduled(seq.prompt_tokens, hit)

    def _reserve(self, seq: Sequence, count: int) -> bool:
        """Make room for `count` new KV slots of `seq`, preempting the newest sequences."""
        while self.config.kv_capacity_tokens - self.kv_used < count:
            victim = self.running[-1]
            self._preempt(victim)
            if victim is seq:
                return False
        return True

    def _remove_running(self, seq: Sequence) -> None:
        self.running.remove(seq)
        seq.running = False
        self.kv_used -= seq.kv_tokens

    def _preempt(self, seq: Sequence) -> None:
        self._remove_running(seq)
        seq.num_preemptions += 1
        seq.progress = 0.0
        seq.prefill_left = 0.0
        self.waiting.appendleft(seq)
        self.preemptions += 1
        self.observer.on_preemption()

    def _emit(self, seq: Sequence, count: int) -> int:
        start = seq.generated
        seq.generated += count
        self.kv_used += count
        self.generation_tokens += count
        # As vLLM's IterationStats: the time to first token when the first one comes out, then
        # one inter-token latency per output step. Without speculative decoding a vLLM step
        # gives a sequence one token; a tick of this simulator spans several such steps, so
        # each of its `count` tokens is one step, `1/count` of the time since the last token.
        if start > 0:
            self.observer.on_tokens(count, (self.now - seq.last_token_at) / count)
        else:
            self.observer.on_first_token(self.now - seq.arrival)
            self.observer.on_tokens(count, None)
        seq.last_token_at = self.now
        words = tuple(seq.word(i) for i in range(start, seq.generated))
        reason: str | None = None
        if seq.generated >= seq.target_tokens:
            self._remove_running(seq)
            reason = "length" if seq.generated >= seq.max_tokens else "stop"
            self._finish(seq, reason)
        seq.events.put_nowait(SeqEvent("tokens", tokens=words, finish_reason=reason))
        return count

    def _finish(self, seq: Sequence, reason: str) -> None:
        seq.done = True
        scheduled = seq.first_scheduled if seq.first_scheduled is not None else self.now
        first = seq.first_token_at if seq.first_token_at is not None else self.now
        self.observer.on_finished(
            FinishedRequest(
                finish_reason=reason,
                prompt_tokens=seq.prompt_tokens,
                generation_tokens=seq.generated,
                max_tokens=seq.max_tokens,
                num_preemptions=seq.num_preemptions,
                e2e=self.now - seq.arrival,
                queue=scheduled - seq.arrival,
                ttft=first - seq.arrival,
                prefill=first - scheduled,
                decode=self.now - first,
                inference=self.now - scheduled,
            )
        )

    # ---- driving --------------------------------------------------------------------------

    def state(self) -> EngineState:
        """A snapshot of the counts the gauges and `/drill/state` report."""
        return EngineState(
            running=len(self.running),
            waiting=len(self.waiting),
            kv_used_tokens=self.kv_used,
            kv_capacity_tokens=self.config.kv_capacity_tokens,
            preemptions=self.preemptions,
            generation_tokens=self.generation_tokens,
            fault=self.fault,
            dead=self.dead,
        )

    async def run(self) -> None:
        """Step every `tick_seconds` of real time, scaled by `speed`, until the engine dies."""
        last = time.monotonic()
        while not self.dead:
            await asyncio.sleep(self.config.tick_seconds)
            now = time.monotonic()
            real = min(now - last, _MAX_REAL_STEP)
            last = now
            self.step(real * self.config.speed)
