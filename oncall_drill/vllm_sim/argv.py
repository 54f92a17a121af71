"""Command-line parsing that accepts what a vLLM container spec carries (backends.md §1.6).

The Kubernetes simulator starts this process from a Deployment container's command and args,
so `parse_argv` takes every form vLLM itself accepts and turns it into a `SimConfig`:

* `vllm serve MODEL ...`, `python3 -m vllm.entrypoints.openai.api_server --model MODEL ...`,
  or just the flags;
* `--flag value` and `--flag=value`; underscores for dashes (`--max_num_seqs 8`), as vLLM's
  FlexibleArgumentParser allows; abbreviations (`--max-num-seq=8`), as argparse's
  `allow_abbrev` (left on by vLLM) reads them: a unique prefix of a known option names it, a
  prefix of several is an error (`ambiguous option`), as it is for vLLM;
* one shell string (`["/bin/sh", "-c", "vllm serve m --max_num_seqs 8"]`, or only that string);
* `--config FILE` with YAML keys (precedence: command line > config file > defaults);
* repeated flags: the last one wins, as with argparse.

vLLM flags the simulator does not model are accepted and recorded in `SimConfig.ignored_flags`.
A non-loopback `--host` (containers say `0.0.0.0`) becomes 127.0.0.1 with a note: the drill
binds loopback only. Every problem is collected and raised at once as `ArgvError`.
"""

from __future__ import annotations

import shlex
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path, PurePosixPath
from typing import Any

import yaml

from oncall_drill.vllm_sim.config import LOOPBACK_HOSTS, SimConfig


class ArgvError(ValueError):
    """The command line cannot start a server; `problems` lists every reason."""

    def __init__(self, problems: Sequence[str]) -> None:
        self.problems = list(problems)
        super().__init__("; ".join(self.problems))


@dataclass(frozen=True)
class ParsedArgv:
    """A parsed command line: the configuration, plus notes for the startup log."""

    config: SimConfig
    notes: tuple[str, ...] = field(default=())


def _parse_len(text: str) -> int:
    """vLLM's human-readable lengths: `8192`, `8k`, `32K` (x1024), `1m`, `1M`."""
    units = {"k": 1000, "K": 1024, "m": 1000**2, "M": 1024**2}
    if text and text[-1] in units:
        return int(float(text[:-1]) * units[text[-1]])
    return int(text)


def _parse_bool(text: str) -> bool:
    lowered = text.strip().lower()
    if lowered in {"1", "true", "yes", "on"}:
        return True
    if lowered in {"0", "false", "no", "off"}:
        return False
    raise ValueError(f"not a boolean: {text!r}")


#: Flags that matter to the simulator: canonical (dashed) name -> (SimConfig field, converter).
_VALUE_FLAGS: dict[str, tuple[str, Callable[[str], Any]]] = {
    "model": ("model", str),
    "host": ("host", str),
    "port": ("port", int),
    "max-num-seqs": ("max_num_seqs", int),
    "max-num-active-seqs": ("max_num_active_seqs", int),
    "kv-capacity-tokens": ("kv_capacity_tokens", int),
    "num-gpu-blocks-override": ("num_gpu_blocks_override", int),
    "block-size": ("block_size", int),
    "max-model-len": ("max_model_len", _parse_len),
    "gpu-memory-utilization": ("gpu_memory_utilization", float),
    "metrics-version": ("metrics_version", str),
    "load-seconds": ("load_seconds", float),
    "pod-name": ("pod_name", str),
    "speed": ("speed", float),
    "tokens-per-second": ("tokens_per_second", float),
    "prefill-tokens-per-second": ("prefill_tokens_per_second", float),
    "saturation-batch": ("saturation_batch", int),
    "stuck-tokens-per-second": ("stuck_tokens_per_second", float),
    "death-exit-seconds": ("death_exit_seconds", float),
    "tick-seconds": ("tick_seconds", float),
    "api-key": ("api_key", str),
}
#: Boolean flags that matter (vLLM's BooleanOptionalAction: `--x` / `--no-x`).
_BOOL_FLAGS = {"disable-log-stats": "disable_log_stats"}
#: `--served-model-name a b c` takes every following non-flag token.
_MULTI_FLAG = "served-model-name"
_CONFIG_FLAG = "config"
#: Prefixes of vLLM switches that never take a value, so the next token stays positional.
_SWITCH_PREFIXES = ("enable-", "disable-", "no-")
_SWITCHES = frozenset({"trust-remote-code", "enforce-eager", "headless", "async-scheduling"})
#: vLLM options the simulator does not model whose names begin like ones it does, so that an
#: abbreviation is ambiguous exactly when it is for vLLM (vllm/engine/arg_utils.py).
_VLLM_LOOKALIKES = frozenset(
    {
        "max-num-batched-tokens", "max-num-partial-prefills", "max-long-partial-prefills",
        "max-logprobs", "max-loras", "max-lora-rank", "max-cpu-loras", "max-cudagraph-capture-size",
        "max-parallel-loading-workers", "model-impl", "model-loader-extra-config",
    }
)  # fmt: skip
_PROGRAMS = frozenset({"vllm", "python", "python3", "exec"})
_SHELLS = frozenset({"sh", "bash", "dash", "ash"})
_DEFAULT_KV_TOKENS = 65536
_DEFAULT_MAX_MODEL_LEN = 8192


def _program(token: str) -> str:
    return PurePosixPath(token).name


def normalize_argv(argv: Sequence[str]) -> list[str]:
    """Unwrap shell strings and the `vllm serve` / `python -m ...` prefix; flags remain."""
    tokens = list(argv)
    if len(tokens) >= 3 and _program(tokens[0]) in _SHELLS and tokens[1] == "-c":
        tokens = shlex.split(tokens[2])
    elif len(tokens) == 2 and tokens[0] == "-c":
        tokens = shlex.split(tokens[1])
    expanded: list[str] = []
    for i, token in enumerate(tokens):
        words = token.split()
        is_command = len(words) > 1 and _program(words[0]) in _PROGRAMS
        if is_command or (len(tokens) == 1 and len(words) > 1 and i == 0):
            expanded.extend(shlex.split(token))
        else:
            expanded.append(token)
    while expanded and _program(expanded[0]) in _PROGRAMS:
        program = _program(expanded.pop(0))
        if program == "vllm" and expanded and expanded[0] == "serve":
            expanded.pop(0)
        elif program.startswith("python") and len(expanded) >= 2 and expanded[0] == "-m":
            del expanded[:2]
    return expanded


@dataclass
class _Scan:
    values: dict[str, Any] = field(default_factory=dict)
    positionals: list[str] = field(default_factory=list)
    ignored: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)


def _takes_no_value(name: str) -> bool:
    return name in _SWITCHES or name.startswith(_SWITCH_PREFIXES)


def _set_value(scan: _Scan, name: str, raw: Any, origin: str) -> None:
    """Convert one known flag's value and record it (later calls overwrite: last wins)."""
    if name in _BOOL_FLAGS:
        try:
            scan.values[_BOOL_FLAGS[name]] = raw if isinstance(raw, bool) else _parse_bool(raw)
        except ValueError as exc:
            scan.problems.append(f"{origin}: --{name}: {exc}")
        return
    if name == _MULTI_FLAG:
        names = [raw] if isinstance(raw, str) else [str(item) for item in raw]
        scan.values["served_model_names"] = tuple(names)
        return
    dest, convert = _VALUE_FLAGS[name]
    try:
        scan.values[dest] = convert(str(raw))
    except ValueError:
        scan.problems.append(f"{origin}: --{name}: invalid value {raw!r}")


def _known_names() -> frozenset[str]:
    return frozenset(
        {*_VALUE_FLAGS, *_BOOL_FLAGS, *(f"no-{b}" for b in _BOOL_FLAGS), _MULTI_FLAG, _CONFIG_FLAG}
    )


def _unabbreviate(name: str, scan: _Scan) -> str:
    """The option argparse takes `name` for: itself when known, else the one known option it
    is a prefix of; a prefix of several is recorded as argparse's error."""
    known = _known_names()
    if name in known or name in _VLLM_LOOKALIKES or not name:
        return name
    matches = sorted(o for o in known | _VLLM_LOOKALIKES if o.startswith(name))
    if len(matches) == 1:
        return matches[0]
    if len(matches) > 1:
        listed = ", ".join(f"--{m}" for m in matches)
        scan.problems.append(f"argv: ambiguous option: --{name} could match {listed}")
    return name


def _scan_tokens(tokens: Sequence[str]) -> tuple[_Scan, str | None]:
    """One pass over the flags; returns the scan and the --config path, if any."""
    scan = _Scan()
    config_path: str | None = None
    i = 0
    while i < len(tokens):
        token = tokens[i]
        i += 1
        if not token.startswith("-") or len(token) == 1:
            scan.positionals.append(token)
            continue
        body = token.lstrip("-")
        raw_name, has_inline, inline = body.partition("=")
        name = (
            _unabbreviate(raw_name.replace("_", "-"), scan)
            if token.startswith("--")
            else raw_name.replace("_", "-")
        )
        if name in _BOOL_FLAGS or (name.startswith("no-") and name[3:] in _BOOL_FLAGS):
            positive = name in _BOOL_FLAGS
            key = name if positive else name[3:]
            _set_value(scan, key, inline if has_inline else positive, "argv")
            continue
        if name == _MULTI_FLAG and not has_inline:
            names: list[str] = []
            while i < len(tokens) and not tokens[i].startswith("-"):
                names.append(tokens[i])
                i += 1
            if names:
                _set_value(scan, name, names, "argv")
            else:
                scan.problems.append(f"argv: --{name} expects at least one name")
            continue
        known = name in _VALUE_FLAGS or name in {_MULTI_FLAG, _CONFIG_FLAG}
        if has_inline:
            value: str | None = inline
        elif known or not _takes_no_value(name):
            has_next = i < len(tokens) and not tokens[i].startswith("--")
            value = tokens[i] if has_next else None
            i += 1 if has_next else 0
        else:
            value = None
        if not known:
            scan.ignored.append(token if value is None else f"{token} {value}")
        elif value is None:
            scan.problems.append(f"argv: --{name} expects a value")
        elif name == _CONFIG_FLAG:
            config_path = value
        else:
            _set_value(scan, name, value, "argv")
    return scan, config_path


def _load_config_file(path: str, problems: list[str]) -> dict[str, Any]:
    """YAML keys of `--config FILE`, converted like flags; problems name the file and key."""
    try:
        data = yaml.safe_load(Path(path).read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError) as exc:
        problems.append(f"--config {path}: {exc}")
        return {}
    if data is None:
        return {}
    if not isinstance(data, dict):
        problems.append(f"--config {path}: expected a mapping of option names to values")
        return {}
    scan = _Scan()
    for key, raw in data.items():
        name = str(key).replace("_", "-")
        if name in _VALUE_FLAGS or name in _BOOL_FLAGS or name == _MULTI_FLAG:
            _set_value(scan, name, raw, f"{path}: key {key}")
    problems.extend(scan.problems)
    return scan.values


def parse_argv(argv: Sequence[str]) -> ParsedArgv:
    """Parse a vLLM-style command line into a `SimConfig`; `ArgvError` lists every problem."""
    scan, config_path = _scan_tokens(normalize_argv(argv))
    problems = list(scan.problems)
    values: dict[str, Any] = {}
    if config_path is not None:
        values.update(_load_config_file(config_path, problems))
    values.update(scan.values)
    notes: list[str] = []
    if scan.positionals:
        # `vllm serve MODEL` wins over --model, as in vLLM's serve subcommand.
        values["model"] = scan.positionals[0]
        if scan.positionals[1:]:
            notes.append(f"ignored positional arguments: {' '.join(scan.positionals[1:])}")
    if scan.ignored:
        notes.append(f"accepted but not simulated: {' '.join(scan.ignored)}")
    host = values.get("host")
    if host is not None and host not in LOOPBACK_HOSTS:
        notes.append(f"--host {host} replaced by 127.0.0.1: the drill binds loopback only")
        values["host"] = "127.0.0.1"
    blocks = values.pop("num_gpu_blocks_override", None)
    block_size = values.get("block_size", SimConfig.block_size)
    if "kv_capacity_tokens" not in values:
        values["kv_capacity_tokens"] = (
            blocks * block_size if isinstance(blocks, int) else _DEFAULT_KV_TOKENS
        )
    if "max_model_len" not in values and isinstance(values["kv_capacity_tokens"], int):
        values["max_model_len"] = min(_DEFAULT_MAX_MODEL_LEN, values["kv_capacity_tokens"])
    if problems:
        raise ArgvError(problems)
    config = replace(SimConfig(), ignored_flags=tuple(scan.ignored), **values)
    config_problems = config.problems()
    if config_problems:
        raise ArgvError(config_problems)
    return ParsedArgv(config=config, notes=tuple(notes))
