"""Listeners that misbehave on purpose, for backend error tests.

- `refused_port()`: nothing listens there.
- `silent_listener()`: the kernel completes the TCP handshake (listen backlog) but nobody ever
  reads or answers: the shape of a hung server.
- `http_stub(status, body)`: a real HTTP server answering every request with a fixed reply
  (a 503 from a broken proxy, an HTML error page where JSON was expected).
"""

from __future__ import annotations

import contextlib
import socket
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from tests.harness.processes import free_port


def refused_port() -> int:
    return free_port()


@contextlib.contextmanager
def silent_listener() -> Iterator[int]:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen(64)
        yield sock.getsockname()[1]


@contextlib.contextmanager
def http_stub(status: int, body: bytes, content_type: str = "text/html") -> Iterator[str]:
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        do_POST = do_GET

        def log_message(self, format: str, *args: object) -> None:
            return

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)
