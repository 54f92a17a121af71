"""The app against its budgets: first frame, live alert states, key press to repaint, RSS.

Each figure comes with a baseline measured in the same run, so results compare across machines.

1. Start-up (DESIGN §6: first frame <= 0.8 s, live alert states <= 1.5 s after launch). A real
   prometheus serves the packs' rules (`alerts/*.yaml`, evaluated every second); each run is
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
2. Key press to repaint while every backend hangs (DESIGN §6: p99 <= 50 ms). Prometheus,
   Redis, vLLM and the Kubernetes API point at loopback listeners that accept connections and
   never answer. In this process, under `app.run_test()`: wait for the board's rows (every
   alert `unknown`, stale), open the first alert (its checklist starts, every probe hangs;
   the checklist machinery and the Kubernetes client are imported in threads), go back, then
   press down/up N times. Each press is timed from handing the key to Pilot until Textual
   hands the driver the frame that shows the moved cursor (`App._display`, with the table's
   cursor on the new row). Baseline: a bare app with a DataTable of as many rows, same presses.
3. RSS (DESIGN §6: <= 150 MB; growth <= 1 MB/hour at a 1 s refresh). A fresh process runs the
   app headless for `--minutes` at `alerts.refresh: 1s`, sampling its RSS (/proc/self/statm)
   every 10 s. Against a drill with `kv-cache-pressure` injected (an alert fires and its
   checklist runs; the process re-runs the checklist of every firing alert each minute, as an
   operator pressing `r` would), or with `--rss-against prometheus` the bench prometheus (all
   alerts inactive, no checklists). Growth per hour: the least-squares slope through the
   samples of the second half of the run, times 3600 (the first minutes are warm-up: the
   first checklists, the Kubernetes client, caches). Baseline: the bare app's RSS at its live
   frame (from part 1).

Everything is bounded: runs, presses and minutes by the options, each wait by a deadline.

    .venv/bin/python scripts/bench/tui.py [--runs 5] [--presses 300] [--minutes 10]
        [--rss-against drill|prometheus] [--skip startup,pty,keys,rss]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import fcntl
import gc
import importlib
import json
import os
import select
import shutil
import socket
import statistics
import struct
import subprocess
import sys
import tempfile
import termios
import threading
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

# Only the standard library at module level: a child process's start-up is what part 1
# measures, and the child is this file. Textual and oncall are imported where they are used.
if TYPE_CHECKING:
    from rich.console import RenderableType
    from textual.pilot import Pilot
    from textual.screen import Screen

ROOT = Path(__file__).resolve().parents[2]
PACKS = ("ai-service", "platform")
ONCALL = str(Path(sys.executable).parent / "oncall")
WIDTH, HEIGHT = 80, 24
RUN_DEADLINE_S = 30.0  # one start-up run, one wait for the board's rows
SAMPLE_EVERY_S = 10.0


# -- helpers shared by the parent and the children --------------------------------------------


def rss_mb() -> float:
    """This process's resident set size (/proc/self/statm: pages)."""
    resident = int(Path("/proc/self/statm").read_text().split()[1])
    return resident * os.sysconf("SC_PAGE_SIZE") / 2**20


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def closed_ports() -> dict[str, str]:
    """Redis, vLLM and Kubernetes URLs nobody listens on: refused at once."""
    return {
        "redis": f"redis://127.0.0.1:{free_port()}/0",
        "vllm": f"http://127.0.0.1:{free_port()}",
        "kubernetes": f"http://127.0.0.1:{free_port()}",
    }


def write_config(path: Path, prometheus: str, dead: dict[str, str], directory: Path) -> Path:
    """Settings for the app: this Prometheus; Redis, vLLM and Kubernetes at `dead` URLs."""
    kubeconfig = directory / f"{path.stem}.kubeconfig"
    kubeconfig.write_text(
        json.dumps(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": "bench", "cluster": {"server": dead["kubernetes"]}}],
                "users": [{"name": "bench", "user": {"token": "bench"}}],
                "contexts": [{"name": "bench", "context": {"cluster": "bench", "user": "bench"}}],
                "current-context": "bench",
            }
        )
    )
    settings = {
        "context": {"name": "bench"},
        "prometheus": {"url": prometheus, "timeout": "2s"},
        "kubernetes": {"kubeconfig": str(kubeconfig), "namespace": "ai"},
        "redis": {"url": dead["redis"], "timeout": "1s"},
        "vllm": {"urls": [dead["vllm"]]},
        "gpu": {"source": "dcgm"},
        "alerts": {"packs": list(PACKS), "refresh": "1s"},
        "audit": {"path": str(directory / "audit.jsonl")},
    }
    path.write_text(json.dumps(settings, indent=1))  # JSON is YAML
    return path


# -- child processes: one start-up, or one soak ------------------------------------------------


class FrameLog:
    """When Textual handed the driver a screen update, and a waiter for a particular one."""

    def __init__(self) -> None:
        self.first: float | None = None
        self.live: float | None = None
        self.count = 0
        self.waiter: tuple[Callable[[], bool], asyncio.Future[float]] | None = None

    def frame(self, live: bool) -> bool:
        """Record a frame; True when it is the first live one."""
        now = time.monotonic()
        self.count += 1
        if self.first is None:
            self.first = now
        if self.waiter is not None:
            wanted, future = self.waiter
            if not future.done() and wanted():
                future.set_result(time.perf_counter())
        if live and self.live is None:
            self.live = now
            return True
        return False


def timed_oncall(settings: Any, log: FrameLog, *, exit_when_live: bool) -> Any:
    """`OncallApp` telling `log` of every frame; live once the board holds alert states."""
    import oncall.tui.app

    class TimedOncall(oncall.tui.app.OncallApp):
        # Textual reads CSS_PATH next to the module of the class: point it at the app's.
        CSS_PATH = str(Path(oncall.tui.app.__file__).with_name("oncall.tcss"))

        def _display(self, screen: Screen[Any], renderable: RenderableType | None) -> None:
            super()._display(screen, renderable)
            frame = renderable is not None and not self._batch_count
            if frame and log.frame(live=bool(self.book.statuses)) and exit_when_live:
                self.exit()

    return TimedOncall(settings)


def child_startup(kind: str, target: str, out: Path) -> None:
    """One start-up: `kind` oncall (target: a config file) or bare (target: Prometheus URL)."""
    headless = not sys.stdout.isatty()
    log = FrameLog()
    if kind == "oncall":
        from oncall.cli.main import prepare_app_start

        prepare_app_start()  # as `oncall` does before it loads the settings
        from oncall.settings.loader import load_settings

        app = timed_oncall(load_settings(config=Path(target)).settings, log, exit_when_live=True)
    else:
        app = bare_app(target, log, exit_when_live=headless)
    asyncio.run(_run_bounded(app, headless))
    out.write_text(json.dumps({"first": log.first, "live": log.live, "rss_mb": rss_mb()}))


async def _run_bounded(app: Any, headless: bool) -> None:
    async def deadline() -> None:
        await asyncio.sleep(RUN_DEADLINE_S)
        app.exit()

    # Not an auto_pilot: run_async waits for that to finish even after the app exited.
    stop = asyncio.ensure_future(deadline())
    try:
        await app.run_async(headless=headless, size=(WIDTH, HEIGHT) if headless else None)
    finally:
        stop.cancel()


def bare_app(prometheus: str, log: FrameLog, *, exit_when_live: bool) -> Any:
    """The baseline: a Textual app with one Static that shows the rules' states once fetched.

    On a terminal it stays up until `q` (the parent sends it once it saw the states).
    """
    from textual.app import App, ComposeResult
    from textual.binding import Binding, BindingType
    from textual.widgets import Static

    class Bare(App[None]):
        BINDINGS: ClassVar[list[BindingType]] = [Binding("q", "quit")]
        fetched = False

        def compose(self) -> ComposeResult:
            yield Static("waiting", id="states")

        def on_mount(self) -> None:
            self.run_worker(self.fetch(), exit_on_error=False)

        async def fetch(self) -> None:
            # In a thread, as the app defers its own heavy imports: not in the first frame's way.
            httpx = await asyncio.to_thread(importlib.import_module, "httpx")
            async with httpx.AsyncClient(base_url=prometheus, timeout=5, trust_env=False) as c:
                body = (await c.get("/api/v1/rules", params={"type": "alert"})).json()
            states = [r["state"] for g in body["data"]["groups"] for r in g["rules"]]
            self.query_one("#states", Static).update(" ".join(states))
            self.fetched = True

        def _display(self, screen: Screen[Any], renderable: RenderableType | None) -> None:
            super()._display(screen, renderable)
            frame = renderable is not None and not self._batch_count
            if frame and log.frame(live=self.fetched) and exit_when_live:
                self.exit()

    return Bare()


def child_soak(config: str, seconds: float, rerun_s: float, out: Path) -> None:
    """Run the app headless for `seconds`, writing an RSS sample every SAMPLE_EVERY_S."""
    os.environ.setdefault("PYDANTIC_DISABLE_PLUGINS", "__all__")
    from oncall.settings.loader import load_settings
    from oncall.tui.app import OncallApp

    app = OncallApp(load_settings(config=Path(config)).settings)

    async def soak(pilot: Pilot[Any]) -> None:
        started = time.monotonic()
        next_rerun = started + rerun_s
        with out.open("w") as samples:
            while (elapsed := time.monotonic() - started) < seconds:
                book = app.book
                firing = [n for n, s in book.statuses.items() if s.state == "firing"]
                row = {
                    "t": round(elapsed, 1),
                    "rss_mb": round(rss_mb(), 2),
                    "alerts": len(book.statuses),
                    "firing": len(firing),
                    "runs": book.generation,
                    "workers": len(app.workers),
                    "objects": len(gc.get_objects()),
                }
                samples.write(json.dumps(row) + "\n")
                samples.flush()
                if rerun_s and time.monotonic() >= next_rerun:
                    for name in firing:
                        app.start_checklist(name)
                    next_rerun += rerun_s
                await asyncio.sleep(min(SAMPLE_EVERY_S, max(0.0, seconds - elapsed)))
        app.exit()

    asyncio.run(app.run_async(headless=True, size=(WIDTH, HEIGHT), auto_pilot=soak))


def child_main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="tui.py _child")
    parser.add_argument("mode", choices=("oncall", "bare", "soak"))
    parser.add_argument("target")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--seconds", type=float, default=120.0)
    parser.add_argument("--rerun", type=float, default=60.0)
    args = parser.parse_args(argv)
    if args.mode == "soak":
        child_soak(args.target, args.seconds, args.rerun, args.out)
    else:
        child_startup(args.mode, args.target, args.out)
    return 0


def child_argv(*args: str) -> list[str]:
    return [sys.executable, str(Path(__file__).resolve()), "_child", *args]


# -- part 1: start-up --------------------------------------------------------------------------


def start_prometheus(directory: Path) -> tuple[subprocess.Popen[bytes], str]:
    """A real prometheus evaluating the packs' rules every second; waits for one evaluation."""
    port = free_port()
    rules = [str(ROOT / "alerts" / f"{pack}.yaml") for pack in PACKS]
    config = directory / "prometheus.yml"
    config.write_text(json.dumps({"global": {"evaluation_interval": "1s"}, "rule_files": rules}))
    proc = subprocess.Popen(
        [
            shutil.which("prometheus") or "prometheus",
            f"--config.file={config}",
            f"--storage.tsdb.path={directory / 'data'}",
            f"--web.listen-address=127.0.0.1:{port}",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(f"{url}/api/v1/rules?type=alert", timeout=1) as resp:  # noqa: S310 - loopback
                groups = json.load(resp)["data"]["groups"]
            evaluated = [r["lastEvaluation"] for g in groups for r in g["rules"]]
            if evaluated and not any(e.startswith("0001") for e in evaluated):
                return proc, url
        except (OSError, ValueError, KeyError):
            pass
        time.sleep(0.1)
    proc.kill()
    proc.wait()
    raise SystemExit("prometheus did not start or did not evaluate the rules")


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


def pty_run(argv: list[str], frame_marker: bytes) -> dict[str, float]:
    """Spawn on a pseudo-terminal; seconds until first bytes, first frame, first alert state."""
    master, slave = os.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", HEIGHT, WIDTH, 0, 0))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ONCALL_", "TEXTUAL"))}
    env.update(TERM="xterm-256color", COLORTERM="truecolor")
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
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(ROOT / "oncall")], check=True)
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


# -- part 2: key press to repaint while every backend hangs ------------------------------------


class SilentListeners:
    """Loopback listeners that accept connections and never answer (a hung backend)."""

    MAX_HELD = 4096  # bounded: the bench runs for seconds, the app reconnects at most per timeout

    def __init__(self, count: int) -> None:
        self.sockets: list[socket.socket] = []
        for _ in range(count):
            sock = socket.socket()
            sock.bind(("127.0.0.1", 0))
            sock.listen(128)
            sock.settimeout(0.2)
            self.sockets.append(sock)
        self.held: list[socket.socket] = []
        self.accepted = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._accept, name="silent", daemon=True)

    def url(self, index: int, scheme: str = "http") -> str:
        return f"{scheme}://127.0.0.1:{self.sockets[index].getsockname()[1]}"

    def _accept(self) -> None:
        while not self._stop.is_set():
            for sock in self.sockets:
                with contextlib.suppress(TimeoutError, OSError):
                    conn, _ = sock.accept()
                    self.accepted += 1
                    self.held.append(conn)
                    if len(self.held) > self.MAX_HELD:
                        self.held.pop(0).close()

    def __enter__(self) -> SilentListeners:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join(timeout=5)
        for sock in [*self.held, *self.sockets]:
            sock.close()


def _cursor_at(cursor: Callable[[], int], row: int) -> Callable[[], bool]:
    return lambda: cursor() == row


async def press_loop(
    pilot: Pilot[Any],
    log: FrameLog,
    cursor: Callable[[], int],
    n: int,
) -> tuple[list[float], int]:
    """Press down/up n times; seconds from each press to the frame showing the moved cursor."""
    latencies: list[float] = []
    missed = 0
    loop = asyncio.get_running_loop()
    for i in range(n):
        key, row = ("down", 1) if i % 2 == 0 else ("up", 0)
        future: asyncio.Future[float] = loop.create_future()
        log.waiter = (_cursor_at(cursor, row), future)
        started = time.perf_counter()
        press = asyncio.ensure_future(pilot.press(key))
        try:
            latencies.append(await asyncio.wait_for(future, timeout=2.0) - started)
        except TimeoutError:
            missed += 1
        await press
        log.waiter = None
    return latencies, missed


async def keys_oncall(config: Path, presses: int) -> tuple[list[float], int, int]:
    from textual.widgets import DataTable

    from oncall.settings.loader import load_settings

    log = FrameLog()
    app = timed_oncall(load_settings(config=config, environ={}).settings, log, exit_when_live=False)
    async with app.run_test(size=(WIDTH, HEIGHT)) as pilot:
        deadline = time.monotonic() + RUN_DEADLINE_S
        while len(app.book.statuses) < 2 and time.monotonic() < deadline:
            await pilot.pause(0.1)
        if len(app.book.statuses) < 2:
            raise SystemExit("keys: the board got no rows from the hung backends")
        await pilot.press("enter")  # the incident: its checklist starts, every probe hangs
        await pilot.pause(0.2)
        await pilot.press("escape")
        if app.screen is not app.board:
            raise SystemExit(f"keys: expected the board, got {app.screen!r}")
        table = app.board.query_one("#alerts", DataTable)
        table.move_cursor(row=0, animate=False)
        await pilot.pause()
        latencies, missed = await press_loop(pilot, log, lambda: table.cursor_row, presses)
        rows = table.row_count
    return latencies, missed, rows


async def keys_bare(rows: int, presses: int) -> tuple[list[float], int]:
    from textual.app import App, ComposeResult
    from textual.widgets import DataTable

    log = FrameLog()

    class BareTable(App[None]):
        def compose(self) -> ComposeResult:
            table: DataTable[str] = DataTable(cursor_type="row")
            table.add_columns("State", "Alert", "When", "Findings")
            for i in range(rows):
                table.add_row("○ inactive", f"Alert{i}", "", "")
            yield table

        def _display(self, screen: Screen[Any], renderable: RenderableType | None) -> None:
            super()._display(screen, renderable)
            if renderable is not None and not self._batch_count:
                log.frame(live=False)

    app = BareTable()
    async with app.run_test(size=(WIDTH, HEIGHT)) as pilot:
        table = app.query_one(DataTable)
        await pilot.pause()
        return await press_loop(pilot, log, lambda: table.cursor_row, presses)


def p99(values: list[float]) -> float:
    return (
        statistics.quantiles(values, n=100, method="inclusive")[98]
        if len(values) > 1
        else (values[0] if values else float("nan"))
    )


def part_keys(directory: Path, presses: int) -> None:
    with SilentListeners(4) as silent:
        dead = {
            "redis": silent.url(1, "redis") + "/0",
            "vllm": silent.url(2),
            "kubernetes": silent.url(3),
        }
        config = write_config(directory / "hung.yaml", silent.url(0), dead, directory)
        started = time.monotonic()
        oncall, missed, rows = asyncio.run(keys_oncall(config, presses))
        elapsed = time.monotonic() - started
        held = silent.accepted
    bare, bare_missed = asyncio.run(keys_bare(rows, presses))
    print(
        f"key press to repaint, every backend hanging: {presses} presses (down/up) on the "
        f"board, {rows} rows, {WIDTH}x{HEIGHT}; {held} connections held unanswered over "
        f"{elapsed:.0f} s"
    )
    print(f"{'':34} {'p50 ms':>7} {'p99 ms':>7} {'max ms':>7} {'p99 x base':>11} {'missed':>7}")
    base = p99(bare)
    for name, values, lost in (
        ("baseline: bare app + DataTable", bare, bare_missed),
        ("oncall board, backends hung", oncall, missed),
    ):
        print(
            f"{name:34} {statistics.median(values) * 1000:7.1f} {p99(values) * 1000:7.1f} "
            f"{max(values) * 1000:7.1f} {p99(values) / base:11.2f} {lost:7d}"
        )
    print()


# -- part 3: RSS over minutes of 1 s refreshes -------------------------------------------------


def slope_per_hour(samples: list[tuple[float, float]]) -> float:
    if len(samples) < 2:
        return float("nan")
    xs, ys = [s[0] for s in samples], [s[1] for s in samples]
    mx, my = statistics.fmean(xs), statistics.fmean(ys)
    var = sum((x - mx) ** 2 for x in xs)
    return sum((x - mx) * (y - my) for x, y in samples) / var * 3600 if var else float("nan")


def part_rss(
    directory: Path, prometheus: str, minutes: float, against: str, baseline_mb: float | None
) -> None:
    seconds = minutes * 60
    env = {k: v for k, v in os.environ.items() if not k.startswith("ONCALL_")}
    env["ONCALL_ALERTS__REFRESH"] = "1s"
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
        subprocess.run(
            child_argv("soak", str(config), "--out", str(out), "--seconds", str(seconds)),
            check=True,
            env=env,
            stdout=subprocess.DEVNULL,
            cwd=ROOT,
            timeout=seconds + 120,
        )
    finally:
        if against == "drill":
            subprocess.run(
                [ONCALL, "drill", "down", "--dir", str(drill)],
                check=False,
                stdout=subprocess.DEVNULL,
                timeout=60,
            )
    rows = [json.loads(line) for line in out.read_text().splitlines() if line.strip()]
    points = [(r["t"], r["rss_mb"]) for r in rows]
    after = [p for p in points if p[0] >= seconds / 2] or points
    start, warm, end = points[0][1], after[0][1], points[-1][1]
    print(
        f"RSS of the app (headless, {WIDTH}x{HEIGHT}), refresh 1 s, {minutes:g} min against "
        f"{'a drill with kv-cache-pressure' if against == 'drill' else 'the bench prometheus'}"
        f"; sample every {SAMPLE_EVERY_S:g} s"
    )
    print(
        f"  alerts {rows[-1]['alerts']}, firing at the end {rows[-1]['firing']}, "
        f"checklist runs {rows[-1]['runs']}"
    )
    half = after[0][0]
    workers = [r["workers"] for r in rows if r["t"] >= half]
    objects = [r["objects"] for r in rows if r["t"] >= half]
    print(
        f"  second half: workers {min(workers)}-{max(workers)}; objects the collector tracks "
        f"(not frozen) {objects[0]} -> {objects[-1]}"
    )
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


def main() -> int:
    if sys.argv[1:2] == ["_child"]:
        return child_main(sys.argv[2:])
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5, help="start-up runs (each kind)")
    parser.add_argument("--presses", type=int, default=300)
    parser.add_argument("--minutes", type=float, default=10.0, help="length of the RSS soak")
    parser.add_argument("--rss-against", choices=("drill", "prometheus"), default="drill")
    parser.add_argument("--skip", default="", help="comma-separated: startup,pty,keys,rss")
    args = parser.parse_args()
    skip = {s.strip() for s in args.skip.split(",") if s.strip()}
    if not 1 <= args.runs <= 50 or not 1 <= args.presses <= 5000 or not 0 < args.minutes <= 120:
        parser.error("bounded: --runs 1..50, --presses 1..5000, --minutes (0, 120]")
    with tempfile.TemporaryDirectory(prefix="oncall-bench-tui-") as tmp:
        directory = Path(tmp)
        proc, prometheus = start_prometheus(directory)
        try:
            baseline_mb = None
            if "startup" not in skip:
                baseline_mb = part_startup(directory, prometheus, args.runs, "pty" not in skip)
            if "keys" not in skip:
                part_keys(directory, args.presses)
            if "rss" not in skip:
                part_rss(directory, prometheus, args.minutes, args.rss_against, baseline_mb)
        finally:
            proc.terminate()
            proc.wait(timeout=10)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
