"""What the hostile-input tests share: the CLI run in-process (fast enough for a fuzz suite)
and a lying HTTP backend on a free loopback port. Not a conftest: an ordinary module."""

from __future__ import annotations

import contextlib
import http.server
import io
import os
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from oncall.cli.main import main
from oncall.redaction import forget_secrets
from oncall.settings.yaml_marks import current_limits, set_limits


@contextlib.contextmanager
def process_state_restored() -> Iterator[None]:
    """Loading settings sets two process-wide things (the YAML bounds, the registered
    secrets); a test that loads them must not leave them to the next test in its worker."""
    saved = current_limits()
    try:
        yield
    finally:
        set_limits(saved)
        forget_secrets()


@dataclass(frozen=True)
class Ran:
    code: int
    stdout: str
    stderr: str

    @property
    def output(self) -> str:
        return self.stdout + self.stderr


def run_inprocess(*argv: str, env: dict[str, str] | None = None) -> Ran:
    """`oncall ARGV` in this process, with a clean ONCALL_* environment plus `env`.

    argparse's own usage errors (SystemExit) count as their exit code; any other exception
    escapes, which is what the tests look for: nothing may get past `main`."""
    saved = dict(os.environ)
    out, err = io.StringIO(), io.StringIO()
    try:
        for name in [n for n in os.environ if n.startswith("ONCALL_")]:
            del os.environ[name]
        os.environ.update(env or {})
        with (
            process_state_restored(),
            contextlib.redirect_stdout(out),
            contextlib.redirect_stderr(err),
        ):
            try:
                code = main(list(argv))
            except SystemExit as exc:
                code = exc.code if isinstance(exc.code, int) else 2
    finally:
        os.environ.clear()
        os.environ.update(saved)
    return Ran(code, out.getvalue(), err.getvalue())


Answer = tuple[int, str, bytes]  # status, content type, body


@contextlib.contextmanager
def lying_backend(answer: Callable[[str], Answer]) -> Iterator[str]:
    """A real HTTP server on 127.0.0.1 (free port) answering every request with
    `answer(path)`; yields its base URL."""

    class Handler(http.server.BaseHTTPRequestHandler):
        def _reply(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            if length:
                self.rfile.read(length)
            status, kind, body = answer(self.path)
            self.send_response(status)
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        do_GET = do_POST = _reply

        def log_message(self, format: str, *args: object) -> None:
            pass  # quiet: the tests read oncall's output, not the server's

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)
