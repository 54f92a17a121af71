"""`oncall config show`: the effective settings and where each value came from."""

from __future__ import annotations

import argparse

from oncall.errors import UsageError
from oncall.settings import FlagValue, LoadedSettings, load_settings
from oncall.settings.render import render_json, render_yaml


def flags_from_args(args: argparse.Namespace) -> list[FlagValue]:
    """The settings given as flags: --read-only and each --set KEY=VALUE, in order."""
    flags: list[FlagValue] = []
    if getattr(args, "read_only", False):
        flags.append(FlagValue(("read_only",), True, "--read-only"))
    for item in getattr(args, "overrides", None) or []:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise UsageError(f"--set expects KEY=VALUE, got {item!r}")
        path = tuple(key.strip().split("."))
        flags.append(FlagValue(path, value, f"--set {key.strip()}"))
    return flags


def load_from_args(args: argparse.Namespace) -> LoadedSettings:
    """The settings the command line asks for, of the context `--context` names (else
    $ONCALL_CONTEXT; else the top level, and the app shows every context)."""
    return load_settings(
        config=getattr(args, "config", None),
        flags=flags_from_args(args),
        context=getattr(args, "context", None),
    )


def show(args: argparse.Namespace) -> int:
    loaded = load_from_args(args)
    text = render_json(loaded) if args.output == "json" else render_yaml(loaded)
    print(text, end="" if text.endswith("\n") else "\n")
    return 0
