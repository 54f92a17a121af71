"""Label and field selectors with the apiserver's syntax.

Label selectors: `a=b`, `a==b`, `a!=b`, `a in (x,y)`, `a notin (x,y)`, `a`, `!a`, `a>1`, joined
by commas (AND), parsed by `label_parser` (a port of the apiserver's). Field selectors:
`path=value`, `path==value`, `path!=value`, joined by commas, over a per-resource allow-list of
fields, with apimachinery's escapes (`\\,`, `\\=`, `\\\\` in a value; k8s.io/apimachinery
pkg/fields/selector.go).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from oncall_drill.kube_sim import label_parser
from oncall_drill.kube_sim.errors import bad_request


@dataclass(frozen=True)
class Requirement:
    """One clause of a label selector."""

    key: str
    op: str  # "=", "!=", "in", "notin", "exists", "!", "gt", "lt"
    values: tuple[str, ...] = ()

    def matches(self, labels: Mapping[str, str]) -> bool:
        present = self.key in labels
        value = labels.get(self.key)
        if self.op == "exists":
            return present
        if self.op == "!":
            return not present
        if self.op in ("=", "in"):
            return present and value in self.values
        if self.op in ("gt", "lt"):
            return present and _compare(self.op, str(value), self.values[0])
        # "!=" and "notin" match objects without the label too, as in the apiserver.
        return not present or value not in self.values


def _compare(op: str, value: str, bound: str) -> bool:
    try:
        number = int(value)
    except ValueError:
        return False  # upstream: a label value that is no integer matches neither gt nor lt
    return number > int(bound) if op == "gt" else number < int(bound)


def parse_label_selector(text: str | None) -> list[Requirement]:
    """Parse a label selector as labels.Parse does; an empty selector matches everything.

    A bad selector is a 400 with labels.Parse's own message."""
    if not text or not text.strip():
        return []
    try:
        parsed = label_parser.parse(text)
    except label_parser.SelectorSyntaxError as exc:
        raise bad_request(str(exc)) from None
    return [Requirement(key, op, values) for key, op, values in parsed]


def labels_match(requirements: list[Requirement], labels: Mapping[str, str] | None) -> bool:
    present = labels or {}
    return all(r.matches(present) for r in requirements)


def selector_from_label_selector(selector: Mapping[str, Any]) -> list[Requirement]:
    """A metav1.LabelSelector (matchLabels + matchExpressions) as requirements."""
    reqs = [Requirement(k, "=", (str(v),)) for k, v in (selector.get("matchLabels") or {}).items()]
    op_map = {"In": "in", "NotIn": "notin", "Exists": "exists", "DoesNotExist": "!"}
    for expr in selector.get("matchExpressions") or []:
        values = tuple(str(v) for v in expr.get("values") or ())
        reqs.append(Requirement(str(expr["key"]), op_map[str(expr["operator"])], values))
    return reqs


@dataclass(frozen=True)
class FieldRequirement:
    """One clause of a field selector."""

    path: str
    value: str
    negate: bool

    def matches(self, obj: Mapping[str, Any]) -> bool:
        actual = field_value(obj, self.path)
        return (actual != self.value) if self.negate else (actual == self.value)


def field_value(obj: Mapping[str, Any], path: str) -> str:
    """The string form of a dotted field in obj; missing fields compare as ""."""
    current: Any = obj
    for part in path.split("."):
        if not isinstance(current, Mapping):
            return ""
        current = current.get(part)
    if current is None:
        return ""
    if isinstance(current, bool):
        return "true" if current else "false"
    if isinstance(current, Mapping):
        # `source` on events selects on the component.
        return str(current.get("component", ""))
    return str(current)


#: apimachinery's term operators, tried in this order at each position of a term.
_FIELD_OPERATORS = ("!=", "==", "=")


def _split_terms(text: str) -> list[str]:
    """Split on commas not escaped by a backslash (fields.splitTerms)."""
    terms: list[str] = []
    start, escaped = 0, False
    for i, char in enumerate(text):
        if escaped:
            escaped = False
        elif char == "\\":
            escaped = True
        elif char == ",":
            terms.append(text[start:i])
            start = i + 1
    terms.append(text[start:])
    return terms


def _split_term(term: str) -> tuple[str, str, str] | None:
    """(field, operator, value) at the term's first operator (fields.splitTerm); no trimming:
    `metadata.name = x` names the field `metadata.name `, which no resource supports."""
    for i in range(len(term)):
        for op in _FIELD_OPERATORS:
            if term.startswith(op, i):
                return term[:i], op, term[i + len(op) :]
    return None


def _unescape(value: str) -> str:
    """fields.UnescapeValue: `\\\\`, `\\,` and `\\=` stand for themselves; any other escape,
    a trailing backslash, or a bare `,` or `=` in a value is a 400."""
    out: list[str] = []
    escaped = False
    for char in value:
        if escaped:
            if char not in "\\,=":
                raise bad_request(f"invalid field selector: invalid escape sequence: \\{char}")
            out.append(char)
            escaped = False
        elif char == "\\":
            escaped = True
        elif char in ",=":
            # Upstream formats the rune with %v: its code point, "61" for "=".
            raise bad_request(f"invalid field selector: unescaped character in value: {ord(char)}")
        else:
            out.append(char)
    if escaped:
        raise bad_request("invalid field selector: invalid escape sequence: \\")
    return "".join(out)


def parse_field_selector(text: str | None, allowed: tuple[str, ...]) -> list[FieldRequirement]:
    """Parse a field selector as fields.ParseSelector does (escapes, empty terms skipped),
    rejecting fields this resource does not index (400, the apiserver's messages)."""
    if not text:
        return []
    reqs: list[FieldRequirement] = []
    for part in _split_terms(text):
        if not part:
            continue
        split = _split_term(part)
        if split is None:
            raise bad_request(f"invalid selector: '{text}'; can't understand '{part}'")
        path, op, value = split
        unescaped = _unescape(value)
        if path not in allowed:
            raise bad_request(f"field label not supported: {path}")
        reqs.append(FieldRequirement(path, unescaped, negate=op == "!="))
    return reqs


def make_filter(
    label_selector: str | None, field_selector: str | None, allowed: tuple[str, ...]
) -> Callable[[Mapping[str, Any]], bool]:
    """One predicate for both selectors of a list request."""
    labels = parse_label_selector(label_selector)
    fields = parse_field_selector(field_selector, allowed)

    def predicate(obj: Mapping[str, Any]) -> bool:
        meta = obj.get("metadata") or {}
        return labels_match(labels, meta.get("labels")) and all(f.matches(obj) for f in fields)

    return predicate
