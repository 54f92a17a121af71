"""Where a container sets vLLM's `--max-num-seqs` (or `--max-num-active-seqs`), and to what.

Pure functions, no I/O. A Deployment can carry the flag in every form vLLM accepts
(reference/backends.md §1.6, vLLM's `FlexibleArgumentParser` in `vllm/utils/argparse_utils.py`):

    args: ["--model", "m", "--max-num-seqs=256"]                          form "equals"
    args: ["--model", "m", "--max-num-seqs", "256"]                       form "separate"
    args: ["--max_num_seqs", "256"]            (underscores: vLLM turns them into dashes)
    args: ["--max-num-seq=64"]                 (an abbreviation: argparse's allow_abbrev is on)
    args: ["--max-num-seqs", "$(MAX_SEQS)"]    (Kubernetes expands it from the container's env)
    command: ["/bin/sh", "-c"], args: ["vllm serve m --max-num-seqs 256"]  form "shell"
    args: ["--config", "/etc/vllm/config.yaml"]                           form "config"
    (absent)                                                              form "default"

`parse_flag` says which, with the exact location of the value: the container field
(`command` or `args`), the element index, and the character span of the value inside that
element *as the spec writes it*, so a remediation can send a JSON patch whose `test` op holds
the element as it is now and whose `replace` op holds `MaxNumSeqs.rewrite(new)`.

Like argparse, the last occurrence wins; `occurrences` counts them all. An abbreviation is
read as argparse reads it: a unique prefix of one of vLLM's options names that option, a prefix
of several (`--max-num`) is an error at start-up, reported as `problem`. `$(VAR)` references
are resolved from `env` for reading (`oncall.model.kube_expansion`); a value that came from a
variable cannot be edited in place, and `edit_problem` says why. A value that is not a literal
integer, or a flag without a value, gives `value=None` and a `problem`. vLLM's default depends
on the GPU (`oncall.model.max_num_seqs_rule.default_max_num_seqs`), so form "default" has
`value=None`.
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

from oncall.model.kube_expansion import Env, Expansion, expand
from oncall.model.shell_words import Word, contiguous_span, shell_words

Form = Literal["equals", "separate", "shell", "config", "default"]
ArgvField = Literal["command", "args"]

FLAG = "--max-num-seqs"
ACTIVE_FLAG = "--max-num-active-seqs"
CONFIG_FLAG = "--config"
#: vLLM's long options that begin with "--max-num-" (`EngineArgs.add_cli_args` in
#: vllm/engine/arg_utils.py, plus --max-num-active-seqs from PR #56758). Every unambiguous
#: abbreviation of FLAG or ACTIVE_FLAG begins with "--max-num-s" or "--max-num-a", so these
#: are the only options an abbreviation of ours can collide with; a shorter prefix
#: ("--max-num", "--max") matches several vLLM options and argparse refuses it.
MAX_NUM_OPTIONS = (
    "--max-num-batched-tokens",
    "--max-num-seqs",
    "--max-num-partial-prefills",
    "--max-num-active-seqs",
)
SHELLS = frozenset({"sh", "bash", "dash", "ash", "zsh", "ksh", "busybox"})
_INT = re.compile(r"[+-]?[0-9]+(?:_[0-9]+)*")


@dataclass(frozen=True)
class MaxNumSeqs:
    """The effective value of one integer flag of one container and where it is written.

    `field`/`index` name the element of the container's `command` or `args` list that holds the
    value (for "separate", the element after the flag; for "shell", the whole script); `span` is
    the value's [start, end) inside that element's `text` (the spec's text, before Kubernetes
    expands `$(VAR)`). All three are None for "config" and "default", and where the flag has no
    value. `option` is the flag this describes (FLAG or ACTIVE_FLAG), `flag` how it is spelled.
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
    #: Why the value cannot be rewritten in place although it was read (a `$(VAR)`).
    edit_problem: str | None = None
    #: Env variables the value was expanded from.
    from_env: tuple[str, ...] = ()
    option: str = FLAG

    @property
    def editable(self) -> bool:
        """True when `rewrite` can change the value in place."""
        return (
            self.value is not None
            and self.edit_problem is None
            and self.field is not None
            and self.index is not None
            and self.span is not None
            and self.text is not None
        )

    def rewrite(self, new_value: int) -> str:
        """The element's new text with only the value replaced (the JSON patch `replace`)."""
        if not self.editable or self.span is None or self.text is None:
            why = f": {self.edit_problem}" if self.edit_problem else ""
            raise ValueError(f"{self.option} ({self.form}) cannot be rewritten in place{why}")
        if isinstance(new_value, bool) or not isinstance(new_value, int) or new_value < 1:
            raise ValueError(f"{self.option[2:]} must be a positive integer, not {new_value!r}")
        start, end = self.span
        return f"{self.text[:start]}{new_value}{self.text[end:]}"

    def json_pointer(self, container_index: int) -> str:
        """RFC 6901 path of the element in a Deployment, for the `test` and `replace` ops."""
        if self.field is None or self.index is None:
            raise ValueError(f"{self.option} ({self.form}) has no element to point at")
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
            "edit_problem": self.edit_problem,
            "from_env": list(self.from_env),
        }


@dataclass(frozen=True)
class _Found:
    """One occurrence of the flag (before we know whether it is the last)."""

    form: Form
    flag: str
    field: ArgvField | None
    index: int | None
    #: The value's span in the *expanded* element.
    span: tuple[int, int] | None
    raw_value: str | None
    problem: str | None = None


_Argv = list[tuple[ArgvField, int, str]]


def resolve_option(word: str) -> tuple[str | None, tuple[str, ...]]:
    """The vLLM option among MAX_NUM_OPTIONS that argparse takes `word` (a `--name`, already
    dashed) for, or None; and, when `word` is a prefix of several, those candidates."""
    if word in MAX_NUM_OPTIONS:
        return word, ()
    if len(word) <= 2:
        return None, ()
    matches = tuple(o for o in MAX_NUM_OPTIONS if o.startswith(word))
    if len(matches) == 1:
        return matches[0], ()
    return None, matches


def parse_flag(
    command: Sequence[str] | None,
    args: Sequence[str] | None,
    option: str,
    env: Env | None = None,
) -> MaxNumSeqs:
    """`option` (FLAG or ACTIVE_FLAG) of a container with this `command`, `args` and `env`;
    never raises."""
    raw: _Argv = [
        *(("command", i, str(a)) for i, a in enumerate(command or ())),
        *(("args", i, str(a)) for i, a in enumerate(args or ())),
    ]
    expansions = {(f, i): expand(text, env or Env()) for f, i, text in raw}
    argv: _Argv = [(f, i, expansions[(f, i)].text) for f, i, _ in raw]
    script = _shell_script(argv)
    if script is not None:
        found, config_file = _scan_script(script, option)
    else:
        found, config_file = _scan_argv(argv, option)
    if not found:
        if config_file is not None:
            return MaxNumSeqs(None, "config", config_file=config_file, option=option)
        return MaxNumSeqs(None, "default", option=option)
    last = found[-1]
    # argparse stops at the first ambiguous option: vLLM does not start at all.
    fatal = next((f.problem for f in found if f.problem and "ambiguous" in f.problem), None)
    spec = {(f, i): text for f, i, text in raw}
    expansion = None
    if last.field is not None and last.index is not None:
        expansion = expansions.get((last.field, last.index))
    value, problem = _int_value(last.raw_value, expansion)
    span, edit_problem, text = last.span, None, None
    if last.field is not None and last.index is not None and expansion is not None:
        text = spec[(last.field, last.index)]
        if span is not None:
            span = expansion.spec_span(*span)
            if span is None or text[span[0] : span[1]] != last.raw_value:
                span = None
                edit_problem = _from_env_reason(option, expansion)
    return MaxNumSeqs(
        value=None if fatal else value,
        form=last.form,
        field=last.field,
        index=last.index,
        span=span,
        text=text,
        flag=last.flag,
        config_file=config_file,
        occurrences=len(found),
        problem=fatal or last.problem or problem,
        edit_problem=edit_problem if value is not None else None,
        from_env=expansion.resolved if expansion is not None else (),
        option=option,
    )


def parse_max_num_seqs(
    command: Sequence[str] | None = None,
    args: Sequence[str] | None = None,
    env: Env | None = None,
) -> MaxNumSeqs:
    """The `--max-num-seqs` of a container with this `command` and `args`; never raises."""
    return parse_flag(command, args, FLAG, env)


def parse_max_num_active_seqs(
    command: Sequence[str] | None = None,
    args: Sequence[str] | None = None,
    env: Env | None = None,
) -> MaxNumSeqs:
    """The `--max-num-active-seqs` (cap on RUNNING sequences, ≤ --max-num-seqs); never raises."""
    return parse_flag(command, args, ACTIVE_FLAG, env)


def _from_env_reason(option: str, expansion: Expansion) -> str:
    names = ", ".join(expansion.resolved) or "a variable"
    return (
        f"{option} comes from $({names.split(', ')[0]}) in the spec (Kubernetes expands it from "
        f"the container's env: {names}); change the env value, or write the number in the args"
    )


def _int_value(raw: str | None, expansion: Expansion | None) -> tuple[int | None, str | None]:
    if raw is None:
        return None, None
    if _INT.fullmatch(raw):
        return int(raw), None
    if expansion is not None and "$(" in raw:
        if expansion.unresolved:
            names = ", ".join(f"$({n})" for n in expansion.unresolved)
            return None, (
                f"value {raw!r} is not a literal integer: {names} is set by valueFrom/envFrom "
                f"(a ConfigMap or Secret), which oncall does not read"
            )
        if expansion.undefined:
            names = ", ".join(f"$({n})" for n in expansion.undefined)
            return None, (
                f"value {raw!r} is not a literal integer: {names} is not in the container's "
                f"env, so Kubernetes leaves it as written and vLLM refuses to start"
            )
    return None, f"value {raw!r} is not a literal integer"


def _flag_name(word: str) -> tuple[str, str, str]:
    """(normalised name, "=" or "", value) of a `--long-option[=value]` word."""
    name, sep, value = word.partition("=")
    # vLLM's FlexibleArgumentParser turns underscores in option names into dashes.
    return name.replace("_", "-"), sep, value


def _match(name: str, option: str, flag: str) -> tuple[bool, str | None]:
    """(this word is `option`, the ambiguity problem when it may be)."""
    resolved, candidates = resolve_option(name)
    if resolved == option:
        return True, None
    if option in candidates:
        listed = ", ".join(candidates)
        return True, f"ambiguous option {flag} could match {listed}: vLLM refuses to start"
    return False, None


def _shell_script(argv: _Argv) -> tuple[ArgvField, int, str] | None:
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


def _scan_argv(argv: _Argv, option: str) -> tuple[list[_Found], str | None]:
    found: list[_Found] = []
    config_file: str | None = None
    spaced = re.compile(option.replace("-", "[-_]") + r"\s")
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
        ours, ambiguous = _match(name, option, flag)
        if ours and ambiguous:
            found.append(_Found("separate", flag, field, index, None, None, ambiguous))
        elif ours and sep:
            span = (len(flag) + 1, len(word))
            found.append(_Found("equals", flag, field, index, span, value))
        elif ours:
            if i >= len(argv) or argv[i][2].startswith("--"):  # argparse: "expected one argument"
                found.append(
                    _Found("separate", flag, field, index, None, None, f"{flag} has no value")
                )
                continue
            vfield, vindex, vword = argv[i]
            i += 1
            found.append(_Found("separate", flag, vfield, vindex, (0, len(vword)), vword))
        elif spaced.match(word):
            problem = "flag and value share one element, which vLLM rejects"
            flag = word.split(None, 1)[0]
            found.append(_Found("separate", flag, field, index, None, None, problem))
    return found, config_file


def _scan_script(
    script: tuple[ArgvField, int, str], option: str
) -> tuple[list[_Found], str | None]:
    field, index, text = script
    tokens = shell_words(text)
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
        flag = word.partition("=")[0]
        ours, ambiguous = _match(name, option, flag)
        if not ours:
            continue
        if ambiguous:
            found.append(_Found("shell", flag, field, index, None, None, ambiguous))
            continue
        if sep:
            offset = len(flag) + 1
            value_token = Word(token.chars[offset:], token.positions[offset:])
        elif following is not None:
            value_token = following
            i += 1
        else:
            found.append(_Found("shell", flag, field, index, None, None, f"{flag} has no value"))
            continue
        span = contiguous_span(value_token)
        problem = None if span is not None else "the value is quoted in a way we cannot edit"
        if not value_token.chars:
            problem = f"{flag} has no value"
        found.append(_Found("shell", flag, field, index, span, value_token.word, problem))
    return found, config_file
