"""What the hostile-input tests share: the CLI run in-process (fast enough for a fuzz suite).
Their lying HTTP backend is tests/harness/faults.py's `answering_server`. Not a conftest: an
ordinary module."""

from __future__ import annotations

import contextlib
import io
import os
from collections.abc import Iterator
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
