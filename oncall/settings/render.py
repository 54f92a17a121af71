"""`oncall config show`: every effective setting with its source, secrets masked.

YAML output is valid YAML (sources are comments), so it can be saved as a starting
`oncall.yaml`; JSON output is for scripts.
"""

from __future__ import annotations

import json
from typing import Any

import yaml

from oncall.redaction import MASK, redact
from oncall.settings.loader import LoadedSettings, leaf_paths, secret_paths


def mask_url(value: str) -> str:
    """Hide the password of a URL ("redis://:pw@host" → "redis://:********@host"), also of one
    that `urlsplit` refuses (a bad port or IPv6 literal): the one redaction, by pattern."""
    return redact(value)


def _masked(value: Any) -> Any:
    if isinstance(value, str):
        return mask_url(value)
    if isinstance(value, list):
        return [_masked(item) for item in value]
    return value


def effective_values(loaded: LoadedSettings) -> dict[str, Any]:
    """Dotted key → JSON-able value, with secrets and URL passwords masked."""
    dumped = loaded.settings.model_dump(mode="json")
    secrets = secret_paths()
    values: dict[str, Any] = {}
    for path in leaf_paths():
        value: Any = dumped
        for part in path:
            value = value[part]
        if path in secrets:
            value = None if value is None else MASK
        values[".".join(path)] = _masked(value)
    return values


def _nest(flat: dict[str, Any]) -> dict[str, Any]:
    nested: dict[str, Any] = {}
    for dotted, value in flat.items():
        node = nested
        *parents, leaf = dotted.split(".")
        for part in parents:
            node = node.setdefault(part, {})
        node[leaf] = value
    return nested


def _yaml_scalar(value: Any) -> str:
    text = yaml.safe_dump(value, default_flow_style=True, width=10_000).strip()
    return text.removesuffix("...").strip()


def render_json(loaded: LoadedSettings) -> str:
    values = effective_values(loaded)
    body = {
        "config_file": str(loaded.config_file) if loaded.config_file else None,
        "settings": _nest(values),
        "sources": {key: loaded.sources.get(key, "default") for key in values},
    }
    return json.dumps(body, indent=2)


def render_yaml(loaded: LoadedSettings) -> str:
    values = effective_values(loaded)
    origin = str(loaded.config_file) if loaded.config_file else "none (defaults only)"
    lines = [f"# oncall effective settings; settings file: {origin}"]
    rows: list[tuple[str, str]] = []
    current_section: str | None = None
    for dotted, value in values.items():
        *parents, leaf = dotted.split(".")
        section = parents[0] if parents else None
        if section != current_section and section is not None:
            rows.append((f"{section}:", ""))
        current_section = section
        indent = "  " * len(parents)
        rows.append((f"{indent}{leaf}: {_yaml_scalar(value)}", loaded.sources.get(dotted, "")))
    width = max(len(text) for text, _ in rows)
    for text, source in rows:
        lines.append(f"{text.ljust(width)}  # {source}" if source else text)
    return "\n".join(lines) + "\n"
