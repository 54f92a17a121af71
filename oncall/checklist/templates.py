"""`{{ CEL }}` templates in runbook strings: summaries, probe parameters, proposal parameters.

A string may hold any number of `{{ expression }}` parts, each optionally followed by a Python
format spec after ` | ` (`{{ facts.max_memory_used_ratio | .0% }}`, `{{ facts.free | ,d }}`).
A string that is exactly one template without a spec keeps the expression's type (so
`value: "{{ facts.free_mib > 8000 ? 256 : 64 }}"` is the int 256, not the text "256"); anything
else renders as text. Values are formatted with `format(value, spec)` only — no attribute
access, no `str.format` — so a template can do nothing an expression cannot.

The spec `join` writes a list as words: `{{ facts.reasons | join }}` is "BackOff, Created"
(not "['BackOff', 'Created']"), an empty list "none"; each item as a value without a spec.

None is "n/a" (with or without a spec); without a spec, floats have 4 significant
digits and bools are true/false.
`}}` cannot appear inside a template's expression (write nested map literals across parts).
"""

from __future__ import annotations

import re
from collections.abc import Collection, Mapping
from dataclasses import dataclass

from oncall.checklist.expressions import CompiledExpression, ExpressionError, compile_expression

_PART = re.compile(r"\{\{(.*?)\}\}", re.DOTALL)
# A Python format spec for numbers and strings: [[fill]align][sign][#][0][width][,_][.prec][type]
_SPEC = re.compile(r"(?:.?[<>=^])?[+\- ]?#?0?\d*[,_]?(?:\.\d+)?[bcdeEfFgGnosxX%]?")
JOIN = "join"
_SPEC_SPLIT = re.compile(r"^(.*[^|])\|(?!\|)([^|]*)$", re.DOTALL)


@dataclass(frozen=True)
class TemplatePart:
    expression: CompiledExpression
    spec: str | None
    span: tuple[int, int]  # offsets of the whole `{{ … }}` in the template string


@dataclass(frozen=True)
class Template:
    """A compiled template string; `render` evaluates its parts over facts."""

    text: str
    parts: tuple[TemplatePart, ...]
    bare: bool = False  # exactly one `{{ expr }}` without a spec: render keeps its type

    @property
    def is_plain(self) -> bool:
        return not self.parts

    @property
    def names(self) -> set[str]:
        return {name for part in self.parts for name in part.expression.names}

    def render(self, facts: Mapping[str, object]) -> object:
        """The value (single bare template) or the rendered text; ExpressionError on failure."""
        if not self.parts:
            return self.text
        if self.bare:
            return self.parts[0].expression.evaluate(facts)
        out: list[str] = []
        cursor = 0
        for part in self.parts:
            out.append(self.text[cursor : part.span[0]])
            out.append(format_value(part.expression.evaluate(facts), part.spec))
            cursor = part.span[1]
        out.append(self.text[cursor:])
        return "".join(out)


def format_value(value: object, spec: str | None) -> str:
    """Text of one template value; a spec that does not fit the value is an ExpressionError."""
    if value is None:
        return "n/a"  # whatever the spec: a missing number reads the same everywhere
    if spec == JOIN:
        if not isinstance(value, list | tuple):
            raise ExpressionError(f"join applies to a list, not {value!r}")
        return ", ".join(format_value(item, None) for item in value) or "none"
    if spec:
        try:
            return format(value, spec)
        except (TypeError, ValueError) as exc:
            raise ExpressionError(f"format {spec!r} does not apply to {value!r}: {exc}") from exc
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return f"{value:.4g}"
    return str(value)


def compile_template(text: str, *, names: Collection[str]) -> Template:
    """Compile every `{{ }}` part; ExpressionError carries the column within `text` (1-based)."""
    parts: list[TemplatePart] = []
    for match in _PART.finditer(text):
        inner = match.group(1)
        start = match.start(1)
        spec: str | None = None
        split = _SPEC_SPLIT.match(inner)
        if split and (split.group(2).strip() == JOIN or _SPEC.fullmatch(split.group(2).strip())):
            inner, spec = split.group(1), split.group(2).strip() or None
        try:
            expression = compile_expression(inner.strip(), names=names)
        except ExpressionError as exc:
            lead = len(inner) - len(inner.lstrip())
            column = None if exc.column is None else start + lead + exc.column
            raise ExpressionError(exc.message, column) from exc
        parts.append(TemplatePart(expression, spec, match.span()))
    if "{{" in _PART.sub("", text):
        raise ExpressionError("'{{' is never closed with '}}'", text.find("{{") + 1)
    bare = len(parts) == 1 and parts[0].spec is None and _PART.fullmatch(text.strip()) is not None
    return Template(text, tuple(parts), bare)
