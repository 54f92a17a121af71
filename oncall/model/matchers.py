"""Label matchers as Prometheus writes them (`severity="page"`, `team=~"infer.*"`), plus words.

A `Selection` is what the board's `/` filter, `oncall alerts --match` and the setting
`alerts.from_prometheus` accept: zero or more matchers, optionally in braces and separated by
commas (`{severity="page", team=~"infer.*"}`), and free words matched as text. Matchers use
Prometheus' four operators; regular expressions are anchored at both ends, as in Prometheus
(`=~"infer.*"` matches `inference`, not `my-inference`), with RE2 as in Prometheus
(`oncall.model.linear_regex`: linear in the label value, which a backend sent; back-references
and look-around refused, as Prometheus refuses them). A label that is absent has the value "", as in
Prometheus (`team!="x"` matches a rule without `team`).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field

from oncall.model.alerts import RuleStatus
from oncall.model.linear_regex import LinearPattern, RegexError, compile_linear

_MATCHER = re.compile(
    r"""\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*(=~|!~|!=|=)\s*("(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*')\s*,?"""
)
_ESCAPES = {"n": "\n", "t": "\t", "\\": "\\", '"': '"', "'": "'"}


class MatcherError(ValueError):
    """A matcher that cannot be read; the message says where."""


def _unquote(text: str) -> str:
    body = text[1:-1]
    return re.sub(r"\\(.)", lambda m: _ESCAPES.get(m.group(1), "\\" + m.group(1)), body)


@dataclass(frozen=True)
class Matcher:
    name: str
    op: str
    value: str
    pattern: LinearPattern | None = field(default=None, compare=False)

    def matches(self, labels: Mapping[str, str]) -> bool:
        have = labels.get(self.name, "")
        if self.op == "=":
            return have == self.value
        if self.op == "!=":
            return have != self.value
        assert self.pattern is not None  # set for =~ and !~
        found = self.pattern.fullmatch(have) is not None
        return found if self.op == "=~" else not found

    def __str__(self) -> str:
        value = self.value.replace("\\", "\\\\").replace('"', '\\"')
        return f'{self.name}{self.op}"{value}"'


def matcher(name: str, op: str, value: str) -> Matcher:
    if op in ("=~", "!~"):
        try:
            return Matcher(name, op, value, compile_linear(value))
        except RegexError as exc:
            raise MatcherError(f"invalid regular expression {value!r} for {name}: {exc}") from exc
    return Matcher(name, op, value)


@dataclass(frozen=True)
class Selection:
    """Matchers (all must match) and words (each must appear in the text)."""

    matchers: tuple[Matcher, ...] = ()
    words: tuple[str, ...] = ()

    @property
    def empty(self) -> bool:
        return not self.matchers and not self.words

    def matches(self, labels: Mapping[str, str], text: str = "") -> bool:
        if not all(m.matches(labels) for m in self.matchers):
            return False
        lowered = text.lower()
        return all(word in lowered for word in self.words)

    def __str__(self) -> str:
        parts = []
        if self.matchers:
            parts.append("{" + ", ".join(map(str, self.matchers)) + "}")
        parts.extend(self.words)
        return " ".join(parts)


def parse_selection(text: str, *, words: bool = True) -> Selection:
    """Matchers and words from `text`; with `words=False` anything but matchers is an error.

    Raises MatcherError naming the offset of what could not be read (a bad regex, a value
    without quotes such as `severity=page`, an unclosed brace).
    """
    found: list[Matcher] = []
    rest: list[str] = []
    stripped = text.strip()
    braced = stripped.startswith("{")
    if braced:
        if "}" not in stripped:
            raise MatcherError("a '{' without its closing '}'")
        inner, _, after = stripped[1:].partition("}")
        _matchers_only(inner, found)
        stripped = after
    pos = 0
    while pos < len(stripped):
        if stripped[pos].isspace():
            pos += 1
            continue
        hit = _MATCHER.match(stripped, pos)
        if hit:
            found.append(matcher(hit.group(1), hit.group(2), _unquote(hit.group(3))))
            pos = hit.end()
            continue
        end = pos
        while end < len(stripped) and not stripped[end].isspace():
            end += 1
        word = stripped[pos:end]
        if re.match(r"[a-zA-Z_][a-zA-Z0-9_]*(=~|!~|!=|=)", word):
            raise MatcherError(f'the value of {word!r} needs quotes, as in severity="page"')
        if not words:
            raise MatcherError(f'{word!r} is not a label matcher such as severity="page"')
        rest.append(word.lower())
        pos = end
    return Selection(tuple(found), tuple(rest))


def _matchers_only(text: str, found: list[Matcher]) -> None:
    pos = 0
    while pos < len(text):
        if text[pos].isspace() or text[pos] == ",":
            pos += 1
            continue
        hit = _MATCHER.match(text, pos)
        if hit is None:
            raise MatcherError(f'not a label matcher at {text[pos:]!r} (e.g. severity="page")')
        found.append(matcher(hit.group(1), hit.group(2), _unquote(hit.group(3))))
        pos = hit.end()


def status_matches(selection: Selection, status: RuleStatus) -> bool:
    """Whether a board row matches: its matchers against the rule's labels with `alertname`,
    or against one of its instances' label sets (so `/pod=~"vllm-.*"` finds the rules with
    such an instance); its words in the name, state, severity, group and summary."""
    if selection.empty:
        return True
    rule = status.rule
    text = " ".join((rule.name, status.state, rule.severity, rule.group,
                     rule.annotations.get("summary", "")))  # fmt: skip
    own = {**rule.labels, "alertname": rule.name}
    if selection.matches(own, text):
        return True
    if not selection.matchers:
        return False
    return any(selection.matches({**own, **i.labels}, text) for i in status.instances)
