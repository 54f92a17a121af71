"""What the event loop was doing in each long callback while keys are pressed (docs/PERFORMANCE.md).

Runs part 2 of `tui.py` (300 down/up presses on the board, every backend hung, the first
checklist running) and records every event-loop callback longer than `--over` ms with its
wall and CPU time. A watchdog thread looks every 4 ms at the callback in progress and, once it
has run 12 ms, takes a few stacks of the loop thread: what it is busy with, where a sampler of
every press (`tui.py --why`) perturbs the run too much to see it (300 presses took 142 s
instead of 27). Found this way: the once-a-second ages repaint, 27-35 ms of loop CPU, because
any `DataTable.update_cell` makes the table render every visible cell again.

    .venv/bin/python scripts/bench/tui_slow_callbacks.py [--presses 300] [--over 25]
"""

from __future__ import annotations

import argparse
import asyncio
import asyncio.events
import sys
import tempfile
import threading
import time
import traceback
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from scripts.bench.tui_backends import SilentListeners, write_config
from scripts.bench.tui_keys import keys_oncall

#: A callback running this long gets its stack sampled, every WATCH_S, at most SAMPLES times.
SAMPLE_AFTER_S, WATCH_S, SAMPLES = 0.012, 0.004, 3


@dataclass
class SlowCallback:
    at: float
    wall_s: float
    cpu_s: float
    handle: str
    stacks: list[list[str]]


@dataclass
class Watch:
    """The callback in progress (its start, its stacks so far) and the slow ones seen."""

    over_s: float
    started: float = 0.0
    stacks: list[list[str]] = field(default_factory=list)
    slow: list[SlowCallback] = field(default_factory=list)

    @contextmanager
    def installed(self) -> Any:
        original = asyncio.events.Handle._run
        loop_thread = threading.get_ident()
        stop = threading.Event()
        watch = self

        def timed(handle: Any) -> None:
            watch.stacks = []
            watch.started, cpu = time.perf_counter(), time.thread_time()
            try:
                original(handle)
            finally:
                wall = time.perf_counter() - watch.started
                watch.started = 0.0
                if wall > watch.over_s:
                    spent = time.thread_time() - cpu
                    record = SlowCallback(time.perf_counter(), wall, spent, repr(handle)[:160],
                                          list(watch.stacks))  # fmt: skip
                    watch.slow.append(record)

        def watchdog() -> None:
            while not stop.wait(WATCH_S):
                began = watch.started
                if began and time.perf_counter() - began > SAMPLE_AFTER_S:
                    frame = sys._current_frames().get(loop_thread)
                    if frame is not None and len(watch.stacks) < SAMPLES:
                        watch.stacks.append(traceback.format_stack(frame)[-10:])

        thread = threading.Thread(target=watchdog, daemon=True)
        asyncio.events.Handle._run = timed  # type: ignore[method-assign,assignment]
        thread.start()
        try:
            yield self
        finally:
            stop.set()
            thread.join()
            asyncio.events.Handle._run = original  # type: ignore[method-assign]


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--presses", type=int, default=300)
    parser.add_argument("--over", type=float, default=25.0, help="ms: a callback this long")
    args = parser.parse_args()
    if not 1 <= args.presses <= 5000 or not 1 <= args.over <= 1000:
        parser.error("bounded: --presses 1..5000, --over 1..1000 (ms)")
    watch = Watch(args.over / 1000)
    with tempfile.TemporaryDirectory(prefix="oncall-bench-slow-") as tmp:
        directory = Path(tmp)
        with SilentListeners(4) as silent:
            prometheus, dead = silent.backends()
            config = write_config(directory / "hung.yaml", prometheus, dead, directory)
            first = time.perf_counter()
            with watch.installed():
                latencies, missed, _rows = asyncio.run(keys_oncall(config, args.presses))
    print(f"{len(latencies)} presses answered, {missed} missed; max {max(latencies) * 1000:.1f}"
          f" ms, {sum(v > 0.030 for v in latencies)} over 30 ms")  # fmt: skip
    print(f"callbacks over {args.over:g} ms: {len(watch.slow)}")
    for one in watch.slow:
        print(f"\n+{one.at - first:7.2f} s  {one.wall_s * 1000:6.1f} ms wall, "
              f"{one.cpu_s * 1000:6.1f} ms CPU  {one.handle}")  # fmt: skip
        for stack in one.stacks[:2]:
            print("  -- loop thread:\n" + "".join(stack))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
