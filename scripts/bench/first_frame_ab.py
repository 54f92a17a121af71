"""The app's first frame on a pseudo-terminal: this tree against an earlier revision, interleaved.

`tui.py` compares the first frame with a bare Textual app measured in the same run; but the
machine's speed drifts between sessions (the bare app took 0.49 s on 2026-11-30 and 0.39-0.43 s
on 2026-12-01), so a ratio recorded on one day is no yardstick for another. This runs both
versions of oncall, and the bare app, round after round in alternating order against one
Prometheus and one settings file, and prints the medians: the "no worse than before" of
docs/PERFORMANCE.md, measured rather than remembered.

The revision is exported with `git archive` into a temporary directory and run as
`python -m oncall` with that directory first on PYTHONPATH (the editable install's finder comes
after it); this tree runs the same way. Both are byte-compiled first, as `pip install` leaves
them.

    .venv/bin/python scripts/bench/first_frame_ab.py cc35dca [--rounds 15]
"""

from __future__ import annotations

import argparse
import io
import statistics
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # `scripts.bench` from anywhere

from scripts.bench.tui_backends import bench_prometheus, closed_ports, write_config
from scripts.bench.tui_common import ROOT, child_argv
from scripts.bench.tui_startup import pty_run


def export(revision: str, into: Path) -> Path:
    """The tracked files of `revision` under `into`; raises SystemExit if git does not know it."""
    archive = subprocess.run(
        ["git", "-C", str(ROOT), "archive", "--format=tar", revision],
        capture_output=True,
        check=False,
        timeout=120,
    )
    if archive.returncode != 0:
        raise SystemExit(f"git archive {revision}: {archive.stderr.decode().strip()}")
    with tarfile.open(fileobj=io.BytesIO(archive.stdout)) as tar:
        tar.extractall(into, filter="data")
    return into


def accepts(tree: Path, config: Path) -> bool:
    done = subprocess.run(
        [sys.executable, "-m", "oncall", "--config", str(config), "config", "show"],
        env={"PYTHONPATH": str(tree), "PATH": "/usr/bin:/bin"},
        capture_output=True,
        check=False,
        timeout=60,
    )
    return done.returncode == 0


#: A kind of start: its argv, the bytes that mark its first frame, what it adds to the env.
Start = tuple[list[str], bytes, dict[str, str] | None]


def interleaved(kinds: dict[str, Start], rounds: int) -> dict[str, list[float]]:
    """Each kind's first frame, `rounds` times, in alternating order (neither always first)."""
    for argv, marker, env in kinds.values():  # the page cache warmed
        pty_run(argv, marker, env)
    frames: dict[str, list[float]] = {kind: [] for kind in kinds}
    for i in range(rounds):
        for kind in list(kinds) if i % 2 == 0 else list(reversed(kinds)):
            argv, marker, env = kinds[kind]
            frames[kind].append(pty_run(argv, marker, env)["frame"])
    return frames


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("revision", help="the earlier revision, e.g. cc35dca")
    parser.add_argument("--rounds", type=int, default=15)
    args = parser.parse_args()
    if not 1 <= args.rounds <= 100:
        parser.error("bounded: --rounds 1..100")
    with tempfile.TemporaryDirectory(prefix="oncall-bench-ab-") as tmp:
        directory = Path(tmp)
        trees = {"before": export(args.revision, directory / "before"), "this": ROOT}
        for tree in trees.values():
            compile_all = [sys.executable, "-m", "compileall", "-q", str(tree / "oncall")]
            subprocess.run(compile_all, check=True, timeout=300)
        with bench_prometheus(directory) as prometheus:
            config = write_config(directory / "ab.yaml", prometheus, closed_ports(), directory)
            for name, tree in trees.items():
                if not accepts(tree, config):
                    raise SystemExit(f"{name} ({tree}) refuses the bench settings {config}")
            bare = child_argv("bare", prometheus, "--out", str(directory / "bare.json"))
            oncall = [sys.executable, "-m", "oncall", "--config", str(config)]
            kinds: dict[str, Start] = {"bare": (bare, b"waiting", None)}
            for name, tree in trees.items():
                kinds[name] = (oncall, b"Alert", {"PYTHONPATH": str(tree)})
            frames = interleaved(kinds, args.rounds)
    median = {kind: statistics.median(times) for kind, times in frames.items()}
    print(f"pty first frame: median of {args.rounds} interleaved rounds; before = {args.revision}")
    print(f"{'':8} {'seconds':>8} {'x bare':>7} {'min':>7} {'max':>7}")
    for kind, seconds in median.items():
        low, high = min(frames[kind]), max(frames[kind])
        print(f"{kind:8} {seconds:8.3f} {seconds / median['bare']:7.2f} {low:7.3f} {high:7.3f}")
    print(f"this / before: {median['this'] / median['before']:.3f}")
    # Paired by round (the two ran back to back, so a busy moment hurts both): steadier.
    paired = sorted(t / b for t, b in zip(frames["this"], frames["before"], strict=True))
    quartiles = statistics.quantiles(paired, n=4) if len(paired) > 1 else paired * 3
    print(
        f"this / before, paired by round: median {statistics.median(paired):.3f}, "
        f"quartiles {quartiles[0]:.3f}-{quartiles[2]:.3f}, this faster in "
        f"{sum(r < 1 for r in paired)} of {len(paired)} rounds"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
