"""The configuration reference, `docs/configuration-reference.md`, made from the settings model.

Every key, its default and its meaning come from the pydantic models in `settings/model.py`
(the field's `description`, the section's docstring), so the page cannot drift from what the
loader accepts: a test compares the committed page with `render_reference()`, and
`scripts/gen_config_reference.py` rewrites it.
"""

from __future__ import annotations

import inspect
import json
from typing import Any

from pydantic import BaseModel

from oncall.settings.loader import leaf_paths, secret_paths
from oncall.settings.model import PER_CONTEXT_SECTIONS, Settings

#: Where the page lives, from the repository root.
REFERENCE_PATH = "docs/configuration-reference.md"
REGENERATE = ".venv/bin/python scripts/gen_config_reference.py"

_INTRO = f"""\
<!-- Generated from oncall/settings/model.py by `{REGENERATE}`: do not edit by hand. -->
# Configuration reference

Every setting oncall reads, with its default and meaning, in the order `oncall config show`
prints them. How settings are given (file, environment, `--set`), contexts and examples:
[operating.md](operating.md).

Each key can also be set from the environment as `ONCALL_<SECTION>__<KEY>` (shown under the
key) and on any command line as `--set section.key=value`. Durations are Prometheus-style
(`250ms`, `5s`, `1m30s`) or a number of seconds. Secrets are never printed: `config show`
masks them and every output redacts them.
"""


def _cell(text: str) -> str:
    """Text for one Markdown table cell: a pipe would end the cell, a newline the row."""
    return " ".join(text.split()).replace("|", "\\|")


def _default(value: Any) -> str:
    if value is None:
        return "—"
    return f"`{json.dumps(value, ensure_ascii=False)}`".replace("|", "\\|")


def _model_at(path: tuple[str, ...]) -> tuple[type[BaseModel], str]:
    """The model that declares the last key of `path`, and that key."""
    model: type[BaseModel] = Settings
    for part in path[:-1]:
        annotation = model.model_fields[part].annotation
        assert isinstance(annotation, type) and issubclass(annotation, BaseModel)
        model = annotation
    return model, path[-1]


def _meaning(path: tuple[str, ...], secret: bool) -> str:
    model, key = _model_at(path)
    description = model.model_fields[key].description or ""
    if not description:
        raise ValueError(f"settings field {'.'.join(path)} has no description")
    return description + (" Secret." if secret else "")


def _section_doc(name: str) -> str:
    annotation = Settings.model_fields[name].annotation
    doc = inspect.getdoc(annotation) if isinstance(annotation, type) else None
    inherited = inspect.getdoc(BaseModel)
    return "" if not doc or doc == inherited or doc == inspect.getdoc(Settings) else doc


def render_reference() -> str:
    """The whole page, as committed."""
    defaults = Settings().model_dump(mode="json")
    secrets = secret_paths()
    groups: dict[str, list[tuple[str, ...]]] = {}
    for path in leaf_paths():
        groups.setdefault(path[0] if len(path) > 1 else "", []).append(path)
    lines = [_INTRO]
    for section, paths in groups.items():
        lines.append(f"## `{section}`" if section else "## Top level")
        lines.append("")
        doc = _section_doc(section) if section else ""
        if doc:
            lines.extend([" ".join(part.split()) for part in doc.split("\n\n")])
            lines.append("")
        if section in PER_CONTEXT_SECTIONS:
            lines.append(f"Per context: an entry of `contexts:` may set its own `{section}`.")
            lines.append("")
        lines.append("| key | default | meaning |")
        lines.append("|---|---|---|")
        for path in paths:
            value: Any = defaults
            for part in path:
                value = value[part]
            env = "ONCALL_" + "__".join(part.upper() for part in path)
            key = f"`{'.'.join(path)}`<br>`{env}`"
            meaning = _cell(_meaning(path, path in secrets))
            lines.append(f"| {key} | {_default(value)} | {meaning} |")
        lines.append("")
    contexts = Settings.model_fields["contexts"].description or ""
    lines.append("## `contexts`")
    lines.append("")
    lines.append(" ".join(contexts.split()) + " See [operating.md](operating.md).")
    return "\n".join(lines).rstrip("\n") + "\n"
