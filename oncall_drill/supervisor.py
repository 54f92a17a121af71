"""Start the drill's processes detached, remember them in a state file, and stop them all.

`oncall drill up` returns while the stack keeps running, so every process is started in a
session of its own (it outlives the command) and recorded with its pid and port in
`<drill dir>/state.json`; `oncall drill down` stops each process group (SIGTERM, then SIGKILL)
and checks that its port is free again.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import time
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import IO, Any

from oncall_drill.netutil import port_accepts

STATE_FILE = "state.json"


@dataclass
class ProcessRecord:
    """One process the drill started: what it is, where it listens, where it logs."""

    name: str
    pid: int
    port: int
    argv: list[str]
    log: str


@dataclass
class DrillState:
    """Everything `drill status` / `down` / `inject` need to find the running stack."""

    directory: str
    processes: list[ProcessRecord] = field(default_factory=list)
    urls: dict[str, str] = field(default_factory=dict)
    ports: dict[str, int] = field(default_factory=dict)
    gateway_config: dict[str, Any] = field(default_factory=dict)
    scenario: str | None = None
    faults: list[str] = field(default_factory=list)
    started_at: float = field(default_factory=time.time)

    @property
    def path(self) -> Path:
        return Path(self.directory) / STATE_FILE

    def save(self) -> None:
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(json.dumps(asdict(self), indent=2))
        tmp.replace(self.path)

    @classmethod
    def load(cls, directory: Path) -> DrillState | None:
        path = directory / STATE_FILE
        if not path.exists():
            return None
        raw = json.loads(path.read_text())
        processes = [ProcessRecord(**item) for item in raw.pop("processes", [])]
        return cls(processes=processes, **raw)

    def process(self, name: str) -> ProcessRecord | None:
        return next((p for p in self.processes if p.name == name), None)


def pid_alive(pid: int) -> bool:
    """True while pid exists and is not a zombie."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def start_in_session(
    argv: list[str],
    out: IO[bytes],
    *,
    env: Mapping[str, str] | None = None,
    preexec_fn: Callable[[], object] | None = None,
) -> subprocess.Popen[bytes]:
    """Start argv in a session of its own (a stop signals its whole process group), stdin
    closed, stdout and stderr to `out`; `env` None: this process's environment. `preexec_fn`
    runs in the child before exec: it must take no locks (the tests' harness only calls prctl)."""
    return subprocess.Popen(
        argv,
        stdin=subprocess.DEVNULL,
        stdout=out,
        stderr=subprocess.STDOUT,
        start_new_session=True,
        env=env,
        preexec_fn=preexec_fn,  # noqa: PLW1509 - see the docstring: no locks taken
    )


def spawn_detached(
    name: str, argv: list[str], port: int, log: Path, env: dict[str, str] | None = None
) -> ProcessRecord:
    """Start argv in its own session with output to log; it outlives this process."""
    with log.open("ab") as out:
        proc = start_in_session(argv, out, env={**os.environ, **(env or {})})
    return ProcessRecord(name=name, pid=proc.pid, port=port, argv=argv, log=str(log))


def stop_process(record: ProcessRecord, grace: float = 5.0) -> None:
    """SIGTERM the process group, SIGKILL what is left after grace seconds."""
    for sig, wait in ((signal.SIGTERM, grace), (signal.SIGKILL, 2.0)):
        if not pid_alive(record.pid):
            break
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(record.pid, sig)
        deadline = time.monotonic() + wait
        while pid_alive(record.pid) and time.monotonic() < deadline:
            _reap(record.pid)
            time.sleep(0.02)
    _reap(record.pid)


def _reap(pid: int) -> None:
    # Our own children (when `up` and `down` run in one process, as in tests) must be reaped.
    with contextlib.suppress(ChildProcessError, OSError):
        os.waitpid(pid, os.WNOHANG)


def wait_port_free(port: int, timeout: float = 5.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not port_accepts(port):
            return True
        time.sleep(0.02)
    return not port_accepts(port)
