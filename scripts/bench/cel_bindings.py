"""Compare the two CEL bindings for Python: import, compile and evaluation time, and agreement.

`common-expression-language` (module `cel`, Rust core) is the baseline; `cel-python` (module
`celpy`, pure Python) is shown with its ratio to it. Both must be installed to run this:

    .venv/bin/pip install common-expression-language cel-python
    .venv/bin/python scripts/bench/cel_bindings.py [--runs 7]

Import time is the median over fresh interpreters; compile and evaluation times are medians
over many calls in this process, over facts shaped like the runbook engine's (alert labels,
probe outputs as nested dicts and lists). Evaluation time includes handing the facts in (for
celpy, converting them with `json_to_cel`). Bounded: a few seconds in all.
"""

from __future__ import annotations

import argparse
import datetime
import functools
import importlib
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from typing import Any

FACTS: dict[str, Any] = {
    "alert": {
        "labels": {"alertname": "VLLMQueueBacklog", "namespace": "llm", "pod": "vllm-0"},
        "value": 42.0,
    },
    "gpu": {"memory_used_ratio": 0.97, "utilisation": 0.99, "temperature_c": 81, "count": 8},
    "vllm": {
        "num_requests_waiting": 17,
        "num_requests_running": 256,
        "kv_cache_usage": 0.93,
        "models": ["llama-3-70b", "llama-3-8b"],
    },
    "redis": {"hit_ratio": 0.71, "used_memory": 3_900_000_000, "maxmemory": 4_000_000_000},
    "pods": [
        {
            "name": f"vllm-{i}",
            "phase": "Running",
            "ready": i != 2,
            "restarts": i * 2,
            "last_termination_reason": "OOMKilled" if i == 2 else None,
        }
        for i in range(8)
    ],
}

EXPRESSIONS: dict[str, str] = {
    "and of comparisons": "gpu.memory_used_ratio > 0.95 && vllm.num_requests_waiting > 10",
    "filter + size": 'size(pods.filter(p, p.last_termination_reason == "OOMKilled")) > 0',
    "ternary": 'redis.hit_ratio < 0.8 ? "low" : "ok"',
    "exists / all": "pods.exists(p, p.restarts > 5) && pods.all(p, p.phase == 'Running')",
    "string ops": "alert.labels.pod.startsWith('vllm-') && alert.labels.namespace.matches('^llm$')",
    "list membership": "'llama-3-8b' in vllm.models && size(vllm.models) == 2",
    "map key / has": "has(alert.labels.pod) && alert.labels['namespace'] == 'llm'",
    "arithmetic": "double(redis.used_memory) / double(redis.maxmemory) > 0.95",
    "map macro": "pods.filter(p, !p.ready).map(p, p.name)",
}

# Extra expressions for the agreement check only: edge semantics where bindings could differ.
AGREEMENT_ONLY: dict[str, str] = {
    "int vs double compare": "gpu.count > 7.5",
    "int == double": "gpu.count == 8.0",
    "int + double": "gpu.count + 0.5",
    "int division": "7 / 2",
    "string size (non-ASCII)": "size('héllo')",
    "missing key": "gpu.nope",
    "division by zero": "1 / 0",
    "null field": "pods[0].last_termination_reason == null",
    "endsWith": "'vllm-0'.endsWith('-0')",
    "exists_one": "pods.exists_one(p, p.last_termination_reason == 'OOMKilled')",
}


def _median_seconds(fn: Callable[[], object], runs: int) -> float:
    samples = []
    for _ in range(runs):
        started = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - started)
    return statistics.median(samples)


def _import_time(module: str, runs: int) -> float:
    code = f"import time; t = time.perf_counter(); import {module}; print(time.perf_counter() - t)"
    samples = []
    for _ in range(runs):
        out = subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, check=True
        )
        samples.append(float(out.stdout))
    return statistics.median(samples)


class _Rust:
    name = "common-expression-language (cel)"

    def __init__(self) -> None:
        import cel

        self._cel = cel

    def compile(self, text: str) -> Any:
        return self._cel.compile(text)

    def evaluate(self, program: Any, facts: dict[str, Any]) -> Any:
        return program.execute(facts)

    def plain(self, value: Any) -> Any:
        return value


class _Pure:
    name = "cel-python (celpy)"

    def __init__(self) -> None:
        # Through importlib so that type-checking this script does not need cel-python, which
        # is not a dependency of oncall (the bench is run after installing it by hand).
        self._celpy: Any = importlib.import_module("celpy")
        self._celtypes: Any = importlib.import_module("celpy.celtypes")
        self._env = self._celpy.Environment()

    def compile(self, text: str) -> Any:
        return self._env.program(self._env.compile(text))

    def evaluate(self, program: Any, facts: dict[str, Any]) -> Any:
        activation = {k: self._celpy.json_to_cel(v) for k, v in facts.items()}
        result = program.evaluate(activation)
        if isinstance(result, Exception):  # celpy returns some errors as values
            raise result
        return result

    def plain(self, value: Any) -> Any:
        celtypes = self._celtypes
        if value is None or isinstance(value, celtypes.BoolType):
            return None if value is None else bool(value)
        if isinstance(value, celtypes.IntType | celtypes.UintType):
            return int(value)
        if isinstance(value, celtypes.DoubleType):
            return float(value)
        if isinstance(value, celtypes.StringType):
            return str(value)
        if isinstance(value, celtypes.ListType):
            return [self.plain(v) for v in value]
        if isinstance(value, celtypes.MapType):
            return {self.plain(k): self.plain(v) for k, v in value.items()}
        if isinstance(value, datetime.timedelta | datetime.datetime):
            return value
        return value


def _outcome(binding: _Rust | _Pure, text: str) -> str:
    try:
        program = binding.compile(text)
        return repr(binding.plain(binding.evaluate(program, FACTS)))
    except Exception as exc:
        return f"error ({type(exc).__name__})"


def _handing_in_cost() -> None:
    """Where cel's evaluation time goes: converting the facts, not running the program."""
    import cel

    program = cel.compile(EXPRESSIONS["and of comparisons"])
    used = {name: FACTS[name] for name in program.variables() if name in FACTS}
    context = cel.Context(FACTS)
    cases: dict[str, Callable[[], object]] = {
        "all facts as a dict": lambda: program.execute(FACTS),
        "referenced names only": lambda: program.execute(used),
        "prebuilt cel.Context": lambda: program.execute(context),
    }
    print(f"\ncel eval of {EXPRESSIONS['and of comparisons']!r}, by how facts are handed in:")
    for label, fn in cases.items():
        print(f"  {label:<24} {_median_seconds(fn, 2000) * 1e6:>8.1f} µs")


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--runs", type=int, default=5, help="fresh interpreters per import time")
    args = parser.parse_args()

    bindings: list[_Rust | _Pure] = [_Rust(), _Pure()]
    modules = {bindings[0].name: "cel", bindings[1].name: "celpy"}
    eval_runs = {bindings[0].name: 2000, bindings[1].name: 60}
    compile_runs = {bindings[0].name: 300, bindings[1].name: 15}

    rows: list[tuple[str, list[float]]] = []
    rows.append(("import (s)", [_import_time(modules[b.name], args.runs) for b in bindings]))
    for label, text in EXPRESSIONS.items():
        compile_times = []
        eval_times = []
        for b in bindings:
            compile_times.append(
                _median_seconds(functools.partial(b.compile, text), compile_runs[b.name])
            )
            program = b.compile(text)
            eval_times.append(
                _median_seconds(functools.partial(b.evaluate, program, FACTS), eval_runs[b.name])
            )
        rows.append((f"compile {label} (µs)", [t * 1e6 for t in compile_times]))
        rows.append((f"eval    {label} (µs)", [t * 1e6 for t in eval_times]))

    base, other = bindings
    print(f"{'measure':<40} {'cel (Rust)':>12} {'celpy':>12} {'celpy/cel':>10}")
    for label, (rust, pure) in rows:
        fmt = "{:>12.3f}" if label.startswith("import") else "{:>12.1f}"
        print(f"{label:<40} {fmt.format(rust)} {fmt.format(pure)} {pure / rust:>9.1f}x")

    _handing_in_cost()
    print("\nagreement (same result or both errors):")
    mismatches = 0
    for label, text in {**EXPRESSIONS, **AGREEMENT_ONLY}.items():
        a_out, b_out = _outcome(base, text), _outcome(other, text)
        same = a_out == b_out or (a_out.startswith("error") and b_out.startswith("error"))
        mismatches += not same
        mark = "same" if same else "DIFFERENT"
        print(f"  {mark:<9} {label:<26} cel={a_out[:40]:<42} celpy={b_out[:40]}")
    print(f"\n{mismatches} difference(s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
