"""Listeners that misbehave on purpose, for backend error tests.

- `refused_port()`: nothing listens there.
- `silent_listener()`: the kernel completes the TCP handshake (listen backlog) but nobody ever
  reads or answers: the shape of a hung server.
- `answering_server(answer)`: a real HTTP server answering every request with `answer(path)`
  (a lying backend); `http_stub(status, body)`: one answering with a fixed reply (a 503 from a
  broken proxy, an HTML error page where JSON was expected).
- `streaming_server(chunk, count)`: one answering 200 with `chunk` sent `count` times, no
  Content-Length (the body ends when the connection does: a proxy's endless page); with
  `declared`, the Content-Length it claims instead, the connection then held open.
- `gzip_bomb(mib)`: a valid gzip stream of `mib` MiB of zeros, about a thousandth its size.
"""

from __future__ import annotations

import contextlib
import functools
import socket
import struct
import threading
import time
import tracemalloc
import zlib
from collections.abc import Awaitable, Callable, Iterator, Mapping
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import TypeVar

import yaml

from tests.harness.processes import free_port

MIB = 1 << 20
T = TypeVar("T")


def refused_port() -> int:
    return free_port()


@contextlib.contextmanager
def silent_listener() -> Iterator[int]:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen(64)
        yield sock.getsockname()[1]


def kubeconfig_for(path: Path, server: str) -> Path:
    """A kubeconfig whose one context's API server is `server` (a stub, a refusing port, a
    listener that never answers), with a bearer token."""
    path.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": "stub",
        "clusters": [{"name": "stub", "cluster": {"server": server}}],
        "contexts": [{"name": "stub", "context": {"cluster": "stub", "user": "u"}}],
        "users": [{"name": "u", "user": {"token": "t"}}],
    }))  # fmt: skip
    return path


#: An HTTP reply: status, content type, body.
Reply = tuple[int, str, bytes]


def answering_server(
    answer: Callable[[str], Reply], headers: Mapping[str, str] | None = None
) -> contextlib.AbstractContextManager[str]:
    """A real HTTP server on 127.0.0.1 (free port) answering every GET and POST with
    `answer(path)` and `headers` (a request's body is read and ignored); yields its base URL."""

    class Handler(_Quiet):
        def _reply(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            if length:
                self.rfile.read(length)
            status, kind, body = answer(self.path)
            self.send_response(status)
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(body)))
            for name, value in (headers or {}).items():
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(body)

        do_GET = do_POST = _reply

    return _serving(Handler)


class _Quiet(BaseHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:
        pass  # quiet: the tests read the client's output, not the server's


@contextlib.contextmanager
def _serving(handler: type[BaseHTTPRequestHandler]) -> Iterator[str]:
    """`handler` served on 127.0.0.1 (free port) in a thread; yields the base URL."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


def http_stub(
    status: int,
    body: bytes,
    content_type: str = "text/html",
    headers: Mapping[str, str] | None = None,
) -> contextlib.AbstractContextManager[str]:
    """A server answering every request with this one reply."""
    return answering_server(lambda _path: (status, content_type, body), headers)


def streaming_server(
    chunk: bytes, count: int, *, declared: int | None = None, held_s: float = 30.0
) -> contextlib.AbstractContextManager[str]:
    """A server answering every GET 200 with `chunk` × `count` and no Content-Length, until
    the client hangs up; with `declared`, that Content-Length instead, then the connection
    held open (at most `held_s`) until the client closes it."""

    class Handler(_Quiet):
        def do_GET(self) -> None:
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            if declared is not None:
                self.send_header("Content-Length", str(declared))
            self.end_headers()
            try:
                for _ in range(count):
                    self.wfile.write(chunk)
                if declared is not None:
                    self.wfile.flush()
                    self.connection.settimeout(held_s)
                    deadline = time.monotonic() + held_s
                    while self.rfile.read(1) and time.monotonic() < deadline:
                        pass  # b"": the client closed
            except OSError:
                pass  # the client hung up mid-body: what it should do

    return _serving(Handler)


async def with_peak(awaitable: Awaitable[T]) -> tuple[T, int]:
    """What `awaitable` gives, and the most memory Python held while it ran (tracemalloc)."""
    tracemalloc.start()
    try:
        result = await awaitable
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    return result, peak


@functools.cache
def gzip_bomb(mib: int) -> bytes:
    """`mib` MiB of zeros as a valid gzip stream (≈ 1 KiB a MiB). After a full flush the
    deflater starts afresh, so each further MiB of zeros deflates to the same bytes: the
    stream is that block repeated, with the true CRC and length in its trailer."""
    block = bytes(MIB)
    packer = zlib.compressobj(9, zlib.DEFLATED, -zlib.MAX_WBITS)
    first = packer.compress(block) + packer.flush(zlib.Z_FULL_FLUSH)
    again = packer.compress(block) + packer.flush(zlib.Z_FULL_FLUSH)
    crc = 0
    for _ in range(mib):
        crc = zlib.crc32(block, crc)
    header = b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x02\xff"  # deflate, no name, no mtime
    trailer = struct.pack("<II", crc, (mib * MIB) & 0xFFFFFFFF)
    return header + first + again * (mib - 1) + packer.flush() + trailer
