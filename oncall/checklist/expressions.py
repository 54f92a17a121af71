"""CEL expressions of runbooks: compiled when a runbook loads, evaluated only over facts handed in.

A step's `expect`, its optional `when` and summary values are CEL (docs/authoring.md): an
allow-list language without loops or side effects, the one Kubernetes admission policies use.
Nothing here calls Python's `eval` or `exec`.

Binding: `common-expression-language` (module `cel`, a Rust core), chosen by measurement with
`scripts/bench/cel_bindings.py` against `cel-python` (`celpy`, pure Python), on 9 realistic
expressions over runbook-shaped facts (8 pods, gpu, vllm, redis, alert):

- compile: cel 30–70 µs, celpy 280–970 µs (6–19x slower);
- evaluate: cel 120–290 µs when handed all facts, celpy 550–4500 µs (2–29x slower, worst on
  the `exists`/`filter` macros runbooks use most). cel's time is almost all converting facts:
  handed only the names an expression references it takes ~20 µs, so `evaluate` does that;
- import: cel ~0.3 s, celpy ~0.1 s — cel's package `__init__` loads its command-line tool
  (typer, rich, prompt_toolkit). So the binding is imported lazily, on the first compile, and
  `import oncall.checklist.expressions` stays cheap for commands that never touch a runbook;
- agreement: same results on all 9, and on 7 of 10 edge cases; the 3 differences are listed
  under "Semantics" below.

What runbook authors get: `&&`, `||`, `!`, `? :`, comparisons, arithmetic, `in`; field access
`gpu.memory_used_ratio` and indexing `alert.labels['pod']`, `pods[0]`; the macros `has(x.f)`,
`l.exists(p, …)`, `l.all(p, …)`, `l.exists_one(p, …)`, `l.filter(p, …)`, `l.map(p, …)`;
`size`, `contains`, `startsWith`, `endsWith`, `matches` (RE2 syntax); conversions `int`,
`uint`, `double`, `string`; `duration('5m')`, `timestamp('…')`; list and map literals.
Not in this binding: the string extensions (`split`, `lowerAscii`, `trim`, …), `math.*`,
`cel.bind` — using them fails at evaluation with "unknown function or name".

Semantics to know (tested in tests/checklist/test_expressions.py):

- facts' Python ints are CEL `int`, floats are `double`, and they stay so (a metric value read
  as 17.0 is a double). Comparisons across int and double compare numerically (`1 < 1.5`,
  `8 == 8.0` are true; celpy refuses them), but arithmetic does not mix: `n + 0.5` with an int
  `n` is a type error — write `double(n) + 0.5`;
- `size('héllo')` is 6 in this binding (UTF-8 bytes), 5 in the CEL spec and celpy;
- a missing map key is an error, not null: test with `has(x.key)` first;
- results come back as plain Python: bool, int, float, str, None, list, dict; durations as
  seconds (float), timestamps as ISO 8601 strings, bytes decoded as UTF-8.

Bounds: an expression is at most `MAX_EXPRESSION_CHARS` characters; the facts an expression
references are refused past `MAX_FACTS_DEPTH` levels of nesting or about `MAX_FACTS_BYTES` of
JSON. CEL has no loops, but its macros nest, and the binding holds the GIL while it evaluates:
`evaluate` refuses (`ExpressionBudgetError`) an expression whose cost over the facts given is
past a budget (`oncall.checklist.cost`, by default `INLINE_COST`); the engine evaluates such
an expression in a process of its own, killed at the step's deadline
(`oncall.checklist.isolated`).
"""

from __future__ import annotations

import datetime
import difflib
import functools
import re
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from types import ModuleType
from typing import TYPE_CHECKING

from oncall.checklist.cost import INLINE_COST, Shape, shape_of
from oncall.errors import OncallError

if TYPE_CHECKING:
    import cel

MAX_EXPRESSION_CHARS = 2000
MAX_FACTS_BYTES = 1_000_000
MAX_FACTS_DEPTH = 32

# Type names CEL reports as identifiers (`type(x) == int`); always allowed.
_TYPE_NAMES = frozenset(
    {"bool", "bytes", "double", "int", "list", "map", "null_type", "string", "type", "uint"}
)
_INT64_MIN = -(2**63)
_INT64_MAX = 2**63 - 1

# Macros whose first argument binds a name for the rest of the call (`pods.exists(p, …)`).
_BINDER = re.compile(r"\.\s*(?:all|exists_one|exists|map|filter)\s*\(\s*([A-Za-z_]\w*)\s*,")
# CEL string and bytes literals, blanked out before looking for identifiers in the text.
_STRING = re.compile(
    r"""[rRbB]{0,2}(?:\"\"\"(?:\\.|[^\\])*?\"\"\"|'''(?:\\.|[^\\])*?'''"""
    r"""|"(?:\\.|[^"\\\n])*"|'(?:\\.|[^'\\\n])*')""",
    re.DOTALL,
)
_SYNTAX = re.compile(r"ERROR: <input>:(\d+):(\d+): (?:Syntax error: )?([^\n]*)")
_EXPECTING = re.compile(r" expecting (?:\{[^}]*\}|\S+)")
_UNDEFINED = re.compile(r"Undefined variable or function: '([^']*)'")
_RECURSION = re.compile(r"Recursion limit of (\d+) exceeded")


class ExpressionError(OncallError):
    """A runbook expression that cannot compile or evaluate.

    `column` is 1-based within the expression text (counting a newline as one character), or
    None when it is not known; the runbook loader adds the file, line and key.
    """

    def __init__(self, message: str, column: int | None = None) -> None:
        self.message = message
        self.column = column
        super().__init__(message)


class ExpressionBudgetError(ExpressionError):
    """An expression not evaluated (or not to the end) because it costs more than it may:
    the step that needs it is `unknown`, not wrong."""


@functools.cache
def _binding() -> ModuleType:
    # Imported on first use: `import cel` costs ~0.3 s because the package loads its own
    # command-line tool (typer, rich, prompt_toolkit); see the module docstring. oncall never
    # uses that tool: an empty stand-in for `cel.cli` lets the package import without it
    # (0.28 s → 0.02 s of CPU, every fresh `oncall check` with an expression).
    import sys
    from types import ModuleType

    sys.modules.setdefault("cel.cli", ModuleType("cel.cli"))
    import cel

    return cel


def _is_panic(exc: BaseException) -> bool:
    # A Rust panic surfaces as pyo3's PanicException, which derives from BaseException.
    return type(exc).__name__ == "PanicException"


@dataclass(frozen=True)
class CompiledExpression:
    """An expression checked against the fact names it may use; evaluate it many times."""

    text: str
    names: tuple[str, ...]  # the top-level fact names it references
    _program: cel.Program
    shape: Shape

    def used(self, facts: Mapping[str, object]) -> dict[str, object]:
        """The facts the expression references (converting facts is most of CEL's cost)."""
        used: dict[str, object] = {}
        for name in self.names:
            if name not in facts:
                raise ExpressionError(f"no fact named {name!r} was given to this expression")
            used[name] = facts[name]
        return used

    def cost(self, facts: Mapping[str, object]) -> float:
        """The bound on its evaluation's steps over `facts` (`oncall.checklist.cost`)."""
        return self.shape.estimate(_check_facts(self.used(facts)))

    def evaluate(self, facts: Mapping[str, object], *, budget: float = INLINE_COST) -> object:
        """The value of the expression over `facts`, as plain Python values.

        Only the facts the expression references are handed to CEL and checked against the
        size and depth caps; `ExpressionBudgetError` when its cost is past `budget`.
        """
        used = self.used(facts)
        cost = self.shape.estimate(_check_facts(used))
        if cost > budget:
            raise ExpressionBudgetError(
                f"too costly to evaluate: {self.shape.nesting()}, about {cost:.1e} steps "
                f"over these facts (the budget is {budget:.0e})"
            )
        try:
            value = self._program.execute(used)
        except BaseException as exc:
            if not isinstance(exc, Exception) and not _is_panic(exc):
                raise
            raise ExpressionError(_evaluation_message(exc)) from exc
        return _to_plain(value)


def compile_expression(text: str, *, names: Collection[str]) -> CompiledExpression:
    """Compile `text`, allowing only the top-level names in `names`.

    Raises `ExpressionError` for a too-long expression, a syntax error (with its column) and a
    reference to a name not in `names` (with its column and the nearest known name).
    """
    if len(text) > MAX_EXPRESSION_CHARS:
        raise ExpressionError(
            f"expression is {len(text)} characters long; the limit is {MAX_EXPRESSION_CHARS}"
        )
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise ExpressionError("expression is not valid Unicode text", exc.start + 1) from exc
    try:
        program = _binding().compile(text)
        referenced: list[str] = program.variables()
    except BaseException as exc:
        if not isinstance(exc, Exception) and not _is_panic(exc):
            raise
        raise _syntax_error(text, exc) from exc
    plain = _STRING.sub(lambda m: " " * len(m.group()), text)
    bound = set(_BINDER.findall(plain))
    allowed = set(names)
    known_here = allowed | bound | _TYPE_NAMES
    unknown = [n for n in referenced if n not in known_here]
    if unknown:
        located = sorted((_column_of(plain, n) or len(text) + 1, n) for n in unknown)
        column, name = located[0]
        hint = difflib.get_close_matches(name, sorted(allowed), n=1, cutoff=0.6)
        known = ", ".join(sorted(allowed)) or "none"
        suggestion = f" (did you mean {hint[0]!r}?)" if hint else f"; known names: {known}"
        raise ExpressionError(
            f"unknown name {name!r}{suggestion}",
            column if column <= len(text) else None,
        )
    names_used = tuple(n for n in referenced if n in allowed)
    return CompiledExpression(text, names_used, program, shape_of(plain))


def evaluate_bool(expression: CompiledExpression, facts: Mapping[str, object]) -> bool:
    """Evaluate an expression that must be true or false, such as a step's `expect` or `when`."""
    value = expression.evaluate(facts)
    if not isinstance(value, bool):
        raise ExpressionError(
            f"expression must give true or false, but gave {_cel_type(value)} {value!r}"
        )
    return value


def _column_of(plain: str, name: str) -> int | None:
    match = re.search(rf"(?<![\w.]){re.escape(name)}\b", plain)
    return match.start() + 1 if match else None


def _syntax_error(text: str, exc: BaseException) -> ExpressionError:
    match = _SYNTAX.search(str(exc))
    if match is None:
        first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        return ExpressionError(f"syntax error: {first}")
    line, column, detail = int(match[1]), int(match[2]), match[3]
    lines = text.split("\n")
    offset = sum(len(earlier) + 1 for earlier in lines[: line - 1])
    recursion = _RECURSION.search(detail)
    if recursion:  # the parser's own bound on nesting (no stack to overflow)
        detail = f"nested deeper than {recursion[1]} levels"
    elif detail.startswith("mismatched input '<EOF>'"):
        detail = "unexpected end of expression"
    else:
        detail = _EXPECTING.sub("", detail)
    return ExpressionError(f"syntax error: {detail}", offset + column)


def _evaluation_message(exc: BaseException) -> str:
    text = str(exc)
    if isinstance(exc, KeyError):
        key = exc.args[0] if exc.args else "?"
        return f"no such key {key!r} (test for it with has(…))"
    if isinstance(exc, IndexError):
        return f"list index out of range ({text})"
    if isinstance(exc, ZeroDivisionError):
        return text.replace(" in CEL expression", "")
    if isinstance(exc, OverflowError):
        return f"integer overflow: {text}"
    if isinstance(exc, TypeError):
        first = text.split(". ", maxsplit=1)[0].rstrip(".")
        return (
            f"type mismatch: {first}; CEL does not convert between int and double "
            "in arithmetic, write double(x) or int(x)"
        )
    undefined = _UNDEFINED.search(text)
    if undefined:
        return f"unknown function or name {undefined[1]!r}"
    return f"evaluation failed: {text or type(exc).__name__}"


def _check_facts(facts: Mapping[str, object]) -> int:
    """Refuse facts CEL should not see: too deep, too big, or of types it has no name for.
    Returns the length of their longest list or map (what a macro may iterate over)."""
    size = longest = 0
    stack: list[tuple[str, object, int]] = [(name, value, 1) for name, value in facts.items()]
    while stack:
        path, value, depth = stack.pop()
        if depth > MAX_FACTS_DEPTH:
            raise ExpressionError(
                f"facts nest deeper than {MAX_FACTS_DEPTH} levels (at {path[:80]})"
            )
        if value is None or isinstance(value, bool):
            size += 5
        elif isinstance(value, int):
            if not _INT64_MIN <= value <= _INT64_MAX:
                raise ExpressionError(f"fact {path} = {value} does not fit CEL's 64-bit int")
            size += len(str(value))
        elif isinstance(value, float):
            size += 24
        elif isinstance(value, str):
            size += len(value) + 2
        elif isinstance(value, list | tuple):
            size += 2 + len(value)
            longest = max(longest, len(value))
            stack.extend((f"{path}[{i}]", item, depth + 1) for i, item in enumerate(value))
        elif isinstance(value, Mapping):
            size += 2
            longest = max(longest, len(value))
            for key, item in value.items():
                if not isinstance(key, str):
                    raise ExpressionError(f"fact {path} has a non-string key {key!r}")
                size += len(key) + 4
                stack.append((f"{path}.{key}", item, depth + 1))
        else:
            raise ExpressionError(
                f"fact {path} is a {type(value).__name__}; facts are "
                "str, int, float, bool, None, lists and maps"
            )
        if size > MAX_FACTS_BYTES:
            raise ExpressionError(f"facts are larger than {MAX_FACTS_BYTES} bytes as JSON")
    return longest


def _to_plain(value: object) -> object:
    """CEL's result as bool, int, float, str, None, list or dict."""
    if value is None or isinstance(value, bool | int | float | str):
        return value
    if isinstance(value, list | tuple):
        return [_to_plain(item) for item in value]
    if isinstance(value, dict):
        return {_to_plain(k): _to_plain(v) for k, v in value.items()}
    if isinstance(value, bytes):
        return value.decode("utf-8", errors="backslashreplace")
    if isinstance(value, datetime.timedelta):
        return value.total_seconds()
    if isinstance(value, datetime.datetime):
        return value.isoformat()
    raise ExpressionError(f"expression gave a {type(value).__name__}, which runbooks cannot use")


def _cel_type(value: object) -> str:
    if value is None:
        return "null"
    return {int: "int", float: "double", str: "string", list: "list", dict: "map"}.get(
        type(value), type(value).__name__
    )
