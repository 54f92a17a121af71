"""The app against its budgets: first frame, live alert states, key press to repaint, RSS.

Each figure comes with a baseline measured in the same run, so results compare across machines.

1. Start-up (docs/PERFORMANCE.md: first frame <= 0.8 s, live alert states <= 1.5 s after launch).
   A real prometheus serves the packs' rules (`alerts/*.yaml`, evaluated every second); each run is
   a fresh process, timed from just before it is spawned:
   - headless: the app under Textual's headless driver (`run_async(headless=True)`, 80x24).
     "first frame" is the first screen update Textual hands to its driver (`App._display`,
     the call that writes to the terminal when there is one); "live states" the first update
     after the board holds a refresh's states. Baseline: a bare Textual app with one Static,
     which fetches the same `/api/v1/rules` with httpx and shows the states.
   - pty: `oncall --config FILE` on a pseudo-terminal (80x24, TERM=xterm-256color), as a user
     starts it: the time until its first bytes, until its first frame (the board's column
     header "Alert") and until the first state ("inactive" / "firing") is on the terminal;
     then `q`. Baseline: the same bare app on a pseudo-terminal.
2. Key press to repaint while every backend hangs (docs/PERFORMANCE.md: p99 <= 50 ms). Prometheus,
   Redis, vLLM and the Kubernetes API point at loopback listeners that accept connections and
   never answer. In this process, under `app.run_test()`: wait for the board's rows (every
   alert `unknown`, stale), open the first alert (its checklist starts, every probe hangs;
   the checklist machinery and the Kubernetes client are imported in threads), go back, then
   press down/up N times. Each press is timed from handing the key to Pilot until Textual
   hands the driver the frame that shows the moved cursor (`App._display`, with the table's
   cursor on the new row). Baseline: a bare app with a DataTable of as many rows, same presses.
3. Key press to repaint with one of two contexts hung (docs/PERFORMANCE.md; part 2's
   budget, p99 <= 50 ms): contexts `live` (this prometheus) and `hung` (hung listeners) on
   one board; a hung alert opened, then down/up pressed until `live` refreshed at least ten
   times meanwhile, each gap between its refreshes <= 2 intervals (tui_contexts.py). With
   `--contexts-hung` only this part runs, and the exit status is 1 when it is over budget.
4. RSS (docs/PERFORMANCE.md: <= 150 MB; growth <= 1 MB/hour at a 1 s refresh). A fresh process
   runs the app headless for `--minutes` at `alerts.refresh: 1s`, sampling its RSS
   (/proc/self/statm) every 10 s. Against a drill with `kv-cache-pressure` injected (an alert fires
   and its checklist runs; the process re-runs the checklist of every firing alert each minute, as
   an operator pressing `r` would), or with `--rss-against prometheus` the bench prometheus (all
   alerts inactive, no checklists). Growth per hour: the least-squares slope through the samples of
   the second half of the run, times 3600 (the first minutes are warm-up: the first checklists, the
   Kubernetes client, caches). Baseline: the bare app's RSS at its live frame (from part 1).

Everything is bounded: runs, presses and minutes by the options, each wait by a deadline.
The parts live next to this file: tui_startup.py, tui_keys.py, tui_contexts.py, tui_rss.py;
the child processes in tui_child.py (with the frame clock); the backends (prometheus from the
test harness, hung listeners) in tui_backends.py.

    .venv/bin/python scripts/bench/tui.py [--runs 5] [--presses 300] [--minutes 10]
        [--rss-against drill|prometheus] [--skip startup,pty,keys,contexts,rss] [--why]
    .venv/bin/python scripts/bench/tui.py --contexts-hung [--presses 300]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

# The children run this file too, and their start-up is measured: only the standard library
# here; the parts (and the test harness they use) are imported in main(). Run as a script, so
# the checkout is put on the path for `scripts.bench` and `tests.harness`.
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))


def main() -> int:
    if sys.argv[1:2] == ["_child"]:
        from scripts.bench.tui_child import child_main

        return child_main(sys.argv[2:])
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--runs", type=int, default=5, help="start-up runs (each kind)")
    parser.add_argument("--presses", type=int, default=300)
    parser.add_argument("--minutes", type=float, default=10.0, help="length of the RSS soak")
    parser.add_argument("--rss-against", choices=("drill", "prometheus"), default="drill")
    parser.add_argument("--skip", default="", help="comma-separated: startup,pty,keys,contexts,rss")
    parser.add_argument(
        "--why",
        action="store_true",
        help="part 2: print what ran during each press over 30 ms (tui_stalls.py)",
    )
    parser.add_argument(
        "--contexts-hung",
        action="store_true",
        help="only part 3 (one of two contexts hung); exit status 1 when over budget",
    )
    args = parser.parse_args()
    skip = {s.strip() for s in args.skip.split(",") if s.strip()}
    if args.contexts_hung:
        skip = {"startup", "pty", "keys", "rss"}
    if not 1 <= args.runs <= 50 or not 1 <= args.presses <= 5000 or not 0 < args.minutes <= 120:
        parser.error("bounded: --runs 1..50, --presses 1..5000, --minutes (0, 120]")
    from oncall.cli.main import cap_frame_rate

    cap_frame_rate()  # the in-process parts (and their bare baselines) as `oncall` draws
    import pytest

    from scripts.bench.tui_backends import bench_prometheus
    from scripts.bench.tui_contexts import part_contexts
    from scripts.bench.tui_keys import part_keys
    from scripts.bench.tui_rss import part_rss
    from scripts.bench.tui_startup import part_startup

    within = True
    try:
        with (
            tempfile.TemporaryDirectory(prefix="oncall-bench-tui-") as tmp,
            bench_prometheus(Path(tmp)) as prometheus,
        ):
            directory = Path(tmp)
            baseline_mb = None
            if "startup" not in skip:
                baseline_mb = part_startup(directory, prometheus, args.runs, "pty" not in skip)
            if "keys" not in skip:
                part_keys(directory, args.presses, why=args.why)
            if "contexts" not in skip:
                within = part_contexts(directory, prometheus, args.presses)
            if "rss" not in skip:
                part_rss(directory, prometheus, args.minutes, args.rss_against, baseline_mb)
    except pytest.fail.Exception as exc:  # the harness gave up on a server (with its log)
        raise SystemExit(f"tui.py: {exc}") from None
    return 0 if within else 1


if __name__ == "__main__":
    raise SystemExit(main())
