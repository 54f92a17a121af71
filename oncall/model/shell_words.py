"""POSIX shell words with the position of each character kept, for editing a value in place.

`shell_words(script)` splits an `sh -c` script the way the shell does (quotes, backslashes,
comments, control operators) and records, for every character a word kept, its index in the
script; `contiguous_span` says whether a word's characters sit side by side in the script
(so replacing that slice changes exactly that word). Expansions (`$N`, `$(cmd)`) are left as
text. Never raises: an unterminated quote ends at the end of the script. Pure, no I/O.
"""

from __future__ import annotations

from dataclasses import dataclass

OPERATORS = frozenset(";&|()<>")


@dataclass
class Word:
    """A shell word with the position in the script of every character it kept."""

    chars: list[str]
    positions: list[int]
    operator: bool = False

    @property
    def word(self) -> str:
        return "".join(self.chars)

    def add(self, char: str, position: int) -> None:
        self.chars.append(char)
        self.positions.append(position)


def contiguous_span(token: Word) -> tuple[int, int] | None:
    """The value's [start, end) in the script when its characters sit side by side there."""
    if not token.positions:
        return None
    start, end = token.positions[0], token.positions[-1] + 1
    return (start, end) if end - start == len(token.positions) else None


def _single_quoted(script: str, i: int, token: Word) -> int:
    """Add the text of the '…' starting at i; the index after the closing quote."""
    closing = script.find("'", i + 1)
    end = len(script) if closing < 0 else closing
    token.chars.extend(script[i + 1 : end])
    token.positions.extend(range(i + 1, end))
    return end + 1


def _double_quoted(script: str, i: int, token: Word) -> int:
    """Add the text of the "…" starting at i (backslash escapes $ ` " \\ newline)."""
    i += 1
    while i < len(script) and script[i] != '"':
        if script[i] == "\\" and i + 1 < len(script) and script[i + 1] in '$`"\\\n':
            if script[i + 1] != "\n":  # backslash-newline is a line continuation
                token.add(script[i + 1], i + 1)
            i += 2
        else:
            token.add(script[i], i)
            i += 1
    return i + 1


def shell_words(script: str) -> list[Word]:
    """Split a POSIX shell script into words, keeping each kept character's position.

    Quotes, backslashes, comments and control operators are handled; expansions are left as
    text (a `$N` value is simply not an integer). Never raises: an unterminated quote ends at
    the end of the script.
    """
    tokens: list[Word] = []
    current: Word | None = None
    i, n = 0, len(script)
    while i < n:
        ch = script[i]
        if ch in " \t\r\n" or ch in OPERATORS:
            if current is not None:
                tokens.append(current)
                current = None
            if ch in OPERATORS:
                tokens.append(Word([ch], [i], operator=True))
            i += 1
            continue
        if ch == "#" and current is None:
            newline = script.find("\n", i)
            i = n if newline < 0 else newline
            continue
        current = current or Word([], [])
        if ch == "\\":
            if i + 1 < n and script[i + 1] != "\n":
                current.add(script[i + 1], i + 1)
            i += 2
        elif ch == "'":
            i = _single_quoted(script, i, current)
        elif ch == '"':
            i = _double_quoted(script, i, current)
        else:
            current.add(ch, i)
            i += 1
    if current is not None:
        tokens.append(current)
    return tokens
