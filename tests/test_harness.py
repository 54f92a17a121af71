"""The harness itself: real servers start, answer, stop, and never outlive the test run."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import httpx
import pytest
import redis

from tests.harness.processes import STARTED_PIDS, pid_alive, require_binary
from tests.harness.servers import prometheus_server, redis_server
from tests.harness.waiting import wait_until

ROOT = Path(__file__).resolve().parent.parent


def test_redis_server_starts_answers_and_stops(tmp_path: Path) -> None:
    with redis_server(tmp_path) as server:
        assert server.pid in STARTED_PIDS
        client = redis.Redis(host="127.0.0.1", port=server.port)
        assert client.ping() is True
        client.close()
    assert not pid_alive(server.pid)


def test_prometheus_starts_with_config_and_rules_and_stops(tmp_path: Path) -> None:
    rules = tmp_path / "rules.yml"
    rules.write_text("groups:\n- name: g\n  rules:\n  - record: job:up:sum\n    expr: sum(up)\n")
    with prometheus_server(tmp_path / "p", rule_files=[rules]) as server:
        body = httpx.get(f"{server.url}/api/v1/rules", trust_env=False).json()
        names = [r["name"] for g in body["data"]["groups"] for r in g["rules"]]
        assert names == ["job:up:sum"]
    assert not pid_alive(server.pid)


def test_two_servers_get_different_ports(tmp_path: Path) -> None:
    with redis_server(tmp_path / "a") as first, redis_server(tmp_path / "b") as second:
        assert first.port != second.port


def test_missing_binary_fails_naming_the_package(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", "/nonexistent")
    with pytest.raises(pytest.fail.Exception, match="install the Debian package 'redis-server'"):
        require_binary("redis-server", "redis-server")


def test_servers_die_when_the_test_process_is_killed(tmp_path: Path) -> None:
    """Even a SIGKILLed test run leaves no server behind (PR_SET_PDEATHSIG)."""
    script = textwrap.dedent(
        f"""
        import signal, sys
        from pathlib import Path
        sys.path.insert(0, {str(ROOT)!r})
        from tests.harness.servers import redis_server
        with redis_server(Path({str(tmp_path)!r})) as server:
            print(server.pid, flush=True)
            signal.pause()  # held until the test kills this process
        """
    )
    child = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout is not None
        server_pid = int(child.stdout.readline())
        assert pid_alive(server_pid)
        os.kill(child.pid, signal.SIGKILL)
        child.wait(timeout=10)
        wait_until(lambda: not pid_alive(server_pid), within=5, what="orphaned redis-server exit")
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
    assert not pid_alive(server_pid)


@pytest.mark.parametrize("from_a_thread", [False, True])
def test_a_command_on_the_terminal_gets_ctrl_c_when_the_tests_run_with_it_ignored(
    from_a_thread: bool,
) -> None:
    """`make test &` (or `(make test &)`) runs the whole suite with SIGINT ignored; the child a
    Ctrl-C test drives must still get it, as a terminal's foreground process would, also when
    a test drives it from a worker thread (two operators at once)."""
    import concurrent.futures

    from tests.harness.terminal import TerminalRun, run_on_terminal

    def serve() -> TerminalRun:
        return run_on_terminal(
            ["0", "--bind", "127.0.0.1"], module="http.server", timeout=20,
            interrupt_at="Serving HTTP",
        )  # fmt: skip

    before = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        if from_a_thread:
            with concurrent.futures.ThreadPoolExecutor(1) as pool:
                run = pool.submit(serve).result(timeout=60)
        else:
            run = serve()
    finally:
        signal.signal(signal.SIGINT, before)
    # http.server prints its banner, then serves inside `except KeyboardInterrupt`: a Ctrl-C
    # that lands while the banner is still being written (a loaded machine) ends it with the
    # traceback instead of the handler's line. Either way the child got the Ctrl-C.
    assert "Keyboard interrupt received" in run.output or "KeyboardInterrupt" in run.output, (
        run.output
    )
