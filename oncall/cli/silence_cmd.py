"""`oncall silence add|list|expire`: Alertmanager silences, as `oncall remediate` runs actions.

    oncall silence add MATCHERS --for 2h --comment TEXT [--dry-run]
    oncall silence list [-o table|json] [--expired]
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
import sys
from collections.abc import Callable
from typing import Any


def register(commands: Any, global_options: Callable[..., None]) -> None:
    parser = commands.add_parser("silence", help="add, list or expire Alertmanager silences")
    sub = parser.add_subparsers(dest="silence_command", metavar="SUBCOMMAND")
    add = sub.add_parser("add", help="silence the alerts MATCHERS select (preview, typed yes)")
    add.add_argument("matchers", metavar="MATCHERS", help='e.g. \'{alertname="X", pod="vllm-0"}\'')
    add.add_argument("--for", dest="duration", default="2h", help="how long: 30m, 2h, 1d")
    add.add_argument("--comment", default="", help="why (required)")
    add.set_defaults(handler=_run_action, action="silence")
    expire = sub.add_parser("expire", help="end a silence now (preview, typed yes)")
    expire.add_argument("silence_id", metavar="ID")
    expire.set_defaults(handler=_run_action, action="silence-expire")
    for one in (add, expire):
        one.add_argument("--dry-run", action="store_true", help="preview only, change nothing")
        global_options(one, suppress=True)

    def usage(_args: argparse.Namespace) -> int:
        parser.print_usage(sys.stderr)
        return 2

    parser.set_defaults(handler=usage)


def _run_action(args: argparse.Namespace) -> int:
    from oncall.cli import remediate_cmd

    return remediate_cmd.run(args)
