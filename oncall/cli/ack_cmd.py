"""`oncall ack ALERT [--note TEXT]`: "I am on it", team-wide (the registry's `acknowledge`).

Run like `oncall remediate acknowledge ALERT`: the preview (who acknowledged it before, who
will have it, for how long) is printed, the person types `yes` on a terminal, read-only mode
refuses, every step is audited. It silences nothing. Every operator's board and `oncall
alerts` show it until the alert resolves or `alerts.ack_ttl` has passed. Exit codes as
`oncall remediate`.
"""

from __future__ import annotations

import argparse
import functools
from collections.abc import Callable
from typing import Any

from oncall.cli.arguments import param_argument


def register(commands: Any, global_options: Callable[..., None]) -> None:
    ack = commands.add_parser("ack", help='acknowledge a firing alert team-wide ("I am on it")')
    checked = functools.partial(param_argument, "acknowledge")  # usage errors, as argparse's
    ack.add_argument("alert", metavar="ALERT", type=checked("alert"), help="the alert's name")
    ack.add_argument("--note", default="", type=checked("note"), help="what you are doing about it")
    ack.add_argument("--dry-run", action="store_true", help="preview only, change nothing")
    global_options(ack, suppress=True)
    ack.set_defaults(handler=_run, action="acknowledge")


def _run(args: argparse.Namespace) -> int:
    from oncall.cli import remediate_cmd

    return remediate_cmd.run(args)
