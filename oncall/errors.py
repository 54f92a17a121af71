"""The one error hierarchy of oncall, and the exit codes of docs/on-call.md.

Every error a user can cause or meet derives from `OncallError`; the CLI prints its message to
stderr, without a traceback, and exits with its `exit_code`.
"""

from __future__ import annotations

from dataclasses import dataclass

from oncall.redaction import redact

EXIT_OK = 0
EXIT_FOUND = 1  # an alert firing, a check failing, lint problems, a broken audit chain
EXIT_USAGE = 2  # usage or configuration error
EXIT_INCOMPLETE = 3  # an unreachable backend left the answer incomplete
EXIT_INTERNAL = 70  # a bug: the last-resort handler caught it (sysexits' EX_SOFTWARE)
EXIT_BROKEN_PIPE = 141  # the reader of our output went away (`| head`): 128 + SIGPIPE


class OncallError(Exception):
    """Base of every error oncall reports to a user."""

    exit_code: int = EXIT_USAGE

    def report(self) -> str:
        """The text printed to stderr for this error."""
        return f"oncall: {self}"


class UsageError(OncallError):
    """The command line asks for something that cannot be done."""


@dataclass(frozen=True)
class Problem:
    """One problem in a user-supplied file or setting, located as precisely as we can.

    `file` names the source as the user knows it: a file (as they named it), "env NAME" for an
    environment variable, "flag --NAME" for a command-line flag, "settings" when no one source
    supplied the value. `line` and `col` (1-based) place it in a file; None where there is no
    position (a file that cannot be read, a variable, a flag). `key` is the dotted key path
    ("redis.timeout"), empty when the problem is with the whole source.
    """

    file: str
    line: int | None
    col: int | None
    key: str
    message: str

    @property
    def where(self) -> str:
        """FILE:LINE:COL (FILE alone without a position), as the terminal shows it."""
        if self.line is None:
            return self.file
        return f"{self.file}:{self.line}:{self.col if self.col is not None else 1}"

    def __str__(self) -> str:
        key = f" {self.key}:" if self.key else ""
        return f"{self.where}:{key} {self.message}"


class ConfigError(OncallError):
    """Settings could not be loaded; carries every problem found, not just the first."""

    def __init__(self, problems: list[Problem], what: str = "settings") -> None:
        self.problems = problems
        self.what = what
        super().__init__("; ".join(str(p) for p in problems))

    def report(self) -> str:
        count = len(self.problems)
        head = f"oncall: invalid {self.what} ({count} problem{'s' if count != 1 else ''}):"
        return "\n".join([head, *(f"  {p}" for p in self.problems)])


class BackendError(OncallError):
    """A backend (Prometheus, Redis, Kubernetes, vLLM, NVML) did not give a usable answer.

    `reason` is short and stable, for screens and tests: "refused", "timeout", "http 503",
    "bad payload", "query error", "auth" (401/403); `detail` says more (both redacted).
    `http_status` is the HTTP status of an answer that was an error (set by the HTTP
    backends), for callers that decide by its class (5xx: the backend is down) rather than by
    the text.
    """

    exit_code = EXIT_INCOMPLETE
    http_status: int | None = None

    def __init__(self, backend: str, target: str, reason: str, detail: str = "") -> None:
        # Redacted here, once, so that every screen, JSON document and log that shows the
        # error is clean: the target may carry a URL password, the detail an echoed token.
        target, detail = redact(target), redact(detail)
        self.backend = backend
        self.target = target
        self.reason = reason
        self.detail = detail
        text = f"{backend} at {target}: {reason}"
        super().__init__(f"{text} ({detail})" if detail else text)
