"""The Go-template subset of Prometheus rule annotations, parsed at load, expanded per instance.

Prometheus expands an alert's labels and annotations with Go's text/template, the data being
`.Labels`, `.Value` and `.ExternalLabels` and the prelude `{{$labels := .Labels}}{{$value :=
.Value}}{{$externalLabels := .ExternalLabels}}` (rules/alerting.go). For rules Prometheus
evaluates, the app shows Prometheus' own expansion (the `annotations` of its alert objects);
for rules evaluated here, this module expands what rule files use: actions `{{ pipeline }}`
with `{{- -}}` trimming, `$labels.NAME`, `$value`, `.`, `.Labels.NAME`, `.Value`, string and
number literals, pipelines (`$value | humanize`), `{{ $x := … }}`, `{{ if }}`/`{{ with }}`
(with `{{ else }}`) … `{{ end }}`, and the functions in `FUNCTIONS` (Prometheus'
template.go: humanize*, printf, toUpper, …; Go's builtins or, and, not, eq, ne, lt, le, gt,
ge, len). Anything else (`range`, `template`, parentheses, `query`, an unknown function) is a
`TemplateError` when the rule file is loaded, with the offset in the text; nothing is ever
`eval`-ed: the template is data walked by this module. `query` (with `first`, `value`,
`label`) is accepted but not run locally: it expands to nothing.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import lru_cache

from oncall.alerts.template_funcs import FUNCTIONS, g4, truth

_ACTION = re.compile(r"\{\{(-\s)?(.*?)(\s-)?\}\}", re.DOTALL)
_TOKEN = re.compile(
    r'\s*(?:(?P<str>"(?:[^"\\]|\\.)*"|`[^`]*`)|(?P<num>-?\d+(?:\.\d*)?(?:[eE][-+]?\d+)?)'
    r"|(?P<var>\$[A-Za-z0-9_]*(?:\.[A-Za-z0-9_]+)*)|(?P<field>\.(?:[A-Za-z0-9_]+(?:\.[A-Za-z0-9_]+)*)?)"
    r"|(?P<ident>[A-Za-z_][A-Za-z0-9_]*)|(?P<pipe>\|)|(?P<other>\S))"
)


class TemplateError(ValueError):
    """A template this module cannot expand; `offset` is where in the text."""

    def __init__(self, message: str, offset: int) -> None:
        super().__init__(f"{message} (at offset {offset} of the template)")
        self.offset = offset


@dataclass(frozen=True)
class _Token:
    kind: str
    text: str
    offset: int


Command = list[_Token]


@dataclass
class _Node:
    """Literal text (`pipeline` None), an action, or an if/with block with its branches."""

    text: str = ""
    pipeline: list[Command] | None = None
    assign: str | None = None
    block: str | None = None  # "if" | "with"
    then: list[_Node] = field(default_factory=list)
    otherwise: list[_Node] = field(default_factory=list)


@dataclass(frozen=True)
class Template:
    """A parsed template; `render` never raises (a failed call renders Go's error text)."""

    source: str
    nodes: tuple[_Node, ...]

    def render(self, labels: Mapping[str, str], value: float | None) -> str:
        data = {"Labels": dict(labels), "Value": value if value is not None else 0.0,
                "ExternalLabels": {}}  # fmt: skip
        scope: dict[str, object] = {
            "$labels": data["Labels"], "$value": data["Value"], "$externalLabels": {}, "$": data,
        }  # fmt: skip
        out: list[str] = []
        _run(list(self.nodes), data, scope, out)
        return "".join(out)


#: The variables Prometheus' prelude declares (rules/alerting.go), and Go's `$` (the data).
_PRELUDE = frozenset({"$", "$labels", "$value", "$externalLabels"})


def _tokens(text: str, base: int, declared: list[set[str]]) -> list[Command]:
    """The commands of a pipeline; a variable not in `declared` (the scopes open here) is
    refused as Go's parser refuses it: `undefined variable "$label"`."""
    commands: list[Command] = [[]]
    for hit in _TOKEN.finditer(text):
        kind = hit.lastgroup or "other"
        token = _Token(kind, hit.group(kind), base + hit.start(kind))
        if kind == "var" and not any(token.text.split(".")[0] in names for names in declared):
            raise TemplateError(f'undefined variable "{token.text.split(".")[0]}"', token.offset)
        if kind == "pipe":
            commands.append([])
        elif kind == "other":
            raise TemplateError(f"{token.text!r} is not supported here", token.offset)
        else:
            commands[-1].append(token)
    if any(not command for command in commands):
        raise TemplateError("an empty command in the pipeline", base)
    for command in commands:
        head = command[0]
        if head.kind == "ident" and head.text not in FUNCTIONS and head.text not in _LITERALS:
            raise TemplateError(f'function "{head.text}" not defined', head.offset)
        for token in command[1:]:
            if token.kind == "ident" and token.text not in _LITERALS:
                raise TemplateError(f'function "{token.text}" as an argument', token.offset)
    return commands


_LITERALS: dict[str, object] = {"true": True, "false": False, "nil": None}


def parse(source: str) -> Template:
    """Parse `source`; TemplateError (with the offset) for what this subset cannot expand."""
    root: list[_Node] = []
    stack: list[tuple[_Node, bool, int]] = []  # open block, in its else branch, offset
    declared: list[set[str]] = [set(_PRELUDE)]  # variable scopes: the root, one per block

    def body() -> list[_Node]:
        if not stack:
            return root
        node, in_else, _ = stack[-1]
        return node.otherwise if in_else else node.then

    pos = 0
    trim_next = False
    for hit in _ACTION.finditer(source):
        literal = source[pos : hit.start()]
        if trim_next:
            literal = literal.lstrip()
        if hit.group(1):
            literal = literal.rstrip()
        if literal:
            body().append(_Node(text=literal))
        trim_next = bool(hit.group(3))
        pos = hit.end()
        _action(hit.group(2).strip(), hit.start(2), hit.start(), body(), stack, declared=declared)
    if stack:
        raise TemplateError("an {{ if }} or {{ with }} without its {{ end }}", stack[-1][2])
    rest = source[pos:]
    if "{{" in rest:
        raise TemplateError('"{{" is never closed by "}}"', pos + rest.index("{{"))
    if trim_next:
        rest = rest.lstrip()
    if rest:
        root.append(_Node(text=rest))
    return Template(source, tuple(root))


def _action(
    inner: str,
    at: int,
    start: int,
    body: list[_Node],
    stack: list[tuple[_Node, bool, int]],
    *,
    declared: list[set[str]],
) -> None:
    """One `{{ … }}` of `parse`: appended to `body`, or opening / closing a block."""
    word = inner.split(maxsplit=1)[0] if inner else ""
    if inner.startswith("/*") and inner.endswith("*/"):
        return
    if word in ("if", "with"):
        node = _Node(block=word, pipeline=_tokens(inner[len(word) :], at + len(word), declared))
        body.append(node)
        stack.append((node, False, start))
        declared.append(set())  # what the block declares ends with it, as in Go
    elif word == "else":
        if not stack or stack[-1][1] or inner != "else":
            raise TemplateError("an {{ else }} without its {{ if }} or {{ with }}", at)
        stack[-1] = (stack[-1][0], True, stack[-1][2])
    elif word == "end":
        if not stack:
            raise TemplateError("an {{ end }} without its {{ if }} or {{ with }}", at)
        stack.pop()
        declared.pop()
    elif word in ("range", "template", "define", "block", "break", "continue"):
        raise TemplateError(f"{{{{ {word} }}}} is not supported in rule templates here", at)
    elif (assign := re.match(r"(\$[A-Za-z0-9_]+)\s*:?=\s*", inner)) is not None:
        rest = inner[assign.end() :]
        pipeline = _tokens(rest, at + assign.end(), declared)
        if ":=" not in inner[: assign.end()] and not any(assign.group(1) in n for n in declared):
            raise TemplateError(f'undefined variable "{assign.group(1)}"', at)
        declared[-1].add(assign.group(1))
        body.append(_Node(pipeline=pipeline, assign=assign.group(1)))
    elif not inner:
        raise TemplateError("an empty action {{ }}", at)
    else:
        body.append(_Node(pipeline=_tokens(inner, at, declared)))


def _value(token: _Token, dot: object, scope: Mapping[str, object]) -> object:
    if token.kind == "str":
        raw = token.text
        return (
            raw[1:-1] if raw.startswith("`") else bytes(raw[1:-1], "utf-8").decode("unicode_escape")
        )
    if token.kind == "num":
        return float(token.text)
    if token.kind == "ident":
        return _LITERALS[token.text]
    if token.kind == "var":
        name, *path = token.text.split(".")
        current: object = scope.get(name, "")
    else:  # a field of dot
        current, path = dot, [p for p in token.text.split(".") if p]
    for part in path:
        current = current.get(part, "") if isinstance(current, dict) else ""
    return current


def _pipeline(commands: list[Command], dot: object, scope: Mapping[str, object]) -> object:
    result: object = None
    for index, command in enumerate(commands):
        head = command[0]
        args = [_value(t, dot, scope) for t in command[1:]]
        if index:
            args.append(result)
        if head.kind == "ident" and head.text in FUNCTIONS:
            try:
                result = FUNCTIONS[head.text](*args)
            except (TypeError, ValueError, re.error) as exc:
                result = f"<error calling {head.text}: {exc}>"
        else:
            result = _value(head, dot, scope)
    return result


def _text(value: object) -> str:
    if value is None:
        return "<no value>"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return _g_full(value)
    return str(value)


def _g_full(value: float) -> str:
    """A float as Go's template prints it (%v: shortest representation, exponent from 1e21)."""
    if math.isnan(value) or math.isinf(value):
        return g4(value)
    if value == int(value) and abs(value) < 1e21:
        return str(int(value))
    return repr(value)


def _run(nodes: list[_Node], dot: object, scope: dict[str, object], out: list[str]) -> None:
    for node in nodes:
        if node.pipeline is None:
            out.append(node.text)
            continue
        result = _pipeline(node.pipeline, dot, scope)
        if node.block is not None:
            chosen = node.then if truth(result) else node.otherwise
            inner_dot = result if node.block == "with" and truth(result) else dot
            _run(chosen, inner_dot, scope, out)
        elif node.assign is not None:
            scope[node.assign] = result
        else:
            out.append(_text(result))


@lru_cache(maxsize=4096)
def _parsed(source: str) -> Template | None:
    try:
        return parse(source)
    except TemplateError:
        return None


def expand(source: str, labels: Mapping[str, str], value: float | None) -> str:
    """`source` expanded for one instance; the text as it is when it cannot be parsed (the
    loader has reported that already). Parsed once per distinct text."""
    if "{{" not in source:
        return source
    template = _parsed(source)
    return source if template is None else template.render(labels, value)


def expand_all(
    annotations: Mapping[str, str], labels: Mapping[str, str], value: float | None
) -> dict[str, str]:
    return {name: expand(text, labels, value) for name, text in annotations.items()}


def template_error(source: str) -> str | None:
    """Why `source` cannot be expanded (the loader's check), or None."""
    try:
        parse(source)
    except TemplateError as exc:
        return str(exc)
    return None
