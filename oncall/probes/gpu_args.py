"""Read vLLM's `--gpu-memory-utilization` from a container spec; pure functions, no I/O.

vLLM pre-allocates this fraction of each GPU's memory at start (weights, activations and the
KV-cache pool; default 0.92, `vllm/config/cache.py`), so it, not the traffic, sets the
framebuffer memory dcgm-exporter and nvidia-smi report for a vLLM pod. Read as vLLM reads it:

* `--gpu-memory-utilization 0.95`, `--gpu-memory-utilization=0.95`, underscores for dashes,
  and unambiguous abbreviations (argparse's `allow_abbrev`; `--gpu-memory-u` at least);
* a `sh -c "vllm serve ... --gpu-memory-utilization 0.95"` script, or one element holding the
  whole `vllm serve ...` command line;
* `$(VAR)` in command and args expanded from the container's literal `env` values before
  that, as Kubernetes does (`$$(VAR)` stays literal `$(VAR)`);
* the last occurrence wins.

Not followed: `--config FILE` (the file is in the image), env values from ConfigMaps or
Secrets, `$(VAR)` naming no literal env value (form "unresolved", with the reason).
"""

from __future__ import annotations

import posixpath
import re
import shlex
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

DEFAULT_GPU_MEMORY_UTILIZATION = 0.92
FLAG_NAME = "gpu-memory-utilization"
#: The shortest abbreviation accepted: no other vLLM flag starts with it.
SHORTEST = "gpu-memory-u"
SHELLS = frozenset({"sh", "bash", "dash", "ash", "zsh", "ksh", "busybox"})
_VAR = re.compile(r"\$\$|\$\(([A-Za-z_][A-Za-z0-9_]*)\)")

Form = Literal["flag", "shell", "default", "unresolved"]


@dataclass(frozen=True)
class GpuMemoryUtilization:
    """`value` as written (None when absent or unreadable); `effective` is what vLLM uses."""

    value: float | None
    form: Form
    problem: str | None = None

    @property
    def effective(self) -> float | None:
        """The fraction vLLM pre-allocates: the value, the default when absent, else None."""
        if self.form == "default":
            return DEFAULT_GPU_MEMORY_UTILIZATION
        return self.value


def expand(text: str, env: dict[str, str]) -> tuple[str, list[str]]:
    """Kubernetes' `$(VAR)` expansion of one command/args element; (text, unknown names).

    An unknown `$(VAR)` stays as written, as Kubernetes leaves it.
    """
    unknown: list[str] = []

    def replace(match: re.Match[str]) -> str:
        if match.group(0) == "$$":
            return "$"
        name = match.group(1)
        if name in env:
            return env[name]
        unknown.append(name)
        return match.group(0)

    return _VAR.sub(replace, text), unknown


def _literal_env(env: Sequence[Any]) -> dict[str, str]:
    """Name → value of the env entries with a literal `value` (not valueFrom)."""
    found: dict[str, str] = {}
    for entry in env:
        if isinstance(entry, dict) and isinstance(entry.get("name"), str):
            value = entry.get("value")
            if isinstance(value, str):
                found[entry["name"]] = value
    return found


def _is_flag(word: str) -> tuple[bool, str | None]:
    """(is --gpu-memory-utilization or an abbreviation of it, its `=value` if any)."""
    if not word.startswith("--"):
        return False, None
    name, eq, value = word[2:].partition("=")
    name = name.replace("_", "-")
    matches = name == FLAG_NAME or (len(name) >= len(SHORTEST) and FLAG_NAME.startswith(name))
    return matches, (value if eq else None)


def _words(argv: list[str]) -> tuple[list[str], bool]:
    """The words vLLM's parser sees, and whether they came from a shell script."""
    if len(argv) >= 3 and posixpath.basename(argv[0]) in SHELLS and argv[1] == "-c":
        return shlex.split(argv[2]), True
    words: list[str] = []
    for item in argv:
        # One element holding a whole command line (`"vllm serve m --gpu-memory-..."`).
        words.extend(shlex.split(item) if " " in item.strip() else [item])
    return words, False


def parse_gpu_memory_utilization(
    command: Sequence[str], args: Sequence[str], env: Sequence[Any] = ()
) -> GpuMemoryUtilization:
    """The container's `--gpu-memory-utilization` (see the module docstring)."""
    values = _literal_env(env)
    argv: list[str] = []
    unknown: list[str] = []
    for item in [*command, *args]:
        text, missing = expand(str(item), values)
        argv.append(text)
        unknown.extend(missing)
    try:
        words, shell = _words(argv)
    except ValueError as exc:
        return GpuMemoryUtilization(None, "unresolved", f"the command line does not parse: {exc}")
    raw: str | None = None
    found = False
    for i, word in enumerate(words):
        matches, inline = _is_flag(word)
        if matches:
            found = True
            raw = inline if inline is not None else (words[i + 1] if i + 1 < len(words) else None)
    if not found:
        return GpuMemoryUtilization(None, "default")
    if raw is None:
        return GpuMemoryUtilization(None, "unresolved", "--gpu-memory-utilization has no value")
    try:
        value = float(raw)
    except ValueError:
        names = ", ".join(f"$({name})" for name in unknown)
        names = f" ({names}: not a literal env value)" if names else ""
        return GpuMemoryUtilization(None, "unresolved", f"value {raw!r} is not a number{names}")
    return GpuMemoryUtilization(value, "shell" if shell else "flag")
