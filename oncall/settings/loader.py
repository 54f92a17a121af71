"""Load the effective settings from their four sources, remembering where each value came from.

Precedence (docs/on-call.md): defaults < settings file < ONCALL_* environment < command-line flags.
The settings file is `--config FILE`, else `$ONCALL_CONFIG`, else `./oncall.yaml` if present.
Environment variables name a key path with `__` between levels: ONCALL_REDIS__TIMEOUT=1s,
ONCALL_READ_ONLY=true. Every problem from every source is collected, then reported at once.
"""

from __future__ import annotations

import difflib
import json
import os
import types
import typing
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import BaseModel, SecretStr, ValidationError

from oncall.errors import ConfigError, Problem
from oncall.redaction import redact, register_secret, register_url
from oncall.settings import contexts
from oncall.settings.contexts import CONTEXT_ENV, deep_merge, section_path
from oncall.settings.model import ContextEntry, Settings
from oncall.settings.yaml_marks import (
    KeyPath,
    MarkedDocument,
    YamlLimits,
    load_marked_yaml,
    set_limits,
)

ENV_PREFIX = "ONCALL_"
CONFIG_ENV = "ONCALL_CONFIG"
DEFAULT_FILE = "oncall.yaml"


@dataclass(frozen=True)
class LoadedSettings:
    """The validated settings, the file they came from, and the source of every leaf value.

    `sources` maps a dotted key ("redis.timeout") to "default", "FILE:LINE",
    "env ONCALL_REDIS__TIMEOUT" or "flag --read-only".
    """

    settings: Settings
    config_file: Path | None
    sources: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class FlagValue:
    """A setting given on the command line: key path, raw value, and the flag as typed."""

    path: tuple[str, ...]
    value: object
    flag: str


def _annotation_at(path: KeyPath) -> Any:
    """The type annotation of the settings field at path, or None when there is no such field.
    Under `contexts.NAME` the fields are those of a context entry."""
    model: type[BaseModel] = Settings
    annotation: Any = None
    if len(path) >= 2 and path[0] == "contexts":
        model, annotation, path = ContextEntry, ContextEntry, path[2:]
    for part in path:
        if not isinstance(part, str) or part not in model.model_fields:
            return None
        annotation = model.model_fields[part].annotation
        if isinstance(annotation, type) and issubclass(annotation, BaseModel):
            model = annotation
    return annotation


def _is_list(annotation: Any) -> bool:
    return typing.get_origin(annotation) is list


def _is_secret(annotation: Any) -> bool:
    if annotation is SecretStr:
        return True
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        return SecretStr in typing.get_args(annotation)
    return False


def leaf_paths(
    model: type[BaseModel] = Settings, prefix: tuple[str, ...] = ()
) -> list[tuple[str, ...]]:
    """Every settable key path, in declaration order; `contexts` is not one (a map of
    contexts, each shown by `config show --context NAME` as the top-level keys)."""
    paths: list[tuple[str, ...]] = []
    for name, info in model.model_fields.items():
        if model is Settings and name == "contexts":
            continue
        annotation = info.annotation
        if isinstance(annotation, type) and issubclass(annotation, BaseModel):
            paths.extend(leaf_paths(annotation, (*prefix, name)))
        else:
            paths.append((*prefix, name))
    return paths


def secret_paths() -> set[tuple[str, ...]]:
    """Key paths whose values are secrets and must never be printed."""
    return {path for path in leaf_paths() if _is_secret(_annotation_at(path))}


class _NotText(ValueError):
    """A value with bytes that are not UTF-8 (os.environ and sys.argv keep them as lone
    surrogates): refused here, where its source is known, not in a validator's message."""


def _coerce_text(path: KeyPath, raw: str) -> object:
    """Environment and --set values are text: JSON for structures, commas for lists."""
    try:
        raw.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise _NotText(f"not UTF-8 text (an undecodable byte at character {exc.start})") from None
    stripped = raw.strip()
    if stripped.startswith(("[", "{")):
        return json.loads(stripped)
    if _is_list(_annotation_at(path)):
        return [item.strip() for item in raw.split(",") if item.strip()]
    return raw


def _set_path(data: dict[str, Any], path: tuple[str, ...], value: object) -> None:
    node = data
    for part in path[:-1]:
        child = node.get(part)
        if not isinstance(child, dict):
            child = {}
            node[part] = child
        node = child
    node[path[-1]] = value


def _leaf_overrides(data: Mapping[str, Any], prefix: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    """Key paths of the values present in a source, stopping at settings leaves."""
    found: list[tuple[str, ...]] = []
    for key, value in data.items():
        path = (*prefix, str(key))
        annotation = _annotation_at(path)
        is_section = isinstance(annotation, type) and issubclass(annotation, BaseModel)
        if (is_section or path == ("contexts",)) and isinstance(value, Mapping):
            found.extend(_leaf_overrides(value, path))
        else:
            found.append(path)
    return found


def _text_problem(exc: ValueError) -> str:
    return f"invalid JSON: {exc.msg}" if isinstance(exc, json.JSONDecodeError) else str(exc)


def _env_source(
    environ: Mapping[str, str],
) -> tuple[dict[str, Any], dict[KeyPath, str], list[Problem]]:
    data: dict[str, Any] = {}
    where: dict[KeyPath, str] = {}
    problems: list[Problem] = []
    for name in sorted(environ):
        if not name.startswith(ENV_PREFIX) or name in (CONFIG_ENV, CONTEXT_ENV):
            continue
        path = tuple(name[len(ENV_PREFIX) :].lower().split("__"))
        where[path] = f"env {name}"
        try:
            value = _coerce_text(path, environ[name])
        except (json.JSONDecodeError, _NotText) as exc:
            message = _text_problem(exc)
            problems.append(Problem(f"env {name}", None, None, ".".join(path), message))
            continue
        _set_path(data, path, value)
    return data, where, problems


def _flag_source(
    flags: list[FlagValue],
) -> tuple[dict[str, Any], dict[KeyPath, str], list[Problem]]:
    data: dict[str, Any] = {}
    where: dict[KeyPath, str] = {}
    problems: list[Problem] = []
    for flag in flags:
        where[flag.path] = f"flag {flag.flag}"
        value = flag.value
        if isinstance(value, str):
            try:
                value = _coerce_text(flag.path, value)
            except (json.JSONDecodeError, _NotText) as exc:
                dotted = ".".join(flag.path)
                message = _text_problem(exc)
                problems.append(Problem(f"flag {flag.flag}", None, None, dotted, message))
                continue
        _set_path(data, flag.path, value)
    return data, where, problems


def _locate(
    loc: KeyPath,
    message: str,
    *,
    of_key: bool,
    flags: dict[KeyPath, str],
    env: dict[KeyPath, str],
    document: MarkedDocument | None,
) -> Problem:
    """A problem at the source that supplied the value at loc: the flag, the variable, or the
    file's line and column."""
    key = ".".join(map(str, loc))
    for table in (flags, env):
        for end in range(len(loc), 0, -1):
            if loc[:end] in table:
                return Problem(table[loc[:end]], None, None, key, message)
    if document is not None:
        return document.problem(loc, message, of_key=of_key)
    return Problem("settings", None, None, key, message)


def _message(error: Mapping[str, Any], loc: KeyPath, secret: bool) -> str:
    kind = error["type"]
    if kind == "extra_forbidden":
        parent = _annotation_at(loc[:-1]) if len(loc) > 1 else Settings
        known = (
            list(parent.model_fields)
            if isinstance(parent, type) and issubclass(parent, BaseModel)
            else []
        )
        hint = difflib.get_close_matches(str(loc[-1]), known, n=1)
        suffix = f"; did you mean '{hint[0]}'?" if hint else f" (known: {', '.join(known)})"
        return f"unknown key '{loc[-1]}'{suffix}"
    if kind in ("model_type", "model_attributes_type", "dict_type"):
        return "expected a mapping of settings"
    message = str(error["msg"]).removeprefix("Value error, ")
    value = error.get("input")
    if (
        not secret
        and isinstance(value, str | int | float | bool)
        and "invalid duration" not in message
    ):
        # Redacted: a URL with a bad port still carries its password.
        message = f"{message} (got {redact(repr(value))})"
    return message


def _register_secrets(settings: Settings) -> None:
    """Tell the redaction every secret of these settings: SecretStr values and the passwords
    of every configured URL, wherever the value came from (file, environment, flag), of the
    top level and of every context."""
    for name in settings.contexts:
        _register_secrets(settings.for_context(name).model_copy(update={"contexts": {}}))
    dumped = settings.model_dump(mode="python")
    for path in leaf_paths():
        value: Any = dumped
        for part in path:
            value = value[part]
        # A map of secrets (`prometheus.headers`): each of its values is one.
        for secret in value.values() if isinstance(value, dict) else [value]:
            if isinstance(secret, SecretStr):
                register_secret(secret.get_secret_value())
        for item in value if isinstance(value, list) else [value]:
            if isinstance(item, str) and "://" in item:
                register_url(item)


def load_settings(
    *,
    config: Path | None = None,
    flags: list[FlagValue] | None = None,
    environ: Mapping[str, str] | None = None,
    cwd: Path | None = None,
    context: str | None = None,
) -> LoadedSettings:
    """Build the effective settings; raise ConfigError listing every problem found.

    `context` (else $ONCALL_CONTEXT) selects one of `contexts:`: the settings returned are
    that context's (`Settings.for_context`), and the sources say which values it set itself.
    An unknown context is a UsageError naming the known ones."""
    environ = os.environ if environ is None else environ
    cwd = cwd or Path.cwd()
    problems: list[Problem] = []

    # Messages name the file as the user did (or "oncall.yaml" when found in the directory).
    display: str | None = None
    config_file: Path | None = None
    if config is not None:
        display, config_file = str(config), config
    elif environ.get(CONFIG_ENV):
        display, config_file = environ[CONFIG_ENV], Path(environ[CONFIG_ENV])
    elif (cwd / DEFAULT_FILE).is_file():
        display, config_file = DEFAULT_FILE, Path(DEFAULT_FILE)
    if config_file is not None and not config_file.is_absolute():
        config_file = cwd / config_file
    document: MarkedDocument | None = None
    if config_file is not None:
        # Under the built-in bounds: the file cannot raise its own limits before it is read,
        # and an earlier load's (lower) limits must not apply to it.
        document, file_problems = load_marked_yaml(config_file, display, limits=YamlLimits())
        problems.extend(file_problems)
        if file_problems and not document.data:
            raise ConfigError(problems)

    env_data, env_where, env_problems = _env_source(environ)
    flag_data, flag_where, flag_problems = _flag_source(flags or [])
    problems.extend(env_problems + flag_problems)

    file_data = document.data if document else {}
    merged = deep_merge(deep_merge(file_data, env_data), flag_data)
    secrets = secret_paths()
    try:
        settings = Settings.model_validate(contexts.expand(merged))
    except ValidationError as exc:
        for error in exc.errors():
            loc = tuple(error["loc"])
            if contexts.inherited_error(loc, merged):
                continue
            of_key = error["type"] == "extra_forbidden"
            secret = any(section_path(loc)[: len(p)] == p for p in secrets)
            message = _message(error, loc, secret)
            problems.append(
                _locate(
                    loc, message, of_key=of_key, flags=flag_where, env=env_where, document=document
                )
            )
    if problems:
        raise ConfigError(problems)
    contexts.check_kube_contexts(settings, document, {**env_where, **flag_where}, environ)
    _register_secrets(settings)
    set_limits(settings.limits.yaml_limits())
    selected = contexts.select(settings, context, environ)

    sources = {".".join(path): "default" for path in leaf_paths()}
    if document is not None:
        for path in _leaf_overrides(file_data):
            pos = document.key_at.get(path)
            sources[".".join(path)] = f"{document.file}:{pos.line}" if pos else document.file
    for table, data in ((env_where, env_data), (flag_where, flag_data)):
        for path in _leaf_overrides(data):
            sources[".".join(path)] = table.get(path, "")
    if selected.selected_context is not None:
        chosen_by = "flag --context" if context else f"env {CONTEXT_ENV}"
        _context_sources(sources, selected.selected_context, chosen_by)
    return LoadedSettings(settings=selected, config_file=config_file, sources=sources)


def _context_sources(sources: dict[str, str], name: str, chosen_by: str) -> None:
    """Where context `name`'s values came from, under the top-level keys they replace: its
    own (`FILE:LINE (context eu)`), else inherited from the top level (the source as it is)."""
    prefix = f"contexts.{name}."
    for dotted, source in list(sources.items()):
        if dotted.startswith(prefix):
            key = dotted.removeprefix(prefix)
            key = "context.production" if key == "production" else key
            sources[key] = f"{source} (context {name})"
        if dotted.startswith("contexts."):
            del sources[dotted]
    sources["context.name"] = chosen_by
