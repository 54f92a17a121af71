"""What ran while a key press was slow: the diagnosis of part 2 of `tui.py` (docs/PERFORMANCE.md).

`StallRecorder`, installed in the bench process around the presses, keeps a timeline of:

- every garbage collection (`gc.callbacks`): generation, thread, wall and CPU time; for a full
  (generation 2) one also how many objects it walked, what asked for it (the Python frame that
  allocated past the threshold, or called `gc.collect`) and the commonest kinds among them;
- every event-loop callback over `LONG_S` (where `loop_time.LoopMeter` times them,
  `asyncio.events.Handle._run`), named by its task's coroutine;
- every Textual message whose handling took over `LONG_S`, with its CPU time;
- every gap over `GAP_S` in a sampling thread that asks to wake each `SAMPLE_EVERY_S`: it could
  not get the interpreter lock (a long C call, a collection, the loop's own long callback) or
  the CPU (another process); with the stacks of the busy threads before and after the gap;
- every thread started and every module imported (`sys.meta_path`), with the importing thread.

`explain` prints, for a slow press, what of that overlaps it, and the CPU time the process and
the loop's thread spent in it: a press whose wall time is far above its CPU time waited for the
machine (the shared machine's other processes), one whose CPU time is high did work of its own.
Only in the bench process: it patches those hooks while installed.

    .venv/bin/python scripts/bench/tui.py --skip startup,pty,contexts,rss --presses 300 --why
"""

from __future__ import annotations

import asyncio.events
import contextlib
import gc
import sys
import threading
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from types import FrameType, ModuleType
from typing import Any

SAMPLE_EVERY_S = 0.001
GAP_S = 0.008
LONG_S = 0.008
STACK_DEPTH = 12
#: Frames of a thread with nothing to do: such a thread is left out of the stacks shown.
IDLE = ("thread.py:81 _worker", "socket.py:294 accept", "selectors.py:468 select")


@dataclass
class Event:
    start: float
    end: float
    kind: str
    detail: str
    stacks: Sequence[str] = ()


@dataclass
class Press:
    """One press: perf_counter at the key and at its frame, CPU of the process and the loop."""

    start: float
    end: float
    process_cpu: float
    loop_cpu: float


def _stack(frame: FrameType | None) -> str:
    lines: list[str] = []
    while frame is not None and len(lines) < STACK_DEPTH:
        code = frame.f_code
        name = code.co_filename.rsplit("/", 1)[-1]
        lines.append(f"{name}:{frame.f_lineno} {code.co_name}")
        frame = frame.f_back
    return " <- ".join(lines)


def _busy_stacks(frames: dict[int, FrameType], names: dict[int | None, str]) -> list[str]:
    """The stacks of every thread but this one that is not idle (`IDLE`). A frame held since
    an earlier sample shows where its function is now (its caller chain is as it was)."""
    me = threading.get_ident()
    stacks = []
    for ident, frame in frames.items():
        stack = _stack(frame)
        if ident != me and not stack.startswith(IDLE):
            stacks.append(f"{names.get(ident, str(ident))}: {stack}")
    return stacks


def _census(objects: list[Any], most: int = 8) -> str:
    """The commonest kinds of `objects`: type, with the module of a class's instance."""
    kinds: dict[str, int] = {}
    for obj in objects:
        module = getattr(type(obj), "__module__", "builtins")
        kind = type(obj).__name__ if module == "builtins" else f"{module}.{type(obj).__name__}"
        kinds[kind] = kinds.get(kind, 0) + 1
    return ", ".join(f"{n} {k}" for k, n in sorted(kinds.items(), key=lambda kv: -kv[1])[:most])


def _what(handle: Any) -> str:
    """A callback's task (its coroutine) where it is a task's step, else its repr."""
    owner = getattr(getattr(handle, "_callback", None), "__self__", None)
    if isinstance(owner, asyncio.Task):
        return f"task {owner.get_name()} {owner.get_coro().__qualname__}"  # type: ignore[union-attr]
    return repr(handle)[:200]


class _ImportWatch:
    """A meta path finder that finds nothing: it notes which thread imports which module."""

    def __init__(self, events: list[Event]) -> None:
        self.events = events

    def find_spec(self, name: str, path: Any, target: ModuleType | None = None) -> None:
        if name != "sniffio":  # httpcore tries it (not installed) on every request
            now = time.perf_counter()
            self.events.append(Event(now, now, "import", f"{name} in {_thread()}"))


def _thread() -> str:
    return threading.current_thread().name


@dataclass
class StallRecorder:
    events: list[Event] = field(default_factory=list)
    _stop: threading.Event = field(default_factory=threading.Event)
    _gc_started: tuple[float, float, str] = (0.0, 0.0, "")

    def _gc(self, phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            full = ""
            if info["generation"] == 2:  # counted before the clock starts: a walk of its own
                objects = gc.get_objects(2)
                full = f", walked {len(objects)}: {_census(objects)}; asked by "
                full += _stack(sys._getframe(1))[:160]
                del objects
            self._gc_started = (time.perf_counter(), time.thread_time(), full)
            return
        now, cpu = time.perf_counter(), time.thread_time()
        started, started_cpu, full = self._gc_started
        detail = (
            f"gen {info['generation']} in {_thread()}, cpu {(cpu - started_cpu) * 1000:.1f} ms, "
            f"collected {info['collected']}{full}"
        )
        self.events.append(Event(started, now, "gc", detail))

    def _sample(self) -> None:
        # Cheap between gaps (a dict of frame objects): Pilot's `press` waits until the
        # process uses under 5% of a CPU, and a costlier sampler would hold every press up.
        frames = sys._current_frames
        before, held = time.perf_counter(), frames()
        while not self._stop.is_set():
            time.sleep(SAMPLE_EVERY_S)
            now = time.perf_counter()
            if now - before > GAP_S:
                names = {t.ident: t.name for t in threading.enumerate()}
                gap = f"{(now - before) * 1000:.1f} ms"
                stacks = [*_busy_stacks(held, names), "--- after:", *_busy_stacks(frames(), names)]
                self.events.append(Event(before, now, "gap", gap, stacks))
            before, held = now, frames()

    @contextlib.contextmanager
    def installed(self) -> Iterator[StallRecorder]:
        from textual.message_pump import MessagePump

        events = self.events
        run, dispatch, start_thread = (
            asyncio.events.Handle._run,
            MessagePump._dispatch_message,
            threading.Thread.start,
        )

        def timed(handle: Any) -> None:
            started = time.perf_counter()
            try:
                run(handle)
            finally:
                if (now := time.perf_counter()) - started > LONG_S:
                    events.append(Event(started, now, "callback", _what(handle)))

        async def timed_dispatch(pump: MessagePump, message: Any) -> Any:
            started, cpu = time.perf_counter(), time.thread_time()
            try:
                return await dispatch(pump, message)
            finally:
                if (now := time.perf_counter()) - started > LONG_S:
                    spent = (time.thread_time() - cpu) * 1000
                    what = f"{type(pump).__name__} {type(message).__name__}, cpu {spent:.1f} ms"
                    events.append(Event(started, now, "message", what))

        def start(thread: threading.Thread) -> None:
            now = time.perf_counter()
            events.append(Event(now, now, "thread", f"{thread.name} from {_thread()}"))
            start_thread(thread)

        watch = _ImportWatch(events)
        sampler = threading.Thread(target=self._sample, name="stall-sampler", daemon=True)
        asyncio.events.Handle._run = timed  # type: ignore[method-assign,assignment]
        MessagePump._dispatch_message = timed_dispatch  # type: ignore[method-assign,assignment]
        threading.Thread.start = start  # type: ignore[method-assign,assignment]
        gc.callbacks.append(self._gc)
        sys.meta_path.insert(0, watch)
        sampler.start()
        try:
            yield self
        finally:
            self._stop.set()
            sampler.join(timeout=2)
            sys.meta_path.remove(watch)
            gc.callbacks.remove(self._gc)
            threading.Thread.start = start_thread  # type: ignore[method-assign]
            MessagePump._dispatch_message = dispatch  # type: ignore[method-assign]
            asyncio.events.Handle._run = run  # type: ignore[method-assign]

    def explain(self, presses: Sequence[Press], slow_s: float) -> None:
        """Print what overlapped each press slower than `slow_s`, and every full collection."""
        if not presses:
            return
        zero = presses[0].start
        fulls = [e for e in self.events if e.kind == "gc" and e.detail.startswith("gen 2")]
        print(f"full collections, at s from the first press: {len(fulls)}")
        for event in fulls:
            print(f"  {event.start - zero:+8.2f} s {(event.end - event.start) * 1000:6.1f} ms "
                  f"{event.detail}")  # fmt: skip
        for index, press in enumerate(presses):
            if press.end - press.start > slow_s:
                self._print_press(index, press, zero)

    def _print_press(self, index: int, press: Press, zero: float) -> None:
        wall = (press.end - press.start) * 1000
        print(
            f"press {index} at {press.start - zero:.2f} s: {wall:.1f} ms; cpu: process "
            f"{press.process_cpu * 1000:.1f} ms, loop thread {press.loop_cpu * 1000:.1f} ms"
        )
        for event in self.events:
            if event.end >= press.start - GAP_S and event.start <= press.end:
                at = (event.start - press.start) * 1000
                length = (event.end - event.start) * 1000
                print(f"  {at:+8.1f} ms {length:6.1f} ms {event.kind:8} {event.detail}")
                for line in event.stacks:
                    print(f"        {line[:240]}")
