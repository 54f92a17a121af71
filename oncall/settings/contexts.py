"""`contexts:` in the settings: named clusters inheriting the top-level sections.

A context sets any of the per-context sections (`model.per_context()`: prometheus, kubernetes,
redis, vllm, gpu, degradation, and alertmanager where the settings have it) and `production`;
each section it sets is deep-merged over the top-level section of that name before
validation, so a context that sets only `prometheus.url` keeps the top-level timeout and token.
A context's `production` defaults to the top-level `context.production`.

The loader calls `expand` on the merged raw data (file < environment < flags), so a context's
own value wins over the top-level value of the same key, from whichever source; to override a
context's value from the environment name it: ONCALL_CONTEXTS__EU__PROMETHEUS__URL.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from oncall.errors import ConfigError, Problem, UsageError
from oncall.settings.kubeconfig import context_names, kubeconfig_path, read_kubeconfig
from oncall.settings.model import Settings, per_context
from oncall.settings.yaml_marks import KeyPath, MarkedDocument

#: Selects the context of every command, as `--context NAME` does (the flag wins).
CONTEXT_ENV = "ONCALL_CONTEXT"


def deep_merge(base: Mapping[str, Any], top: Mapping[str, Any]) -> dict[str, Any]:
    """`top` over `base`, mapping by mapping; any other value of `top` replaces base's."""
    merged = dict(base)
    for key, value in top.items():
        if isinstance(value, Mapping) and isinstance(merged.get(key), Mapping):
            merged[key] = deep_merge(merged[key], value)
        else:
            merged[key] = value
    return merged


def expand(merged: dict[str, Any]) -> dict[str, Any]:
    """The raw settings with every context's entry completed from the top level: what
    `Settings` validates. Entries that are not mappings are left for validation to report."""
    contexts = merged.get("contexts")
    if not isinstance(contexts, Mapping):
        return merged
    base_context = merged.get("context")
    production = base_context.get("production") if isinstance(base_context, Mapping) else None
    expanded: dict[str, Any] = {}
    for name, entry in contexts.items():
        if not isinstance(entry, Mapping):
            expanded[name] = entry
            continue
        full = dict(entry)
        for section in per_context():
            top, own = merged.get(section), entry.get(section)
            if isinstance(top, Mapping) and (own is None or isinstance(own, Mapping)):
                full[section] = deep_merge(top, own or {})
        if "production" not in full and production is not None:
            full["production"] = production
        expanded[name] = full
    return {**merged, "contexts": expanded}


def inherited_error(loc: KeyPath, merged: Mapping[str, Any]) -> bool:
    """An error inside a context at a value the context inherited: the top level's own error
    reports it, once, where the value is."""
    if len(loc) < 3 or loc[0] != "contexts":
        return False
    node: Any = merged.get("contexts")
    for part in loc[1:]:
        if not isinstance(node, Mapping) or part not in node:
            return True
        node = node[part]
    return False


def section_path(loc: KeyPath) -> KeyPath:
    """A context's key path as the top-level one it mirrors: contexts.eu.redis.password →
    redis.password (to tell secrets, and the type of a value)."""
    return loc[2:] if len(loc) >= 3 and loc[0] == "contexts" else loc


def select(settings: Settings, name: str | None, environ: Mapping[str, str]) -> Settings:
    """The settings of context `name` (else $ONCALL_CONTEXT); unchanged when neither names
    one. An unknown name is a usage error (exit 2) naming the known ones."""
    name = name or environ.get(CONTEXT_ENV) or None
    if name is None:
        return settings
    if name in settings.contexts:
        return settings.for_context(name)
    if not settings.contexts and name == settings.context.name:
        return settings
    known = ", ".join(settings.context_names())
    raise UsageError(f"no context {name!r} in the settings; the contexts are: {known}")


def check_kube_contexts(
    settings: Settings,
    document: MarkedDocument | None,
    sources: Mapping[KeyPath, str],
    environ: Mapping[str, str] | None = None,
) -> None:
    """Each context's `kubernetes.context` must be a context of its kubeconfig (when that file
    can be read: a missing one is the client's to report). Raise ConfigError at the key that
    names it: the context's own, else the top level's it inherited."""
    environ = os.environ if environ is None else environ
    problems: list[Problem] = []
    read: dict[Path, list[str] | None] = {}
    for name, entry in settings.contexts.items():
        kube = entry.kubernetes
        if kube.context is None:
            continue
        path = kubeconfig_path(kube, environ)
        if path not in read:
            data = read_kubeconfig(path)
            read[path] = None if data is None else context_names(data)
        known = read[path]
        if known is None or kube.context in known:
            continue
        own: KeyPath = ("contexts", name, "kubernetes", "context")
        loc = own if own in sources or (document and own in document.value_at) else own[2:]
        listed = ", ".join(known) or "none"
        message = (
            f"context {name!r}: no context {kube.context!r} in kubeconfig {path} (it has: {listed})"
        )
        key = ".".join(map(str, loc))
        if loc in sources:
            problems.append(Problem(sources[loc], None, None, key, message))
        elif document is not None:
            problems.append(document.problem(loc, message))
        else:
            problems.append(Problem("settings", None, None, key, message))
    if problems:
        raise ConfigError(problems)
