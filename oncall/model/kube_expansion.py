"""Kubernetes `$(VAR)` expansion of a container's `command`/`args`, as the kubelet does it.

Kubernetes expands `$(VAR)` in `command` and `args` from the container's `env` before it
starts the process (Kubernetes docs, "Define a command and arguments for a container"; the
kubelet's `third_party/forked/golang/expansion`):

* `$(NAME)` with NAME defined → its value; NAME undefined → stays `$(NAME)` literally;
* `$$` → `$` (so `$$(NAME)` reaches the process as `$(NAME)`, unexpanded);
* `$(` without a closing `)`, or `$` before anything else, stays as it is;
* an `env` entry's own `value` may refer to entries defined before it.

`expand` returns the text the process receives and, for every character of it, the index of
the spec character it came from (None for characters that came from a variable), so a caller
can find a value in the expanded text and still edit the spec in place. Values from
`valueFrom` (ConfigMap, Secret, field refs) and `envFrom` are not read here (we never read
Secrets): such a variable is *unresolved*, and `Expansion.unresolved` names it. Pure, no I/O.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Env:
    """What `$(NAME)` can expand to in one container."""

    values: Mapping[str, str] = field(default_factory=dict)
    #: Names set by `valueFrom` (ConfigMap, Secret, fieldRef...): defined, value not known here.
    opaque: frozenset[str] = frozenset()
    #: The container has `envFrom`: any other name may be defined there.
    has_env_from: bool = False

    @classmethod
    def of_container(cls, container: Mapping[str, Any] | None) -> Env:
        """The env of a container spec (`env` in order, each value expanded by the earlier)."""
        return cls.from_spec((container or {}).get("env"), bool((container or {}).get("envFrom")))

    @classmethod
    def from_spec(cls, env: Sequence[Any] | None, has_env_from: bool = False) -> Env:
        values: dict[str, str] = {}
        opaque: set[str] = set()
        for entry in env or ():
            if not isinstance(entry, Mapping) or not isinstance(entry.get("name"), str):
                continue
            name = entry["name"]
            if entry.get("valueFrom") is not None:
                opaque.add(name)
                values.pop(name, None)
                continue
            earlier = cls(values=dict(values), opaque=frozenset(opaque))
            values[name] = expand(str(entry.get("value") or ""), earlier).text
            opaque.discard(name)
        return cls(values=values, opaque=frozenset(opaque), has_env_from=has_env_from)


@dataclass(frozen=True)
class Expansion:
    """The expanded text, where each character came from, and the variables involved."""

    text: str
    #: For each character of `text`: its index in the spec text, None when from a variable.
    origins: tuple[int | None, ...]
    #: Names expanded from `env` values.
    resolved: tuple[str, ...] = ()
    #: Names left as `$(NAME)` that may still be set at run time (`valueFrom`, `envFrom`).
    unresolved: tuple[str, ...] = ()
    #: Names left as `$(NAME)` because the container defines them nowhere.
    undefined: tuple[str, ...] = ()

    def spec_span(self, start: int, end: int) -> tuple[int, int] | None:
        """The [start, end) of the spec text that `text[start:end]` is, character for
        character; None when part of it came from a variable or an escape (`$$`)."""
        if start >= end:
            return None
        origins = self.origins[start:end]
        first = origins[0]
        if first is None or any(o != first + i for i, o in enumerate(origins)):
            return None
        return first, first + (end - start)


def expand(text: str, env: Env) -> Expansion:
    """Expand `$(NAME)` references in one `command`/`args` element."""
    out: list[str] = []
    origins: list[int | None] = []
    resolved: list[str] = []
    unresolved: list[str] = []
    undefined: list[str] = []

    def keep(start: int, end: int) -> None:
        out.extend(text[start:end])
        origins.extend(range(start, end))

    i, n = 0, len(text)
    while i < n:
        if text[i] != "$" or i + 1 >= n:
            keep(i, i + 1)
            i += 1
            continue
        nxt = text[i + 1]
        if nxt == "$":  # escaped operator: one literal "$"
            keep(i + 1, i + 2)
            i += 2
            continue
        if nxt == "(":
            close = text.find(")", i + 2)
            if close < 0:  # incomplete reference: "$(" stays
                keep(i, i + 2)
                i += 2
                continue
            name = text[i + 2 : close]
            if name in env.values:
                value = env.values[name]
                out.extend(value)
                origins.extend([None] * len(value))
                resolved.append(name)
            else:
                keep(i, close + 1)
                if name in env.opaque or env.has_env_from:
                    unresolved.append(name)
                else:
                    undefined.append(name)
            i = close + 1
            continue
        keep(i, i + 2)  # "$" before anything else: both characters stay
        i += 2
    return Expansion(
        text="".join(out),
        origins=tuple(origins),
        resolved=tuple(dict.fromkeys(resolved)),
        unresolved=tuple(dict.fromkeys(unresolved)),
        undefined=tuple(dict.fromkeys(undefined)),
    )
