"""Where a container sets vLLM's `--max-num-seqs`, and to what; pure functions, no I/O.

A Deployment can carry the flag in every form vLLM accepts (reference/backends.md §1.6):

    args: ["--model", "m", "--max-num-seqs=256"]                          form "equals"
    args: ["--model", "m", "--max-num-seqs", "256"]                       form "separate"
    args: ["--max_num_seqs", "256"]                                       (underscores too)
    command: ["/bin/sh", "-c"], args: ["vllm serve m --max-num-seqs 256"]  form "shell"
    args: ["--config", "/etc/vllm/config.yaml"]                           form "config"
    (absent)                                                              form "default"

`parse_max_num_seqs` says which, with the exact location of the value: the container field
(`command` or `args`), the element index, and the character span of the value inside that
element, so a remediation can send a JSON patch whose `test` op holds the element as it is now
and whose `replace` op holds `MaxNumSeqs.rewrite(new)`: exactly that value changed, nothing else.

Like argparse, the last occurrence wins; `occurrences` counts them all. A value that is not a
literal integer (`$(MAX_SEQS)`, `$N`) gives `value=None` and a `problem`; so does a flag without
a value. vLLM's default depends on the GPU (256 or 1024, backends.md §1.6), so form "default"
has `value=None`. Abbreviated flags (argparse's `allow_abbrev`) are not recognised.
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

Form = Literal["equals", "separate", "shell", "config", "default"]
ArgvField = Literal["command", "args"]

FLAG = "--max-num-seqs"
CONFIG_FLAG = "--config"
SHELLS = frozenset({"sh", "bash", "dash", "ash", "zsh", "ksh", "busybox"})
_INT = re.compile(r"[+-]?[0-9]+(?:_[0-9]+)*")
_SHELL_OPERATORS = frozenset(";&|()<>")
#: `"--max-num-seqs 256"` as one element: argparse takes it for a positional argument.
_SPACED = re.compile(r"--max[-_]num[-_]seqs\s")


@dataclass(frozen=True)
class MaxNumSeqs:
    """The effective `--max-num-seqs` of one container and where it is written.

    `field`/`index` name the element of the container's `command` or `args` list that holds the
    value (for "separate", the element after the flag; for "shell", the whole script); `span` is
    the value's [start, end) inside that element's `text`. All three are None for "config" and
    "default", and also where the flag has no value.
    """

    value: int | None
    form: Form
    field: ArgvField | None = None
    index: int | None = None
    span: tuple[int, int] | None = None
    text: str | None = None
    flag: str | None = None
    config_file: str | None = None
    occurrences: int = 0
    problem: str | None = None

    @property
    def editable(self) -> bool:
        """True when `rewrite` can change the value in place."""
        return (
            self.value is not None
            and self.field is not None
            and self.index is not None
            and self.span is not None
            and self.text is not None
        )

    def rewrite(self, new_value: int) -> str:
        """The element's new text with only the value replaced (the JSON patch `replace`)."""
        if not self.editable or self.span is None or self.text is None:
            raise ValueError(f"--max-num-seqs ({self.form}) cannot be rewritten in place")
        if isinstance(new_value, bool) or not isinstance(new_value, int) or new_value < 1:
            raise ValueError(f"max-num-seqs must be a positive integer, not {new_value!r}")
        start, end = self.span
        return f"{self.text[:start]}{new_value}{self.text[end:]}"

    def json_pointer(self, container_index: int) -> str:
        """RFC 6901 path of the element in a Deployment, for the `test` and `replace` ops."""
        if self.field is None or self.index is None:
            raise ValueError(f"--max-num-seqs ({self.form}) has no element to point at")
        return f"/spec/template/spec/containers/{container_index}/{self.field}/{self.index}"

    def facts(self) -> dict[str, Any]:
        """JSON-able form, for probe facts and audit records."""
        return {
            "value": self.value,
            "form": self.form,
            "field": self.field,
            "index": self.index,
            "span": list(self.span) if self.span is not None else None,
            "flag": self.flag,
            "config_file": self.config_file,
            "occurrences": self.occurrences,
            "problem": self.problem,
        }


@dataclass(frozen=True)
class _Found:
    """One occurrence of the flag (before we know whether it is the last)."""

    form: Form
    flag: str
    field: ArgvField | None
    index: int | None
    span: tuple[int, int] | None
    text: str | None
    raw_value: str | None
    problem: str | None = None


@dataclass
class _Token:
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


def parse_max_num_seqs(
    command: Sequence[str] | None = None, args: Sequence[str] | None = None
) -> MaxNumSeqs:
    """The `--max-num-seqs` of a container with this `command` and `args`; never raises."""
    argv: list[tuple[ArgvField, int, str]] = [
        *(("command", i, str(a)) for i, a in enumerate(command or ())),
        *(("args", i, str(a)) for i, a in enumerate(args or ())),
    ]
    script = _shell_script(argv)
    found: list[_Found] = []
    config_file: str | None = None
    if script is not None:
        field, index, text = script
        found, config_file = _scan_script(field, index, text)
    else:
        found, config_file = _scan_argv(argv)
    if not found:
        if config_file is not None:
            return MaxNumSeqs(value=None, form="config", config_file=config_file)
        return MaxNumSeqs(value=None, form="default")
    last = found[-1]
    value, problem = _int_value(last.raw_value)
    return MaxNumSeqs(
        value=value,
        form=last.form,
        field=last.field,
        index=last.index,
        span=last.span,
        text=last.text,
        flag=last.flag,
        config_file=config_file,
        occurrences=len(found),
        problem=last.problem or problem,
    )


def _int_value(raw: str | None) -> tuple[int | None, str | None]:
    if raw is None:
        return None, None
    if not _INT.fullmatch(raw):
        return None, f"value {raw!r} is not a literal integer"
    return int(raw), None


def _flag_name(word: str) -> tuple[str, str, str]:
    """(normalised name, "=" or "", value) of a `--long-option[=value]` word."""
    name, sep, value = word.partition("=")
    # vLLM's FlexibleArgumentParser turns underscores in option names into dashes.
    return name.replace("_", "-"), sep, value


def _shell_script(argv: list[tuple[ArgvField, int, str]]) -> tuple[ArgvField, int, str] | None:
    """The `-c` script element when argv runs a shell (`sh -c "…"`, `bash -ec "…"`)."""
    if not argv or posixpath.basename(argv[0][2]) not in SHELLS:
        return None
    start = 1
    if posixpath.basename(argv[0][2]) == "busybox":
        if len(argv) < 2 or argv[1][2] not in SHELLS:
            return None
        start = 2
    has_c = False
    i = start
    while i < len(argv):
        word = argv[i][2]
        if word == "--":
            i += 1
            break
        if word in ("-o", "+o"):
            i += 2
            continue
        if len(word) > 1 and word[0] in "-+" and not word.startswith("--"):
            has_c = has_c or (word[0] == "-" and "c" in word[1:])
            i += 1
            continue
        break
    if has_c and i < len(argv):
        return argv[i]
    return None


def _scan_argv(argv: list[tuple[ArgvField, int, str]]) -> tuple[list[_Found], str | None]:
    found: list[_Found] = []
    config_file: str | None = None
    i = 0
    while i < len(argv):
        field, index, word = argv[i]
        i += 1
        if not word.startswith("--"):
            continue
        name, sep, value = _flag_name(word)
        if name == CONFIG_FLAG:
            if sep:
                config_file = value
            elif i < len(argv):
                config_file = argv[i][2]
                i += 1
            continue
        flag = word.partition("=")[0]
        if name == FLAG and sep:
            span = (len(flag) + 1, len(word))
            found.append(_Found("equals", flag, field, index, span, word, value))
        elif name == FLAG:
            if i >= len(argv):
                found.append(_no_value("separate", flag, field, index, word))
                continue
            vfield, vindex, vword = argv[i]
            if vword.startswith("--"):  # argparse: "expected one argument"
                found.append(_no_value("separate", flag, field, index, word))
                continue
            i += 1
            found.append(_Found("separate", flag, vfield, vindex, (0, len(vword)), vword, vword))
        elif _SPACED.match(word):
            problem = "flag and value share one element, which vLLM rejects"
            flag = word.split(None, 1)[0]
            found.append(_Found("separate", flag, field, index, None, word, None, problem))
    return found, config_file


def _no_value(form: Form, flag: str, field: ArgvField, index: int, text: str) -> _Found:
    return _Found(form, flag, field, index, None, text, None, f"{flag} has no value")


def _scan_script(field: ArgvField, index: int, script: str) -> tuple[list[_Found], str | None]:
    tokens = _shell_tokens(script)
    found: list[_Found] = []
    config_file: str | None = None
    i = 0
    while i < len(tokens):
        token = tokens[i]
        i += 1
        word = token.word
        if token.operator or not word.startswith("--"):
            continue
        name, sep, value = _flag_name(word)
        following = tokens[i] if i < len(tokens) and not tokens[i].operator else None
        if name == CONFIG_FLAG:
            if sep:
                config_file = value
            elif following is not None:
                config_file = following.word
                i += 1
            continue
        if name != FLAG:
            continue
        flag = word.partition("=")[0]
        if sep:
            offset = len(flag) + 1
            value_token = _Token(token.chars[offset:], token.positions[offset:])
        elif following is not None:
            value_token = following
            i += 1
        else:
            found.append(_no_value("shell", flag, field, index, script))
            continue
        span = _contiguous_span(value_token)
        problem = None if span is not None else "the value is quoted in a way we cannot edit"
        if not value_token.chars:
            problem = f"{flag} has no value"
        found.append(_Found("shell", flag, field, index, span, script, value_token.word, problem))
    return found, config_file


def _contiguous_span(token: _Token) -> tuple[int, int] | None:
    """The value's [start, end) in the script when its characters sit side by side there."""
    if not token.positions:
        return None
    start, end = token.positions[0], token.positions[-1] + 1
    return (start, end) if end - start == len(token.positions) else None


def _single_quoted(script: str, i: int, token: _Token) -> int:
    """Add the text of the '…' starting at i; the index after the closing quote."""
    closing = script.find("'", i + 1)
    end = len(script) if closing < 0 else closing
    token.chars.extend(script[i + 1 : end])
    token.positions.extend(range(i + 1, end))
    return end + 1


def _double_quoted(script: str, i: int, token: _Token) -> int:
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


def _shell_tokens(script: str) -> list[_Token]:
    """Split a POSIX shell script into words, keeping each kept character's position.

    Quotes, backslashes, comments and control operators are handled; expansions are left as
    text (a `$N` value is simply not an integer). Never raises: an unterminated quote ends at
    the end of the script.
    """
    tokens: list[_Token] = []
    current: _Token | None = None
    i, n = 0, len(script)
    while i < n:
        ch = script[i]
        if ch in " \t\r\n" or ch in _SHELL_OPERATORS:
            if current is not None:
                tokens.append(current)
                current = None
            if ch in _SHELL_OPERATORS:
                tokens.append(_Token([ch], [i], operator=True))
            i += 1
            continue
        if ch == "#" and current is None:
            newline = script.find("\n", i)
            i = n if newline < 0 else newline
            continue
        current = current or _Token([], [])
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
