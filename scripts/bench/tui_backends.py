"""What `tui.py` points the app at: a real prometheus with the packs' rules, ports nobody
listens on, listeners that never answer (hung backends), and the settings file naming them.

The prometheus process comes from the test harness (tests/harness/servers.py), so that it is
started, waited for and stopped the way the tests do it.
"""

from __future__ import annotations

import contextlib
import json
import socket
import threading
import urllib.request
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from scripts.bench.tui_common import PACKS, ROOT
from tests.harness.processes import Started, free_port
from tests.harness.servers import prometheus_server
from tests.harness.waiting import wait_until


def closed_ports() -> dict[str, str]:
    """Redis, vLLM and Kubernetes URLs nobody listens on: refused at once."""
    return {
        "redis": f"redis://127.0.0.1:{free_port()}/0",
        "vllm": f"http://127.0.0.1:{free_port()}",
        "kubernetes": f"http://127.0.0.1:{free_port()}",
    }


def _kubeconfig(path: Path, server: str) -> Path:
    """A kubeconfig with one context, `bench`, whose API server is `server`."""
    path.write_text(
        json.dumps(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": "bench", "cluster": {"server": server}}],
                "users": [{"name": "bench", "user": {"token": "bench"}}],
                "contexts": [{"name": "bench", "context": {"cluster": "bench", "user": "bench"}}],
                "current-context": "bench",
            }
        )
    )
    return path


def _settings(prometheus: str, dead: dict[str, str], kubeconfig: Path) -> dict[str, Any]:
    """The backend sections: this Prometheus; Redis, vLLM and Kubernetes at `dead` URLs."""
    return {
        "prometheus": {"url": prometheus, "timeout": "2s"},
        "kubernetes": {"kubeconfig": str(kubeconfig), "namespace": "ai"},
        "redis": {"url": dead["redis"], "timeout": "1s"},
        "vllm": {"urls": [dead["vllm"]]},
    }


def write_config(
    path: Path,
    prometheus: str,
    dead: dict[str, str],
    directory: Path,
    *,
    contexts: Mapping[str, tuple[str, dict[str, str]] | None] | None = None,
) -> Path:
    """Settings for the app: this Prometheus; Redis, vLLM and Kubernetes at `dead` URLs.

    With `contexts`, those contexts on one board: each with its own Prometheus URL and dead
    URLs as above, or None for the top-level backends."""
    kubeconfig = _kubeconfig(directory / f"{path.stem}.kubeconfig", dead["kubernetes"])
    settings: dict[str, Any] = {
        "context": {"name": "bench"},
        **_settings(prometheus, dead, kubeconfig),
        "gpu": {"source": "dcgm"},
        "alerts": {"packs": list(PACKS), "refresh": "1s"},
        "audit": {"path": str(directory / "audit.jsonl")},
    }
    if contexts is not None:
        settings["contexts"] = {}
        for name, own in contexts.items():
            if own is None:
                settings["contexts"][name] = {}
                continue
            kube = _kubeconfig(directory / f"{path.stem}-{name}.kubeconfig", own[1]["kubernetes"])
            settings["contexts"][name] = _settings(*own, kube)
    path.write_text(json.dumps(settings, indent=1))  # JSON is YAML
    return path


def _rules_evaluated(url: str) -> bool:
    try:
        with urllib.request.urlopen(f"{url}/api/v1/rules?type=alert", timeout=1) as resp:  # noqa: S310 - loopback
            groups = json.load(resp)["data"]["groups"]
    except (OSError, ValueError, KeyError):
        return False
    evaluated = [r["lastEvaluation"] for g in groups for r in g["rules"]]
    return bool(evaluated) and not any(e.startswith("0001") for e in evaluated)


@contextlib.contextmanager
def bench_prometheus(directory: Path) -> Iterator[str]:
    """A real prometheus evaluating the packs' rules every second, once it evaluated them."""
    rules = [ROOT / "alerts" / f"{pack}.yaml" for pack in PACKS]
    with prometheus_server(directory / "prometheus", rule_files=rules, interval="1s") as server:
        wait_until(
            lambda: _rules_evaluated(server.url),
            within=30,
            what="prometheus to evaluate the packs' rules",
            watching=Started(server.proc, directory / "prometheus" / "prometheus.log"),
        )
        yield server.url


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

    def backends(self) -> tuple[str, dict[str, str]]:
        """Prometheus (listener 0), and Redis, vLLM, Kubernetes (1-3) for `write_config`."""
        dead = {
            "redis": self.url(1, "redis") + "/0",
            "vllm": self.url(2),
            "kubernetes": self.url(3),
        }
        return self.url(0), dead

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
