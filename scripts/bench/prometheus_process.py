"""A real prometheus for the benchmarks: started on a loopback port with a config the
benchmark writes, and handed over once the benchmark's own readiness test passes (ready to
answer, or already holding what it scrapes)."""

from __future__ import annotations

import shutil
import subprocess
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path


def launch_prometheus(
    directory: Path, port: int, config: str, ready: Callable[[str], bool], *, what: str = "start"
) -> tuple[subprocess.Popen[bytes], str]:
    """prometheus on 127.0.0.1:`port` with `config` (prometheus.yml's text), its data under
    `directory`; the process and its URL once `ready(url)` (an OSError counts as not yet).
    Killed, and the benchmark ended with "prometheus did not <what>", after 30 s."""
    path = directory / "prometheus.yml"
    path.write_text(config)
    proc = subprocess.Popen(
        [shutil.which("prometheus") or "prometheus", f"--config.file={path}",
         f"--storage.tsdb.path={directory / 'data'}", f"--web.listen-address=127.0.0.1:{port}"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            if ready(url):
                return proc, url
        except OSError:
            pass
        time.sleep(0.1)
    proc.kill()
    raise SystemExit(f"prometheus did not {what}")


def answers_ready(url: str) -> bool:
    """Whether the prometheus at `url` says it is ready (`/-/ready`)."""
    with urllib.request.urlopen(f"{url}/-/ready", timeout=1):  # noqa: S310 - loopback
        return True
