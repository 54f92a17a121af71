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
import threading
import time
from pathlib import Path

from oncall.errors import BackendError
from oncall.model.verdicts import CHECKED, OVERLOADED, Firing, Verdict
from oncall.probes.context import ProbeContext
from oncall.serve.metrics import ServeMetrics
from oncall.serve.notify import Notifier
from oncall.service.firing_incidents import FiringIncidents
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
        # The pool runs on its own thread and event loop (`start`): the receiver's loop only
        # parses and queues, so a busy checklist never delays Alertmanager's answer.
        self.loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self.queue: asyncio.Queue[Firing] | None = None  # made on the pool's loop
        self._lock = threading.Lock()  # `queued` and `depth`: both threads change them
        self.depth = 0  # firings queued, not yet taken by a worker (≤ serve.queue_size)
        self.queued: set[str] = set()  # firings queued or running here
        self.waiting: dict[str, asyncio.TimerHandle] = {}  # on another replica's claim
        self.buffer: collections.deque[Verdict] = collections.deque()
        self.overflowed: collections.deque[Firing] = collections.deque(maxlen=self.serve.queue_size)
        self._lookups: dict[tuple[str, tuple[tuple[str, str], ...]], tuple[float, Path | None]] = {}
        self._tasks: list[asyncio.Task[None]] = []
        self.ctx = ProbeContext(settings)
        #: The firings checked here, grouped into the team's incidents (with their groupKey).
        self.incidents = FiringIncidents(settings)

    # -- the receiver's side: answers at once -------------------------------------------------

    async def runbook(self, firing: Firing) -> Path | None:
        """The firing's runbook, looked up in a thread and remembered a few seconds: a burst
        of one alert's instances asks the runbook folders once."""
        now = time.monotonic()
        # A file named after the alert is its runbook whatever its labels (find_runbook's
        # first rule): one lookup serves every instance of it.
        named = self._lookups.get((firing.alert, ()))
        if named is not None and now - named[0] < LOOKUP_TTL:
            return named[1]
        key = (firing.alert, tuple(sorted(firing.labels.items())))
        found = self._lookups.get(key)
        if found is not None and now - found[0] < LOOKUP_TTL:
            return found[1]
        path = await asyncio.to_thread(runbook_of, self.settings, firing)
        if len(self._lookups) >= 4096:
            self._lookups.clear()
        by_name = path is not None and path.stem == firing.alert
        self._lookups[(firing.alert, ()) if by_name else key] = (now, path)
        return path

    def full(self) -> bool:
        return self.depth >= self.serve.queue_size

    def offer(self, firing: Firing) -> str:
        """Queue a firing for its checklist (from any thread); what became of it (a metric
        label)."""
        with self._lock:
            if firing.key in self.queued:
                return "duplicate"
            if self.loop is None or self.queue is None or self.full():
                self.overflowed.append(firing)
                self.metrics.checklists.labels("overflowed").inc()
                return "overflowed"
            self.queued.add(firing.key)
            self.depth += 1
            self.metrics.queue_depth.set(self.depth)
        self.loop.call_soon_threadsafe(self.queue.put_nowait, firing)
        return "queued"

    def resolve_soon(self, firing: Firing) -> None:
        """Record a resolution on the pool's loop (from the receiver's)."""
        if self.loop is not None:
            asyncio.run_coroutine_threadsafe(self.resolve(firing), self.loop)

    async def resolve(self, firing: Firing) -> None:
        try:
            await self.store.resolve(firing.key, time.time())
        except BackendError as exc:
            self.metrics.store_errors.inc()
            log.warning("resolution of %s not recorded: %s", firing.alert, exc)
        await self.incidents.resolved(firing)

    # -- the workers --------------------------------------------------------------------------

    def start(self) -> None:
        """Start the pool's thread: its loop, the workers, the flusher and the notifier."""
        ready = threading.Event()

        failed: list[BaseException] = []

        async def begin() -> None:
            self.queue = asyncio.Queue()  # bounded by `depth`, checked in `offer`
            self._tasks = [
                asyncio.create_task(self._worker(), name=f"serve-worker-{i}")
                for i in range(self.serve.workers)
            ]
            self._tasks.append(asyncio.create_task(self._flusher(), name="serve-flusher"))
            self.notifier.start()

        def run() -> None:
            loop = asyncio.new_event_loop()
            asyncio.set_event_loop(loop)
            try:
                loop.run_until_complete(begin())
            except BaseException as exc:  # said by `start`, in the caller's thread
                failed.append(exc)
                ready.set()
                loop.close()
                return
            self.loop = loop
            ready.set()
            try:
                loop.run_forever()
            finally:
                loop.close()

        self._thread = threading.Thread(target=run, name="serve-pool", daemon=True)
        self._thread.start()
        ready.wait()
        if failed:
            raise failed[0]

    async def _worker(self) -> None:
        assert self.queue is not None
        while True:
            firing = await self.queue.get()
            with self._lock:
                self.depth -= 1
                self.metrics.queue_depth.set(self.depth)
            try:
                outcome = await self._check(firing)
            except Exception:  # a bug in one check must not stop the worker
                log.exception("checklist of %s failed", firing.alert)
                outcome = "error"
            finally:
                with self._lock:
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
        await self.incidents.checked(firing, verdict)  # a Redis error is logged, not raised
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
        """Stop the pool's thread (from the receiver's loop): running checklists are cancelled,
        their claims left to expire; the clients are closed."""
        loop, thread = self.loop, self._thread
        if loop is None or thread is None:
            await self._shutdown()
            return
        done = asyncio.run_coroutine_threadsafe(self._shutdown(), loop)
        await asyncio.wrap_future(done)
        loop.call_soon_threadsafe(loop.stop)
        await asyncio.to_thread(thread.join, 10)

    async def _shutdown(self) -> None:
        for handle in self.waiting.values():
            handle.cancel()
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        await self.notifier.aclose()
        await self.ctx.aclose()
        await self.incidents.aclose()
        await self.store.aclose()
