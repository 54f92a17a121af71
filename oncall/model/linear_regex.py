"""Regular expressions that others write, matched in time linear in the text (RE2).

A runbook's `kube.logs` pattern runs over up to 2,000 lines a crashing process wrote; a label
matcher (`match:` of a runbook, the board's `/` filter, `--match`) and an alert template's
`match` / `reReplaceAll` (a cluster's PrometheusRule is anyone's text) over label values
Prometheus sent. Python's `re` backtracks: `(a+)+$` over one log line of 30 "a"s takes
seconds, over a longer one longer than any step's timeout, and it holds the event loop (and
the GIL) all that time, so no timeout or `q` can stop it (docs/audit.md: a `kube.logs` pattern ran
over 100 s). RE2 (`google-re2`, the engine of Prometheus' and Alertmanager's own matchers)
answers in time linear in the text and refuses what it cannot do so: back-references and
look-around are errors when the runbook loads, with RE2's reason. Its compiled program is
bounded too (`max_mem`, RE2's default 8 MiB): `(a{1000}){1000}` is refused, not built.

`backtracking_risk` names the shape that makes a pattern catastrophic in a backtracking
engine (a quantified group that itself holds a quantifier, `(a+)+`): harmless here, but
`runbook lint` reports it, since the same pattern copied into grep -P, Python or a log
pipeline is not.
"""

from __future__ import annotations

import functools
from types import ModuleType
from typing import Protocol


class RegexError(ValueError):
    """A pattern RE2 refuses; the message says why in RE2's words."""


class LinearPattern(Protocol):
    """What oncall uses of a compiled pattern (RE2's, which `re.Pattern` also fits)."""

    @property
    def pattern(self) -> str: ...

    def search(self, text: str, /) -> object | None: ...

    def fullmatch(self, text: str, /) -> object | None: ...

    def sub(self, replacement: str, text: str, /) -> str: ...


@functools.cache
def _re2() -> tuple[ModuleType, object]:
    # Imported on first use (~9 ms): most commands compile no regex (STYLE 11).
    import re2

    options = re2.Options()
    options.log_errors = False  # RE2 would print its refusal to stderr: it is raised instead
    return re2, options


def compile_linear(pattern: str) -> LinearPattern:
    """`pattern` compiled by RE2; `RegexError` with RE2's reason when it is refused."""
    re2, options = _re2()
    try:
        compiled = re2.compile(pattern, options=options)
    except re2.error as exc:
        detail = exc.args[0] if exc.args else exc
        if isinstance(detail, bytes):
            detail = detail.decode("utf-8", errors="replace")
        raise RegexError(f"not a regular expression RE2 accepts: {detail}") from None
    except (TypeError, ValueError) as exc:  # a lone surrogate in the pattern
        raise RegexError(f"not a regular expression RE2 accepts: {exc}") from None
    return _Linear(compiled)


def _utf8(text: str) -> str:
    """text as RE2 can take it: a lone surrogate (JSON may carry "\\ud800") becomes "?"."""
    return text.encode("utf-8", errors="replace").decode("utf-8")


class _Linear:
    """RE2's pattern, taking any `str`: RE2 matches UTF-8, and a label value or a log line
    decoded from JSON may hold a lone surrogate, which has none (re would take it)."""

    __slots__ = ("_compiled",)

    def __init__(self, compiled: LinearPattern) -> None:
        self._compiled = compiled

    @property
    def pattern(self) -> str:
        return self._compiled.pattern

    def search(self, text: str, /) -> object | None:
        try:
            return self._compiled.search(text)
        except UnicodeEncodeError:
            return self._compiled.search(_utf8(text))

    def fullmatch(self, text: str, /) -> object | None:
        try:
            return self._compiled.fullmatch(text)
        except UnicodeEncodeError:
            return self._compiled.fullmatch(_utf8(text))

    def sub(self, replacement: str, text: str, /) -> str:
        try:
            return self._compiled.sub(replacement, text)
        except UnicodeEncodeError:
            return self._compiled.sub(_utf8(replacement), _utf8(text))


#: A group (without groups inside) holding a quantifier, itself quantified: `(a+)+`, `(\w*x)*`,
#: `(a|b+){2,}`. Escaped characters and classes are skipped as one token.
_NESTED_QUANTIFIER = (
    r"\((?:\\.|\[(?:\\.|[^\]\\])*\]|[^()\\\[])*[*+}](?:\\.|\[(?:\\.|[^\]\\])*\]|[^()\\\[])*"
    r"\)(?:[*+]|\{\d+,\d*\})"
)


@functools.cache
def _nested_quantifier() -> LinearPattern:
    return compile_linear(_NESTED_QUANTIFIER)


def backtracking_risk(pattern: str) -> str | None:
    """The part of `pattern` that backtracks catastrophically in engines other than RE2."""
    found = _nested_quantifier().search(_utf8(pattern))
    return str(found.group()) if found is not None else None  # type: ignore[attr-defined]
