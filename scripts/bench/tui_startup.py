"""Part 1 of `tui.py`: start-up, headless and on a pseudo-terminal, against a bare baseline.

Each run is a fresh child process (`tui.py _child`, see tui_child.py), timed from just before
it is spawned; see tui.py for what each figure means.
"""

from __future__ import annotations

import fcntl
import json
import os
import select
import statistics
import struct
import subprocess
import sys
import termios
import time
from pathlib import Path

from scripts.bench.tui_backends import closed_ports, write_config
from scripts.bench.tui_common import (
    HEIGHT,
    ONCALL,
    PACKS,
    ROOT,
    RUN_DEADLINE_S,
    WIDTH,
    child_argv,
)


def headless_run(kind: str, target: str, directory: Path) -> dict[str, float]:
    out = directory / f"{kind}.json"
    out.unlink(missing_ok=True)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ONCALL_", "TEXTUAL"))}
    started = time.monotonic()
    subprocess.run(
        child_argv(kind, target, "--out", str(out)),
        check=True,
        env=env,
        stdout=subprocess.DEVNULL,
        timeout=RUN_DEADLINE_S + 15,
    )
    result = json.loads(out.read_text())
    if result["live"] is None:
        raise SystemExit(f"{kind}: no live frame within {RUN_DEADLINE_S:g}s")
    return {
        "first": result["first"] - started,
        "live": result["live"] - started,
        "rss_mb": result["rss_mb"],
    }


def pty_run(
    argv: list[str], frame_marker: bytes, extra_env: dict[str, str] | None = None
) -> dict[str, float]:
    """Spawn on a pseudo-terminal; seconds until first bytes, first frame, first alert state."""
    master, slave = os.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", HEIGHT, WIDTH, 0, 0))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ONCALL_", "TEXTUAL"))}
    env.update(TERM="xterm-256color", COLORTERM="truecolor", **(extra_env or {}))
    env.pop("NO_COLOR", None)
    times: dict[str, float] = {}
    started = time.monotonic()
    proc = subprocess.Popen(
        argv, stdin=slave, stdout=slave, stderr=slave, env=env, start_new_session=True, cwd=ROOT
    )
    os.close(slave)
    seen = b""
    try:
        deadline = started + RUN_DEADLINE_S
        while time.monotonic() < deadline:
            ready, _, _ = select.select([master], [], [], 0.1)
            if not ready:
                if proc.poll() is not None:
                    break
                continue
            try:
                data = os.read(master, 65536)
            except OSError:  # EIO: the child closed the terminal
                break
            if not data:
                break
            now = time.monotonic() - started
            times.setdefault("bytes", now)
            seen = seen[-64:] + data  # markers split across reads are still found
            if "frame" not in times and frame_marker in seen:
                times["frame"] = now
            if "live" not in times and (b"inactive" in seen or b"firing" in seen):
                times["live"] = now
                times.setdefault("frame", now)
                os.write(master, b"q")
    finally:
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        os.close(master)
    if "live" not in times:
        raise SystemExit(f"{argv[0]} on a pty: no alert state within {RUN_DEADLINE_S:g}s")
    return times


def part_startup(directory: Path, prometheus: str, runs: int, pty: bool) -> float:
    """Print part 1; return the bare app's RSS (the baseline of part 3)."""
    config = write_config(directory / "startup.yaml", prometheus, closed_ports(), directory)
    # Where PYTHONDONTWRITEBYTECODE is set (this sandbox) the editable oncall package would be
    # compiled from source at every start; a user's first run writes its .pyc files once.
    # The children import this folder's modules too: compiled alike.
    for folder in (ROOT / "oncall", ROOT / "scripts" / "bench"):
        subprocess.run([sys.executable, "-m", "compileall", "-q", str(folder)], check=True)
    for kind, target in (("bare", prometheus), ("oncall", str(config))):
        headless_run(kind, target, directory)  # warm the page cache and .pyc files
    headless: dict[str, list[dict[str, float]]] = {"bare": [], "oncall": []}
    for _ in range(runs):  # interleaved, so a busy moment hurts both alike
        headless["bare"].append(headless_run("bare", prometheus, directory))
        headless["oncall"].append(headless_run("oncall", str(config), directory))
    med = {k: {f: statistics.median(r[f] for r in v) for f in v[0]} for k, v in headless.items()}
    base = med["bare"]
    print(
        f"start-up: median of {runs} fresh processes, {os.cpu_count()} CPUs, "
        f"{WIDTH}x{HEIGHT}, {len(PACKS)} packs against a real prometheus"
    )
    print(f"{'':44} {'seconds':>8} {'x baseline':>11}")
    rows = [
        ("headless, baseline: bare app first frame", base["first"], base["first"]),
        ("headless, baseline: bare app states shown", base["live"], base["live"]),
        ("headless, oncall first frame", med["oncall"]["first"], base["first"]),
        ("headless, oncall live alert states", med["oncall"]["live"], base["live"]),
    ]
    if pty:
        bare_argv = child_argv("bare", prometheus, "--out", str(directory / "bare-pty.json"))
        oncall_argv = [ONCALL, "--config", str(config)]
        pty_run(bare_argv, b"waiting")
        pty_run(oncall_argv, b"Alert")
        term: dict[str, list[dict[str, float]]] = {"bare": [], "oncall": []}
        for _ in range(runs):
            term["bare"].append(pty_run(bare_argv, b"waiting"))
            term["oncall"].append(pty_run(oncall_argv, b"Alert"))
        tmed = {k: {f: statistics.median(r[f] for r in v) for f in v[0]} for k, v in term.items()}
        tb = tmed["bare"]
        rows += [
            ("pty, baseline: bare app first bytes", tb["bytes"], tb["bytes"]),
            ("pty, baseline: bare app first frame", tb["frame"], tb["frame"]),
            ("pty, baseline: bare app states shown", tb["live"], tb["live"]),
            ("pty, `oncall` first bytes", tmed["oncall"]["bytes"], tb["bytes"]),
            ("pty, `oncall` first frame (header)", tmed["oncall"]["frame"], tb["frame"]),
            ("pty, `oncall` live alert states", tmed["oncall"]["live"], tb["live"]),
        ]
    for name, seconds, baseline in rows:
        print(f"{name:44} {seconds:8.3f} {seconds / baseline:11.2f}")
    print(
        f"RSS at the live frame: bare app {base['rss_mb']:.0f} MB, "
        f"oncall {med['oncall']['rss_mb']:.0f} MB"
    )
    print()
    return base["rss_mb"]
