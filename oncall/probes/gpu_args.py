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

`--kv-cache-memory-bytes`, when set, sizes the KV-cache pool directly and the fraction no longer
decides what vLLM takes of the GPU (`vllm/config/cache.py`): form "kv_cache_memory_bytes", no
effective fraction. Its value is read as vLLM's `human_readable_int` reads it (`8589934592`,
`8G` = 8 GiB, `8g` = 8e9, `25.6k`).
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

Form = Literal["flag", "shell", "default", "unresolved", "kv_cache_memory_bytes"]
KV_FLAG_NAME = "kv-cache-memory-bytes"
#: Its shortest unambiguous abbreviation (`--kv-cache-dtype` shares `kv-cache-`).
KV_SHORTEST = "kv-cache-memory"
_HUMAN = re.compile(r"^([0-9]+(?:\.[0-9]+)?)([kKmMgGtT]?)$")
_DECIMAL = {"k": 10**3, "m": 10**6, "g": 10**9, "t": 10**12}
_BINARY = {"K": 2**10, "M": 2**20, "G": 2**30, "T": 2**40}


@dataclass(frozen=True)
class GpuMemoryUtilization:
    """`value` as written (None when absent or unreadable); `effective` is what vLLM uses."""

    value: float | None
    form: Form
    problem: str | None = None
    #: `--kv-cache-memory-bytes` in bytes when set: then the fraction decides nothing.
    kv_cache_memory_bytes: int | None = None

    @property
    def effective(self) -> float | None:
        """The fraction vLLM pre-allocates: the value, the default when absent, else None
        (also when --kv-cache-memory-bytes sizes the KV pool instead)."""
        if self.form == "kv_cache_memory_bytes":
            return None
        if self.form == "default":
            return DEFAULT_GPU_MEMORY_UTILIZATION
        return self.value


def human_readable_int(text: str) -> int | None:
    """vLLM's `human_readable_int`: `1k` = 1000, `1K` = 1024 (M, G, T alike); None if not."""
    match = _HUMAN.match(text.strip())
    if match is None:
        return None
    number, suffix = match.groups()
    if not suffix:
        return int(number) if "." not in number else None
    factor = _DECIMAL.get(suffix) or _BINARY[suffix]
    return int(float(number) * factor)


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


def _is_flag(word: str, flag: str = FLAG_NAME, shortest: str = SHORTEST) -> tuple[bool, str | None]:
    """(is --FLAG or an abbreviation of it, its `=value` if any)."""
    if not word.startswith("--"):
        return False, None
    name, eq, value = word[2:].partition("=")
    name = name.replace("_", "-")
    matches = name == flag or (len(name) >= len(shortest) and flag.startswith(name))
    return matches, (value if eq else None)


def _last_value(words: list[str], flag: str, shortest: str) -> tuple[bool, str | None]:
    """(the flag occurs, its last value: None when the last occurrence has none)."""
    found, raw = False, None
    for i, word in enumerate(words):
        matches, inline = _is_flag(word, flag, shortest)
        if matches:
            found = True
            raw = inline if inline is not None else (words[i + 1] if i + 1 < len(words) else None)
    return found, raw


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
    has_kv, kv_raw = _last_value(words, KV_FLAG_NAME, KV_SHORTEST)
    if has_kv:
        kv_bytes = human_readable_int(kv_raw or "")
        if kv_bytes is None:
            problem = f"--kv-cache-memory-bytes value {kv_raw!r} is not a size"
            return GpuMemoryUtilization(None, "unresolved", problem)
        return GpuMemoryUtilization(None, "kv_cache_memory_bytes", None, kv_bytes)
    found, raw = _last_value(words, FLAG_NAME, SHORTEST)
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
