"""A container's log tail → the facts of `kube.logs`: bounded, secrets redacted, classified.

Pure functions (the probe itself is `oncall.probes.kube_logs`): which pod to read when the
alert names none, the container's termination and memory limit from the pod JSON, secret
redaction of each line, and the two readings a checklist decides on: the last line matching the
runbook's pattern (e.g. CUDA out-of-memory signatures) and the log's last error line.

Redaction runs on every line before anything else sees it, so no fact, summary, JSON output
or audit record can carry what a process printed of a secret: `Authorization:` header values,
`Bearer`/`Basic` credentials, URL userinfo (`https://user:pass@host`), `key=value` /
`--flag value` pairs whose name says token, secret, password or API key, and token shapes
(Hugging Face `hf_…`, OpenAI-style `sk-…`, GitHub `ghp_…`, JWTs).
"""

from __future__ import annotations

import re
from typing import Any

from oncall.backends.kube import Obj
from oncall.model.linear_regex import LinearPattern
from oncall.probes.kube_facts import EPOCH, parse_time
from oncall.redaction import redact_log

#: Longest line kept in facts; a longer one is cut (a log line can be a whole JSON dump).
MAX_LINE_CHARS = 600

#: A Python exception line (`torch.OutOfMemoryError: …`, `RuntimeError: …`) or a Go panic.
_EXCEPTION = re.compile(r"\b[A-Za-z_][\w.]*(?:Error|Exception|Exit)\b:|\bpanic:")
#: Otherwise, a line a logger marked as an error.
_ERROR_LEVEL = re.compile(r"\b(?:ERROR|CRITICAL|FATAL)\b")
#: Otherwise, a command-line tool's complaint: argparse's `prog: error: unrecognized arguments`,
#: cobra's `Error: unknown flag`, `fatal: …`.
_ERROR_WORD = re.compile(r"(?i)\b(?:error|fatal)\b:")
_QUANTITY = re.compile(r"^([0-9.]+)([EPTGMK]i?|[munk]|e[0-9]+)?$")
_FACTORS = {
    "Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60,
    "k": 10**3, "K": 10**3, "M": 10**6, "G": 10**9, "T": 10**12, "P": 10**15, "E": 10**18,
    "m": 10**-3, "u": 10**-6, "n": 10**-9,
}  # fmt: skip


def redact_line(line: str) -> str:
    """The line with every secret it shows masked: oncall's one redaction, in its eager form
    for what a process printed (`oncall.redaction.redact_log`)."""
    return redact_log(line)


def log_lines(text: str, tail_lines: int) -> list[str]:
    """The last `tail_lines` lines of text, redacted and cut to MAX_LINE_CHARS."""
    lines = text.splitlines()[-tail_lines:] if tail_lines else []
    out = []
    for line in lines:
        clean = redact_line(line.rstrip())
        out.append(clean if len(clean) <= MAX_LINE_CHARS else clean[:MAX_LINE_CHARS] + "…")
    return out


def last_match(lines: list[str], pattern: LinearPattern | None) -> tuple[str | None, int]:
    """(the last line matching pattern, how many lines match); (None, 0) without a pattern."""
    if pattern is None:
        return None, 0
    found = [line for line in lines if pattern.search(line)]
    return (found[-1] if found else None), len(found)


def last_error_line(lines: list[str], skip: LinearPattern | None = None) -> str | None:
    """The last exception line, else the last line logged at ERROR/CRITICAL/FATAL, else the
    last `error:` line (a bad flag, as argparse and cobra print it).

    Lines matching `skip` are consequences, not causes (vLLM prints one `EngineDeadError`
    traceback per request in flight after its engine died): the last error line among the
    others, and only when every error line is skipped, the last skipped one."""
    kept = [line for line in lines if skip is None or not skip.search(line)]
    for candidates in (kept, lines):
        for pattern in (_EXCEPTION, _ERROR_LEVEL, _ERROR_WORD):
            for line in reversed(candidates):
                if pattern.search(line):
                    return line
    return None


def quantity_bytes(value: object) -> int | None:
    """A Kubernetes memory quantity ("64Gi", "512M", "1e9") in bytes; None if absent/invalid."""
    match = _QUANTITY.match(str(value)) if value is not None else None
    if match is None:
        return None
    number, suffix = float(match.group(1)), match.group(2) or ""
    if suffix.startswith("e"):
        return int(number * 10 ** int(suffix[1:]))
    return int(number * _FACTORS.get(suffix, 1))


def _container_status(pod: Obj, container: str) -> dict[str, Any]:
    statuses = (pod.get("status") or {}).get("containerStatuses") or []
    found: dict[str, Any] = next((s for s in statuses if s.get("name") == container), {})
    return found


def container_name(pod: Obj, wanted: str | None) -> str | None:
    """The named container if the pod has it, else (no name) the pod's first container."""
    names = [str(c.get("name")) for c in (pod.get("spec") or {}).get("containers") or []]
    if wanted:
        return wanted if wanted in names else None
    return names[0] if names else None


def termination(pod: Obj, container: str, previous: bool) -> dict[str, Any] | None:
    """The termination the log belongs to: the previous instance's, or the current one's."""
    status = _container_status(pod, container)
    if previous:
        found = (status.get("lastState") or {}).get("terminated")
    else:
        found = (status.get("state") or {}).get("terminated")
    return found if isinstance(found, dict) else None


def memory_limit(pod: Obj, container: str) -> str | None:
    """The container's memory limit as the spec writes it ("64Gi"), None when unlimited."""
    for spec in (pod.get("spec") or {}).get("containers") or []:
        if spec.get("name") == container:
            limit = ((spec.get("resources") or {}).get("limits") or {}).get("memory")
            return None if limit is None else str(limit)
    return None


def latest_terminated(pods: list[Obj], container: str | None) -> Obj | None:
    """The pod whose container (named, or any) terminated most recently; None if none did."""
    best: tuple[Any, Obj] | None = None
    for pod in pods:
        for status in (pod.get("status") or {}).get("containerStatuses") or []:
            if container and status.get("name") != container:
                continue
            for state in (status.get("state") or {}, status.get("lastState") or {}):
                terminated = state.get("terminated")
                if terminated:
                    when = parse_time(terminated.get("finishedAt")) or EPOCH
                    if best is None or when > best[0]:
                        best = (when, pod)
    return best[1] if best else None
