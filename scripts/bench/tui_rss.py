"""Part 4 of `tui.py`: the app's RSS over minutes of 1 s refreshes, and its growth per hour.

The soak itself runs in a child process (`tui.py _child soak`, see tui_soak.child_soak); with
`trace_growth` it also reports the allocation sites that grew most (tui_soak.trace_report).
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
from pathlib import Path
from typing import Any

from scripts.bench.tui_backends import closed_ports, write_config
from scripts.bench.tui_common import HEIGHT, ONCALL, ROOT, SAMPLE_EVERY_S, WIDTH, child_argv


def slope_per_hour(samples: list[tuple[float, float]]) -> float:
    if len(samples) < 2:
        return float("nan")
    xs, ys = [s[0] for s in samples], [s[1] for s in samples]
    mx, my = statistics.fmean(xs), statistics.fmean(ys)
    var = sum((x - mx) ** 2 for x in xs)
    return sum((x - mx) * (y - my) for x, y in samples) / var * 3600 if var else float("nan")


def soak_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ONCALL_")}
    env["ONCALL_ALERTS__REFRESH"] = "1s"
    return env


def run_soak(config: Path, seconds: float, out: Path, trace_growth: int = 0) -> None:
    """The app headless against config for `seconds` (tui_soak.child_soak), samples into out;
    with `trace_growth` N, the N allocation sites that grew most from minute 2 to the end are
    printed (tracing from minute 1: a diagnosis, its RSS figures do not count)."""
    argv = child_argv("soak", str(config), "--out", str(out), "--seconds", str(seconds))
    report = out.with_suffix(".growth.txt")
    if trace_growth:
        argv += ["--trace-growth", str(trace_growth), "--trace-report", str(report)]
        argv += ["--trace-from", str(min(60.0, seconds / 4))]
        argv += ["--trace-base", str(min(120.0, seconds / 2))]
    subprocess.run(
        argv,
        check=True,
        env=soak_env(),
        stdout=subprocess.DEVNULL,
        cwd=ROOT,
        timeout=seconds + 120 + (300 if trace_growth else 0),  # snapshots take minutes
    )
    if trace_growth and report.exists():
        print(report.read_text())


def part_rss(
    directory: Path, prometheus: str, minutes: float, against: str, baseline_mb: float | None
) -> None:
    seconds = minutes * 60
    drill = directory / "drill"
    config = drill / "oncall.yaml"
    if against == "prometheus":
        config = write_config(directory / "soak.yaml", prometheus, closed_ports(), directory)
    out = directory / "soak.jsonl"
    try:
        if against == "drill":
            up = [ONCALL, "drill", "up", "--dir", str(drill), "--for-scale", "0.05"]
            up += ["--scenario", "kv-cache-pressure"]
            subprocess.run(up, check=True, stdout=subprocess.DEVNULL, timeout=120, cwd=ROOT)
        run_soak(config, seconds, out)
    finally:
        if against == "drill":
            subprocess.run(
                [ONCALL, "drill", "down", "--dir", str(drill)],
                check=False,
                stdout=subprocess.DEVNULL,
                timeout=60,
            )
    rows = [json.loads(line) for line in out.read_text().splitlines() if line.strip()]
    label = "a drill with kv-cache-pressure" if against == "drill" else "the bench prometheus"
    summarize_soak(rows, minutes, label, baseline_mb)


def summarize_soak(
    rows: list[dict[str, Any]], minutes: float, label: str, baseline_mb: float | None
) -> None:
    """Print the soak's RSS: start, warm, end, max, growth in the second half."""
    seconds = minutes * 60
    points = [(r["t"], r["rss_mb"]) for r in rows]
    after = [p for p in points if p[0] >= seconds / 2] or points
    start, warm, end = points[0][1], after[0][1], points[-1][1]
    print(
        f"RSS of the app (headless, {WIDTH}x{HEIGHT}), refresh 1 s, {minutes:g} min against "
        f"{label}"
        f"; sample every {SAMPLE_EVERY_S:g} s"
    )
    last = rows[-1]
    print(
        f"  alerts {last['alerts']}, firing at the end {last['firing']}, "
        f"checklist runs {last['runs']}"
    )
    if "refreshes" in last:  # what the board held: the RSS is that of a board with them
        print(
            f"  at the end: {last['instances']} instances held, {last['stale']} rules stale; "
            f"refreshes {last['refreshes']}, failed {last['failed']}"
        )
        print(
            f"  refresh wall mean {last['refresh_s_mean']:.2f} s, max {last['refresh_s_max']:.2f}"
            f" s; mean {last['gap_s_mean']:.2f} s from one refresh's start to the next's"
        )
        for reason, count in last["reasons"].items():
            print(f"  failed {count}x: {reason}")
    half = after[0][0]
    second = [r for r in rows if r["t"] >= half]
    workers = [r["workers"] for r in second]
    print(f"  second half: workers {min(workers)}-{max(workers)}; " + heap_change(second))
    base = (
        f" ({start / baseline_mb:.1f}x the bare app's {baseline_mb:.0f} MB)" if baseline_mb else ""
    )
    print(
        f"  start {start:.1f} MB{base}, after {after[0][0]:.0f} s {warm:.1f} MB, "
        f"end ({points[-1][0]:.0f} s) {end:.1f} MB, max {max(p[1] for p in points):.1f} MB"
    )
    print(
        f"  second half: {end - warm:+.2f} MB in {(points[-1][0] - after[0][0]) / 60:.1f} min; "
        f"slope {slope_per_hour(after):+.2f} MB/hour (least squares, extrapolated)"
    )
    print("  samples (s: MB): " + " ".join(f"{t:.0f}:{mb:.1f}" for t, mb in points))
    print()


def heap_change(rows: list[dict[str, Any]]) -> str:
    """Python's live blocks and malloc's heap (tui_soak.heap_row), first row -> last."""
    first, last = rows[0], rows[-1]
    text = f"Python's allocated blocks {first['py_blocks']} -> {last['py_blocks']}"
    if "malloc_used_mb" in last:
        text += "; malloc " + ", ".join(
            f"{what} {first[key]:.1f} -> {last[key]:.1f} MB"
            for what, key in (
                ("in use", "malloc_used_mb"),
                ("free but kept", "malloc_free_mb"),
                ("mmapped", "malloc_mmap_mb"),
            )
        )
    return text
