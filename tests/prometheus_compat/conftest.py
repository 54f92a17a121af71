"""A loopback stand-in for Thanos Query and Mimir, serving their recorded payloads.

Neither Thanos nor Mimir can run here (no package of either; no network to fetch one), so
this is the one fake of these tests: it serves the payloads of fixtures/thanos and
fixtures/mimir (see their `.source` notes) under the server's path prefix, answers as the
real one does when the prefix or Mimir's tenant header is missing, and records every request.

- Mimir: the Prometheus API is under `/prometheus` (`-http.prometheus-http-prefix`); a
  request without `X-Scope-OrgID` is refused by dskit's `middleware.AuthenticateUser` before
  any handler: 401, `text/plain`, body `no org id` (dskit `user/http.go` ErrNoOrgID). A tenant
  Mimir has no rules for is a tenant like any other: an empty `groups` list, empty results.
- Thanos Query: the API under its `--web.route-prefix`; no tenant.
- A path outside the prefix: Go's mux answers 404 `404 page not found`, before the tenant is
  looked at (the tenant middleware wraps each registered route, not the router).
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import pytest

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"
TENANT = "llm-serving"
TENANT_HEADER = "X-Scope-OrgID"


@dataclass(frozen=True)
class Seen:
    """One request as the server received it."""

    method: str
    path: str
    params: dict[str, list[str]]
    headers: dict[str, str]  # names lower-cased


@dataclass
class CompatServer:
    """What a test configures and reads back: the URL (with its prefix) and the requests."""

    url: str
    requests: list[Seen] = field(default_factory=list)


@dataclass(frozen=True)
class Flavour:
    """How one of them answers: its prefix, its payloads by API path, whether it needs a
    tenant and which tenant has those payloads."""

    prefix: str
    answers: dict[str, bytes]
    tenant: str | None = None


def _unknown_tenant(api: str, answer: bytes) -> bytes:
    """What a tenant without rules or series gets (Mimir: a tenant like any other): no rule
    groups (the recorded answer), and the query's answer with no result."""
    if api == "/api/v1/rules":
        return UNKNOWN_TENANT_RULES
    body = json.loads(answer)
    body["data"]["result"] = []
    return json.dumps(body, separators=(",", ":")).encode()


MIMIR = Flavour(
    prefix="/prometheus",
    answers={
        "/api/v1/rules": (FIXTURES / "mimir" / "rules_v1_alert.json").read_bytes(),
        "/api/v1/query": (FIXTURES / "mimir" / "query_v1_vector.json").read_bytes(),
        "/api/v1/query_range": (FIXTURES / "mimir" / "query_range_v1_matrix.json").read_bytes(),
    },
    tenant=TENANT,
)
THANOS = Flavour(
    prefix="/thanos",
    answers={
        "/api/v1/rules": (FIXTURES / "thanos" / "rules_v1_alert_partial.json").read_bytes(),
        "/api/v1/query": (FIXTURES / "mimir" / "query_v1_vector.json").read_bytes(),
    },
)
NO_ORG_ID = (FIXTURES / "mimir" / "no_org_id.txt").read_bytes()
UNKNOWN_TENANT_RULES = (FIXTURES / "mimir" / "rules_v1_unknown_tenant.json").read_bytes()


def _handler(flavour: Flavour, server: CompatServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def _answer(self, status: int, body: bytes, kind: str) -> None:
            self.send_response(status)
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_GET(self) -> None:
            parts = urlsplit(self.path)
            params = parse_qs(parts.query)
            if self.command == "POST":
                length = int(self.headers.get("Content-Length") or 0)
                params.update(parse_qs(self.rfile.read(length).decode()))
            headers = {name.lower(): value for name, value in self.headers.items()}
            server.requests.append(Seen(self.command, parts.path, params, headers))
            text = "text/plain; charset=utf-8"
            api = parts.path.removeprefix(flavour.prefix)
            answer = flavour.answers.get(api) if parts.path.startswith(flavour.prefix) else None
            if answer is None:  # no route: the router answers before any middleware
                self._answer(404, b"404 page not found\n", text)
                return
            tenant = headers.get(TENANT_HEADER.lower())
            if flavour.tenant is not None and not tenant:
                self._answer(401, NO_ORG_ID, text)
                return
            if flavour.tenant is not None and tenant != flavour.tenant:
                answer = _unknown_tenant(api, answer)
            self._answer(200, answer, "application/json")

        do_POST = do_GET

        def log_message(self, format: str, *args: object) -> None:
            return

    return Handler


@pytest.fixture
def serve_compat() -> Iterator[Callable[[Flavour], CompatServer]]:
    """Factory: serve_compat(MIMIR) → a running server; all are stopped after the test."""
    running: list[tuple[ThreadingHTTPServer, threading.Thread]] = []

    def start(flavour: Flavour) -> CompatServer:
        httpd = ThreadingHTTPServer(("127.0.0.1", 0), BaseHTTPRequestHandler)
        server = CompatServer(f"http://127.0.0.1:{httpd.server_address[1]}{flavour.prefix}")
        httpd.RequestHandlerClass = _handler(flavour, server)
        thread = threading.Thread(target=httpd.serve_forever, daemon=True)
        thread.start()
        running.append((httpd, thread))
        return server

    yield start
    for httpd, thread in running:
        httpd.shutdown()
        httpd.server_close()
        thread.join(timeout=5)
