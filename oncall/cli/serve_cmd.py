"""`oncall serve` and `oncall verdicts`: the always-on receiver, and what it found.

- `serve [--listen HOST:PORT]`: receive Alertmanager's webhook notifications and run each
  firing alert's checklist once per firing (oncall/serve/); runs until SIGTERM or Ctrl-C.
- `verdicts [ALERT] [--since 24h] [-o table|json]`: the stored verdicts, newest first.
- `verdicts show ID`: one verdict as indented JSON; exit 2 when there is none.

Exit codes as everywhere (docs/on-call.md): 3 when Redis, where verdicts are kept, did not answer.
Output goes through the one redaction (oncall/cli/main.py), and terminal controls are escaped.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from oncall.errors import EXIT_OK, UsageError
from oncall.redaction import json_terminal_safe, terminal_safe

ID_CHARS = frozenset("0123456789abcdef-")


def register(commands: Any, global_options: Callable[..., None]) -> None:
    serve = commands.add_parser(
        "serve", help="receive Alertmanager's webhook and run each firing's checklist (read-only)"
    )
    serve.add_argument("--listen", metavar="HOST:PORT", help="overrides serve.listen")
    global_options(serve, suppress=True)
    serve.set_defaults(handler=run_serve)

    verdicts = commands.add_parser(
        "verdicts", help="checklist verdicts stored at firing by `oncall serve`; `show ID`"
    )
    verdicts.add_argument(
        "words", nargs="*", metavar="ALERT | show ID", help="an alert's name, or show ID"
    )
    verdicts.add_argument("--since", default="24h", metavar="DUR|TIME", help="default 24h")
    verdicts.add_argument("-o", "--output", choices=("table", "json"), default="table")
    global_options(verdicts, suppress=True)
    verdicts.set_defaults(handler=run_verdicts)


def run_serve(args: argparse.Namespace) -> int:
    from oncall.cli.config_cmd import load_from_args
    from oncall.serve.server import run

    settings = load_from_args(args).settings
    if args.listen is not None:
        from oncall.settings.serve import ServeSettings

        try:
            ServeSettings(listen=args.listen)
        except ValueError:
            raise UsageError(f"--listen {args.listen!r}: HOST:PORT, e.g. 127.0.0.1:9464") from None
    return run(settings, listen=args.listen)


def run_verdicts(args: argparse.Namespace) -> int:
    words = list(args.words)
    if words and words[0] == "show":
        if len(words) != 2:
            raise UsageError("usage: oncall verdicts show ID")
        return _show(args, words[1])
    if len(words) > 1:
        raise UsageError("usage: oncall verdicts [ALERT] [--since 24h] [-o table|json]")
    return _list(args, words[0] if words else None)


def _reader(args: argparse.Namespace) -> Any:
    from oncall.cli.config_cmd import load_from_args
    from oncall.service.verdicts import VerdictReader

    return VerdictReader.from_settings(load_from_args(args).settings)


def _show(args: argparse.Namespace, verdict_id: str) -> int:
    if not verdict_id or len(verdict_id) > 64 or not set(verdict_id) <= ID_CHARS:
        raise UsageError(f"{verdict_id[:64]!r} is not a verdict id (see `oncall verdicts`)")
    reader = _reader(args)

    async def read() -> Any:
        try:
            return await reader.show(verdict_id)
        finally:
            await reader.aclose()

    verdict = asyncio.run(read())
    if verdict is None:
        raise UsageError(f"no verdict {verdict_id} (expired, or never stored)")
    print(json_terminal_safe(json.dumps(verdict, indent=2, ensure_ascii=False, default=str)))
    return EXIT_OK


def _list(args: argparse.Namespace, alert: str | None) -> int:
    from oncall.service.audit_view import parse_since

    try:
        since = parse_since(args.since).timestamp()
    except OverflowError:
        raise UsageError(f"--since {args.since!r}: too far back") from None
    reader = _reader(args)

    async def read() -> list[dict[str, Any]]:
        try:
            found: list[dict[str, Any]] = await reader.list(alert=alert, since=since)
            return found
        finally:
            await reader.aclose()

    verdicts = asyncio.run(read())
    if args.output == "json":
        text = json.dumps(verdicts, indent=2, ensure_ascii=False, default=str)
        print(json_terminal_safe(text))
        return EXIT_OK
    from oncall.model.verdicts import verdict_findings

    print(f"{'ID':<24} {'RAN AT (UTC)':<20} {'ALERT':<28} {'CONTEXT':<12} FINDINGS")
    for v in verdicts:
        at = datetime.fromtimestamp(float(v.get("ran_at") or 0), UTC).strftime("%Y-%m-%d %H:%M:%S")
        resolved = " (resolved)" if v.get("resolved_at") else ""
        row = (
            f"{v.get('id', '')!s:<24} {at:<20} {v.get('alert', '')!s:<28} "
            f"{v.get('context', '')!s:<12} {verdict_findings(v)}{resolved}"
        )
        print(terminal_safe(row))
    if not verdicts:
        print(f"no verdicts since {args.since}", file=sys.stderr)
    return EXIT_OK
