"""`oncall silence add|list|expire`: Alertmanager silences, as `oncall remediate` runs actions.

    oncall silence add MATCHERS --for 2h --comment TEXT [--dry-run]
    oncall silence [list] [-o table|json] [--expired]
    oncall silence expire ID [--dry-run]

`add` and `expire` are the registry's `silence` and `silence-expire` actions, run through the
service door exactly like `oncall remediate silence …`: the preview (the exact matchers, start
and end, the comment, the author, and every alert the silence would match now) is printed, the
person types `yes` on a terminal, read-only mode refuses, every step is audited. Exit codes as
`oncall remediate`: 0 done and verified; 1 refused, declined, failed or not verified; 2 usage;
3 a backend could not be reached while planning. `list` exits 3 when Alertmanager cannot be
asked.
"""

from __future__ import annotations

import argparse
import functools
import json
import sys
from collections.abc import Callable
from typing import Any

from oncall.cli.arguments import param_argument
from oncall.errors import EXIT_OK


def register(commands: Any, global_options: Callable[..., None]) -> None:
    parser = commands.add_parser("silence", help="add, list or expire Alertmanager silences")
    sub = parser.add_subparsers(dest="silence_command", metavar="SUBCOMMAND")
    add = sub.add_parser("add", help="silence the alerts MATCHERS select (preview, typed yes)")
    # Each value checked as the action's model will check it: a bad one is a usage error.
    checked = functools.partial(param_argument, "silence")
    add.add_argument("matchers", metavar="MATCHERS", type=checked("matchers"),
                     help='e.g. \'{alertname="X", pod="vllm-0"}\'')  # fmt: skip
    add.add_argument("--for", dest="duration", default="2h", type=checked("duration"),
                     help="how long: 30m, 2h, 1d")  # fmt: skip
    add.add_argument("--comment", default="", type=checked("comment"), help="why (required)")
    add.set_defaults(handler=_run_action, action="silence")
    expire = sub.add_parser("expire", help="end a silence now (preview, typed yes)")
    expire.add_argument(
        "silence_id", metavar="ID", type=param_argument("silence-expire", "silence_id")
    )
    expire.set_defaults(handler=_run_action, action="silence-expire")
    for one in (add, expire):
        one.add_argument("--dry-run", action="store_true", help="preview only, change nothing")
        global_options(one, suppress=True)
    listing = sub.add_parser("list", help="the silences Alertmanager keeps (active and pending)")
    listing.add_argument("-o", "--output", choices=("table", "json"), default="table")
    listing.add_argument("--expired", action="store_true", help="expired ones too")
    global_options(listing, suppress=True)
    listing.set_defaults(handler=_run_list)

    # Bare `oncall silence` lists them, as `amtool silence` does.
    parser.set_defaults(handler=_run_list, output="table", expired=False)


def _run_action(args: argparse.Namespace) -> int:
    from oncall.cli import remediate_cmd

    return remediate_cmd.run(args)


def _run_list(args: argparse.Namespace) -> int:
    import asyncio

    from oncall.cli.config_cmd import load_from_args
    from oncall.service.silences import list_silences

    settings = load_from_args(args).settings
    silences = asyncio.run(list_silences(settings, expired=args.expired))
    if args.output == "json":
        print(json.dumps({"silences": silences}, indent=2))
        return EXIT_OK
    if not silences:
        print("no silences", file=sys.stderr)
    for s in silences:
        line = (f"{s['id']}  {s['state']:<8} until {s['endsAt']}  {s['matchers']}  "
                f"by {s['createdBy']}: {s['comment']}")  # fmt: skip
        print(printable(line))
    return EXIT_OK


def printable(text: str) -> str:
    """A line for the terminal: a silence made by another tool may carry escape sequences."""
    return "".join(c if c.isprintable() else "?" for c in text)
