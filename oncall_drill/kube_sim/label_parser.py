"""The apiserver's label-selector parser, token for token, with its error texts.

A port of the lexer and recursive-descent parser of k8s.io/apimachinery `pkg/labels/selector.go`
(`Lexer.Lex`, `Parser.parse`, `parseRequirement`, `NewRequirement`) and of the key/value checks
of `pkg/util/validation` (`IsQualifiedName`, `IsValidLabelValue`), so that a selector the real
apiserver refuses is refused here with the same message, and one it accepts (`a in ()`, `a=`,
`x in (in)`) is accepted. `gt`/`lt` (`a>1`) are parsed too, as upstream does.
"""

from __future__ import annotations

import re

EOS, IDENT, OPEN, CLOSE, COMMA, BANG = "eos", "ident", "(", ")", ",", "!"
SYMBOLS = {"(": OPEN, ")": CLOSE, ",": COMMA, "!": BANG, "=": "=", "==": "==", "!=": "!="}
SYMBOLS |= {">": "gt", "<": "lt"}
KEYWORDS = {"in": "in", "notin": "notin"}
SPECIAL = frozenset("=!(),><")
WHITESPACE = frozenset(" \t\r\n")
# selection.go's binaryOperators, in their order, for "found 'x', expected: ..." messages.
BINARY_OPERATORS = "in, notin, =, ==, !=, gt, lt"

_NAME = "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]"
_NAME_RE = re.compile(rf"^{_NAME}$")
_DNS1123_SUBDOMAIN = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*"
_DNS1123_RE = re.compile(rf"^{_DNS1123_SUBDOMAIN}$")
_VALUE = "(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?"
_VALUE_RE = re.compile(rf"^{_VALUE}$")
_NAME_MSG = (
    "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end "
    f"with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for "
    f"validation is '{_NAME}')"
)
_QUALIFIED_MSG = (
    "a qualified name must consist of alphanumeric characters, '-', '_' or '.', and must start and "
    "end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used "
    f"for validation is '{_NAME}') with an optional DNS subdomain prefix and '/' (e.g. "
    "'example.com/MyName')"
)
_PREFIX_MSG = (
    "prefix part a lowercase RFC 1123 subdomain must consist of lower case alphanumeric "
    "characters, '-' or '.', and must start and end with an alphanumeric character (e.g. "
    f"'example.com', regex used for validation is '{_DNS1123_SUBDOMAIN}')"
)
_VALUE_MSG = (
    "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or "
    "'.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or "
    f"'my_value',  or '12345', regex used for validation is '{_VALUE}')"
)


class SelectorSyntaxError(ValueError):
    """The text labels.Parse returns as its error (the apiserver answers it as a 400)."""


def _go_quote(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _invalid(path: str, value: str, detail: str) -> str:
    """field.Invalid(path, value, detail).Error()."""
    return f"{path}: Invalid value: {_go_quote(value)}: {detail}"


def _errors(text: str, most: int, pattern: re.Pattern[str], message: str, part: str) -> list[str]:
    """Too long and/or not matching, with `part` ("name part ", "") before the length rule."""
    errs = [f"{part}must be no more than {most} characters"] if len(text) > most else []
    return errs + ([] if pattern.match(text) else [message])


def qualified_name_errors(key: str) -> list[str]:
    """validation.IsQualifiedName."""
    parts = key.split("/")
    if len(parts) > 2:
        return [_QUALIFIED_MSG]
    name = parts[-1]
    if len(parts) == 2:
        if not parts[0]:
            return ["prefix part must be non-empty"]
        if errs := _errors(parts[0], 253, _DNS1123_RE, _PREFIX_MSG, "prefix part "):
            return errs
    if not name:
        return ["name part must be non-empty"]
    return _errors(name, 63, _NAME_RE, _NAME_MSG, "name part ")


def label_value_errors(value: str) -> list[str]:
    """validation.IsValidLabelValue."""
    return _errors(value, 63, _VALUE_RE, _VALUE_MSG, "")


def lex(text: str) -> list[tuple[str, str]]:
    """Lexer.Lex until the end of the string: (token, literal) pairs."""
    items: list[tuple[str, str]] = []
    pos, n = 0, len(text)
    while True:
        while pos < n and text[pos] in WHITESPACE:
            pos += 1
        if pos >= n:
            items.append((EOS, ""))
            return items
        if text[pos] in SPECIAL:
            # The longest run of special characters that is still an operator ("!=" over "!").
            start, last = pos, None
            while pos < n and text[pos] in SPECIAL:
                if text[start : pos + 1] in SYMBOLS:
                    last = pos + 1
                elif last is not None:
                    break
                pos += 1
            if last is None:
                items.append(("error", f"error expected: keyword found '{text[start:pos]}'"))
                continue
            pos = last
            literal = text[start:last]
            items.append((SYMBOLS[literal], literal))
        else:
            start = pos
            while pos < n and text[pos] not in SPECIAL and text[pos] not in WHITESPACE:
                pos += 1
            literal = text[start:pos]
            items.append((KEYWORDS.get(literal, IDENT), literal))


class _Parser:
    def __init__(self, text: str) -> None:
        self.items = lex(text)
        self.pos = 0

    def lookahead(self, values: bool = True) -> tuple[str, str]:
        tok, lit = self.items[self.pos]
        # In a value context `in` and `notin` are identifiers (`x in (in)`).
        return (IDENT if values and tok in KEYWORDS else tok), lit

    def consume(self, values: bool = True) -> tuple[str, str]:
        item = self.lookahead(values)
        self.pos += 1
        return item

    def parse(self) -> list[tuple[str, str, tuple[str, ...]]]:
        requirements = []
        while True:
            tok, lit = self.lookahead()
            if tok in (IDENT, BANG):
                try:
                    requirements.append(self.requirement())
                except SelectorSyntaxError as exc:
                    raise SelectorSyntaxError(f"unable to parse requirement: {exc}") from None
                tok, lit = self.consume()
                if tok == EOS:
                    return requirements
                if tok != COMMA:
                    raise SelectorSyntaxError(f"found '{lit}', expected: ',' or 'end of string'")
                tok2, lit2 = self.lookahead()
                if tok2 not in (IDENT, BANG):
                    raise SelectorSyntaxError(f"found '{lit2}', expected: identifier after ','")
            elif tok == EOS:
                return requirements
            else:
                raise SelectorSyntaxError(
                    f"found '{lit}', expected: !, identifier, or 'end of string'"
                )

    def requirement(self) -> tuple[str, str, tuple[str, ...]]:
        op = ""
        tok, key = self.consume()
        if tok == BANG:
            op = "!"
            tok, key = self.consume()
        if tok != IDENT:
            raise SelectorSyntaxError(f"found '{key}', expected: identifier")
        if errs := qualified_name_errors(key):
            raise SelectorSyntaxError(_invalid("<nil>", key, "; ".join(errs)))
        # `!a` ends the requirement whatever follows (`!a=b` then fails on the "=").
        if op == "!" or self.lookahead()[0] in (EOS, COMMA):
            return key, op or "exists", ()
        tok, lit = self.consume(values=False)
        if tok not in ("in", "notin", "=", "==", "!=", "gt", "lt"):
            raise SelectorSyntaxError(f"found '{lit}', expected: {BINARY_OPERATORS}")
        values = self.set_values() if tok in ("in", "notin") else self.exact_value()
        return self.checked(key, tok, values)

    def set_values(self) -> tuple[str, ...]:
        tok, lit = self.consume()
        if tok != OPEN:
            raise SelectorSyntaxError(f"found '{lit}' expected: '('")
        tok, lit = self.lookahead()
        if tok == CLOSE:  # "()" is the set {""}
            self.consume()
            return ("",)
        if tok not in (IDENT, COMMA):
            raise SelectorSyntaxError(f"found '{lit}', expected: ',', ')' or identifier")
        found: set[str] = set()
        while True:
            tok2, lit2 = self.consume()
            if tok2 == IDENT:
                found.add(lit2)
                tok3, lit3 = self.lookahead()
                if tok3 == CLOSE:
                    break
                if tok3 != COMMA:
                    raise SelectorSyntaxError(f"found '{lit3}', expected: ',' or ')'")
            elif tok2 == COMMA:  # empty members: "(,a)", "(a,)", "(a,,b)"
                if not found:
                    found.add("")
                tok3, _ = self.lookahead()
                if tok3 == CLOSE:
                    found.add("")
                    break
                if tok3 == COMMA:
                    self.consume()
                    found.add("")
            else:
                raise SelectorSyntaxError(f"found '{lit2}', expected: ',', or identifier")
        if self.consume()[0] != CLOSE:
            raise SelectorSyntaxError(f"found '{lit}', expected: ')'")
        return tuple(sorted(found))

    def exact_value(self) -> tuple[str, ...]:
        tok, _ = self.lookahead()
        if tok in (EOS, COMMA):
            return ("",)
        tok, lit = self.consume()
        if tok != IDENT:
            raise SelectorSyntaxError(f"found '{lit}', expected: identifier")
        return (lit,)

    @staticmethod
    def checked(key: str, op: str, values: tuple[str, ...]) -> tuple[str, str, tuple[str, ...]]:
        """NewRequirement's checks on what the parser built."""
        errs: list[str] = []
        if op in ("gt", "lt"):
            for i, value in enumerate(values):
                if not re.fullmatch(r"[+-]?\d+", value):
                    errs.append(
                        _invalid(
                            f"values[{i}]", value, "for 'Gt', 'Lt' operators, the value must be "
                            "an integer"
                        )
                    )  # fmt: skip
        for i, value in enumerate(values):
            if value_errs := label_value_errors(value):
                errs.append(_invalid(f"values[{i}][{key}]", value, "; ".join(value_errs)))
        if errs:
            raise SelectorSyntaxError(errs[0] if len(errs) == 1 else f"[{', '.join(errs)}]")
        return key, "=" if op == "==" else op, values


def parse(text: str) -> list[tuple[str, str, tuple[str, ...]]]:
    """(key, operator, values) of each requirement, sorted by key as labels.Parse sorts them.

    Operators: "=", "!=", "in", "notin", "exists", "!", "gt", "lt"."""
    return sorted(_Parser(text).parse(), key=lambda r: r[0])
