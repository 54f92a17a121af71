"""Fixtures of the `oncall serve` tests: real `oncall serve` processes, a real redis-server, a
real Alertmanager routed to them, and the drill's notification sink.

Each serve runs `python -m oncall serve` with its own `oncall.yaml` and the test runbook
`ServeTestAlert` (tests/serve/runbooks): one step reads Redis and fails, one asks Prometheus
(a listener that never answers, when a test wants a slow step: it is `unknown` at its timeout).
"""

from __future__ import annotations

import contextlib
import functools
import json
import socket
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
import redis
import yaml
from prometheus_client.parser import text_string_to_metric_families

from oncall_drill.components import alertmanager_argv
from tests.harness.processes import Started, free_port, serving
from tests.harness.servers import RunningServer, _prometheus_ready

RUNBOOKS = Path(__file__).parent / "runbooks"
TOKEN = "serve-test-token-3c1f"


@dataclass
class Serve:
    url: str
    port: int
    log_path: Path
    proc: Any
    webhook: str

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def exited(self) -> str | None:
        """Why a `wait_until` watching it is pointless (it exited), or None while it runs."""
        return Started(self.proc, self.log_path).exited()

    def log_tail(self) -> str:
        """The end of its log, for a failed `wait_until` watching it."""
        return Started(self.proc, self.log_path).log_tail()

    def post(self, body: Any, *, token: str | None = TOKEN, raw: bytes | None = None,
             headers: dict[str, str] | None = None) -> httpx.Response:  # fmt: skip
        sent = dict(headers or {})
        if token is not None:
            sent["Authorization"] = f"Bearer {token}"
        content = raw if raw is not None else json.dumps(body).encode()
        sent.setdefault("Content-Type", "application/json")
        return httpx.post(self.webhook, content=content, headers=sent, timeout=10)

    def metric(self, name: str, **labels: str) -> float:
        """A sample of /metrics (0 when absent): `oncall_serve_checklists_total` etc."""
        text = httpx.get(f"{self.url}/metrics", timeout=5).text
        total = 0.0
        for family in text_string_to_metric_families(text):
            for sample in family.samples:
                if sample.name == name and all(
                    sample.labels.get(k) == v for k, v in labels.items()
                ):
                    total += sample.value
        return total


def _answers_ok(url: str) -> bool:
    """Whether a GET of `url` answers 200 (the readiness of the processes started here)."""
    try:
        return httpx.get(url, timeout=1).status_code == 200
    except httpx.HTTPError:
        return False


def write_settings(directory: Path, *, redis_url: str, prometheus_url: str, port: int,
                   serve: dict[str, Any] | None = None) -> Path:  # fmt: skip
    directory.mkdir(parents=True, exist_ok=True)
    token_file = directory / "token"
    token_file.write_text(TOKEN + "\n")
    settings = {
        "context": {"name": "servetest"},
        "prometheus": {"url": prometheus_url, "timeout": "1s"},
        "redis": {"url": redis_url, "timeout": "1s"},
        "runbooks": {"dirs": [str(RUNBOOKS)]},
        "audit": {"path": str(directory / "audit.jsonl")},
        "serve": {
            "listen": f"127.0.0.1:{port}",
            "token_file": str(token_file),
            "claim_ttl": "3s",
            **(serve or {}),
        },
    }
    path = directory / "oncall.yaml"
    path.write_text(yaml.safe_dump(settings))
    return path


@contextlib.contextmanager
def serve_process(directory: Path, **kwargs: Any) -> Iterator[Serve]:
    port = free_port()
    config = write_settings(directory, port=port, **kwargs)
    argv = [sys.executable, "-m", "oncall", "serve", "--config", str(config)]
    url = f"http://127.0.0.1:{port}"
    log = directory / "serve.log"
    healthy = functools.partial(_answers_ok, f"{url}/healthz")
    with serving(argv, log, healthy, timeout=30, what="oncall serve") as proc:
        yield Serve(url, port, log, proc, f"{url}/alertmanager/webhook")


@pytest.fixture
def silent_prometheus() -> Iterator[str]:
    """A listener that accepts connections and never answers: a hung Prometheus."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen(64)
        yield f"http://127.0.0.1:{sock.getsockname()[1]}"


@pytest.fixture
def dead_url() -> str:
    return f"http://127.0.0.1:{free_port()}"


@dataclass
class Sink:
    url: str
    file: Path

    def messages(self) -> list[dict[str, Any]]:
        from oncall_drill.notify_sink import read_messages

        return read_messages(self.file)


@pytest.fixture
def sink(tmp_path: Path) -> Iterator[Sink]:
    port = free_port()
    file = tmp_path / "sink.jsonl"
    argv = [
        sys.executable,
        "-m",
        "oncall_drill.notify_sink",
        "--port",
        str(port),
        "--file",
        str(file),
    ]
    url = f"http://127.0.0.1:{port}"
    ready = functools.partial(_answers_ok, f"{url}/messages")
    with serving(argv, tmp_path / "sink.log", ready, timeout=30, what="the notify sink"):
        yield Sink(url, file)


@contextlib.contextmanager
def alertmanager_to(
    directory: Path, webhooks: tuple[str, ...], token_file: Path
) -> Iterator[RunningServer]:
    """A real Alertmanager whose receiver posts to `webhooks` with the bearer token."""
    port = free_port()
    argv = alertmanager_argv(port, directory, webhooks, token_file)
    url = f"http://127.0.0.1:{port}"
    with serving(argv, directory / "alertmanager.log", lambda: _prometheus_ready(url),
                 timeout=30, what="alertmanager") as proc:  # fmt: skip
        yield RunningServer("alertmanager", port, url, proc, directory)


def alert(name: str = "ServeTestAlert", *, status: str = "firing", fingerprint: str = "f1",
          starts_at: str = "2026-01-01T00:00:00Z", **labels: str) -> dict[str, Any]:  # fmt: skip
    return {
        "status": status,
        "labels": {"alertname": name, "severity": "page", **labels},
        "annotations": {"summary": f"{name} test"},
        "startsAt": starts_at,
        "endsAt": "0001-01-01T00:00:00Z" if status == "firing" else "2026-01-01T00:10:00Z",
        "generatorURL": "http://prometheus.example/graph",
        "fingerprint": fingerprint,
    }


def notification(*alerts: dict[str, Any], version: str = "4") -> dict[str, Any]:
    """Alertmanager's webhook body (fixtures/alertmanager/webhook-firing.json has a real one)."""
    return {
        "version": version,
        "groupKey": '{}:{alertname="ServeTestAlert"}',
        "truncatedAlerts": 0,
        "status": "firing" if any(a["status"] == "firing" for a in alerts) else "resolved",
        "receiver": "oncall-serve",
        "groupLabels": {"alertname": "ServeTestAlert"},
        "commonLabels": {},
        "commonAnnotations": {},
        "externalURL": "http://alertmanager.example",
        "alerts": list(alerts),
    }


def stored(redis_url: str, alert_name: str = "ServeTestAlert") -> list[dict[str, Any]]:
    """The verdicts of `alert_name` in Redis, read with redis-py (not oncall's reader)."""
    client = redis.Redis.from_url(redis_url, decode_responses=True)
    try:
        ids = [str(v) for v in client.zrange(f"oncall:verdicts:alert:{alert_name}", 0, -1)]
        out = []
        for vid in ids:
            raw = client.hget(f"oncall:verdict:{vid}", "verdict")
            if raw:
                verdict = json.loads(raw)
                resolved = client.hget(f"oncall:verdict:{vid}", "resolved_at")
                if resolved:
                    verdict["resolved_at"] = float(resolved)
                out.append(verdict)
        return out
    finally:
        client.close()


def flush(redis_url: str) -> None:
    client = redis.Redis.from_url(redis_url)
    try:
        client.flushdb()
    finally:
        client.close()
