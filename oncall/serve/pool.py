"""The checklists of `oncall serve`: a bounded queue, a bounded pool of workers, the claim.

For each firing alert instance with a runbook, once per firing (context + fingerprint +
`startsAt`): skip it when a verdict younger than `serve.recheck_after` is stored (Alertmanager's
repeats), claim it in Redis (SET NX PX: one replica checks it), run its checklist, store the
verdict, hand it to the notifier. A firing claimed by another replica is looked at again when
that claim ends: a replica killed mid-check leaves its claim to expire, and this one completes
it without waiting for Alertmanager's next repeat.

Nothing here grows without bound: the queue holds `serve.queue_size` firings (beyond: counted,
and recorded as "not checked: overloaded" while the record buffer has room); firings waiting on
another replica's claim are at most `queue_size`; verdicts Redis could not take wait in memory up
to `serve.memory_buffer` (the oldest dropped and counted beyond it) and are written when it
answers again. With Redis down the checklist still runs (unclaimed) and the summary still goes.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import logging
import time
from pathlib import Path

from oncall.errors import BackendError
from oncall.model.verdicts import CHECKED, OVERLOADED, Firing, Verdict
from oncall.probes.context import ProbeContext
from oncall.serve.metrics import ServeMetrics
from oncall.serve.notify import Notifier
from oncall.service.verdicts import VerdictStore, base_verdict, check_firing, runbook_of
from oncall.settings import Settings

log = logging.getLogger("oncall.serve")
#: How often buffered verdicts are offered to Redis again.
FLUSH_EVERY = 1.0
#: How long a runbook lookup is remembered per alert name and labels.
LOOKUP_TTL = 10.0


class Pool:
    def __init__(
        self,
        settings: Settings,
        store: VerdictStore,
        notifier: Notifier,
        metrics: ServeMetrics,
        *,
        replica: str,
    ) -> None:
        self.settings = settings
        self.serve = settings.serve
        self.store = store
        self.notifier = notifier
        self.metrics = metrics
        self.replica = replica
        self.queue: asyncio.Queue[Firing] = asyncio.Queue(self.serve.queue_size)
        self.queued: set[str] = set()  # firings queued or running here
        self.waiting: dict[str, asyncio.TimerHandle] = {}  # on another replica's claim
        self.buffer: collections.deque[Verdict] = collections.deque()
        self.overflowed: collections.deque[Firing] = collections.deque(maxlen=self.serve.queue_size)
        self._lookups: dict[tuple[str, tuple[tuple[str, str], ...]], tuple[float, Path | None]] = {}
        self._tasks: list[asyncio.Task[None]] = []
        self._background: set[asyncio.Task[None]] = set()
        self.ctx = ProbeContext(settings)

    # -- the receiver's side: answers at once -------------------------------------------------

    async def runbook(self, firing: Firing) -> Path | None:
        """The firing's runbook, looked up in a thread and remembered a few seconds: a burst
        of one alert's instances asks the runbook folders once."""
        key = (firing.alert, tuple(sorted(firing.labels.items())))
        now = time.monotonic()
        found = self._lookups.get(key)
        if found is not None and now - found[0] < LOOKUP_TTL:
            return found[1]
        path = await asyncio.to_thread(runbook_of, self.settings, firing)
        if len(self._lookups) >= 4096:
            self._lookups.clear()
        self._lookups[key] = (now, path)
        return path

    def offer(self, firing: Firing) -> str:
        """Queue a firing for its checklist; what became of it (a metric label)."""
        if firing.key in self.queued:
            return "duplicate"
        try:
            self.queue.put_nowait(firing)
        except asyncio.QueueFull:
            self.overflowed.append(firing)
            self.metrics.checklists.labels("overflow").inc()
            return "overflow"
        self.queued.add(firing.key)
        self.metrics.queue_depth.set(self.queue.qsize())
        return "queued"

    def background(self, task: asyncio.Task[None]) -> None:
        """Hold a short task (a resolution's write) until it is done."""
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    async def resolve(self, firing: Firing) -> None:
        try:
            await self.store.resolve(firing.key, time.time())
        except BackendError as exc:
            self.metrics.store_errors.inc()
            log.warning("resolution of %s not recorded: %s", firing.alert, exc)

    # -- the workers --------------------------------------------------------------------------

    def start(self) -> None:
        self._tasks = [
            asyncio.create_task(self._worker(), name=f"serve-worker-{i}")
            for i in range(self.serve.workers)
        ]
        self._tasks.append(asyncio.create_task(self._flusher(), name="serve-flusher"))

    async def _worker(self) -> None:
        while True:
            firing = await self.queue.get()
            self.metrics.queue_depth.set(self.queue.qsize())
            try:
                outcome = await self._check(firing)
            except Exception:  # a bug in one check must not stop the worker
                log.exception("checklist of %s failed", firing.alert)
                outcome = "error"
            finally:
                self.queued.discard(firing.key)
            self.metrics.checklists.labels(outcome).inc()

    async def _check(self, firing: Firing) -> str:
        runbook = await self.runbook(firing)
        if runbook is None:
            return "no_runbook"
        claimed = True
        try:
            latest = await self.store.latest_of_firing(firing.key)
            if latest is not None and time.time() - latest[1] < self.serve.recheck_after:
                return "duplicate"
            claimed, left = await self.store.claim(firing.key, self.replica, self.serve.claim_ttl)
        except BackendError as exc:
            # Redis down: check it anyway; two replicas may both check it, none is lost.
            self.metrics.store_errors.inc()
            log.warning("claim of %s not possible, checking it unclaimed: %s", firing.alert, exc)
            claimed, left = False, -1.0
        if not claimed and left >= 0:
            self._look_again(firing, left)
            return "claimed_elsewhere"
        started = time.perf_counter()
        verdict = await check_firing(
            self.settings, firing, runbook, replica=self.replica, ctx=self.ctx
        )
        self.metrics.duration.observe(time.perf_counter() - started)
        await self._keep(verdict)
        if claimed:
            with contextlib.suppress(BackendError):
                await self.store.release(firing.key, self.replica)
        self.notifier.submit(verdict)
        return "checked" if verdict["status"] == CHECKED else "runbook_broken"

    def _look_again(self, firing: Firing, left: float) -> None:
        """Check the firing again when the other replica's claim ends (it may have died)."""
        if firing.key in self.waiting or len(self.waiting) >= self.serve.queue_size:
            return
        loop = asyncio.get_running_loop()

        def again() -> None:
            self.waiting.pop(firing.key, None)
            self.offer(firing)

        self.waiting[firing.key] = loop.call_later(left + 0.05, again)

    # -- storing ------------------------------------------------------------------------------

    async def _keep(self, verdict: Verdict) -> None:
        verdict["stored_at"] = time.time()
        try:
            await self.store.put(verdict)
        except BackendError as exc:
            self.metrics.store_errors.inc()
            log.warning("verdict %s kept in memory: %s", verdict["id"], exc)
            self._buffer(verdict)
            return
        self._stored(verdict)

    def _stored(self, verdict: Verdict) -> None:
        received = verdict.get("received_at") or 0.0
        if received:
            self.metrics.receive_to_stored.observe(max(0.0, verdict["stored_at"] - received))
        log.info("verdict %s of %s stored: %s", verdict["id"], verdict["alert"], verdict["status"])

    def _buffer(self, verdict: Verdict) -> None:
        if self.serve.memory_buffer == 0:
            self.metrics.dropped.inc()
            return
        if len(self.buffer) >= self.serve.memory_buffer:
            lost = self.buffer.popleft()
            self.metrics.dropped.inc()
            log.warning("memory buffer full: verdict %s dropped", lost["id"])
        self.buffer.append(verdict)
        self.metrics.buffered.set(len(self.buffer))

    async def _flusher(self) -> None:
        """Write buffered verdicts when Redis answers again, and record overflowed firings."""
        while True:
            await asyncio.sleep(FLUSH_EVERY)
            await self.flush()

    async def flush(self) -> None:
        while self.overflowed:
            firing = self.overflowed.popleft()
            record = base_verdict(
                firing, replica=self.replica, status=OVERLOADED, ran_at=time.time()
            )
            self._buffer(record)
        while self.buffer:
            verdict = self.buffer[0]
            try:
                await self.store.put(verdict)
            except BackendError:
                return  # still down: the next round tries again
            self.buffer.popleft()
            self.metrics.buffered.set(len(self.buffer))
            if verdict.get("status") != OVERLOADED:
                self._stored(verdict)

    async def aclose(self) -> None:
        for handle in self.waiting.values():
            handle.cancel()
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        await self.ctx.aclose()
