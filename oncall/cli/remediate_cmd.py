"""`oncall remediate ACTION ... [--dry-run]`: one remediation, confirmed by a person on a terminal.

    oncall remediate rebuild-pod POD [--namespace NS] [--uid UID]
    oncall remediate set-degradation-level LEVEL
    oncall remediate set-max-num-seqs DEPLOYMENT VALUE [--container C] [--namespace NS]
    oncall remediate rollback ACTION_ID         undo a verified level or max-num-seqs change
    oncall remediate approve ACTION_ID          the second person of a two-person action

The preview (exact target, before → after, the server's dry run, every guard's verdict) is
printed; the person then types the target's name (dangerous actions) or `yes`. The answer is
read from the terminal only: without one (piped or redirected input) the action is refused and
audited as refused — no flag or environment variable skips the question. `--dry-run` stops
after the preview (audited as proposed, then declined).

Exit codes: 0 done and verified; 1 refused, declined, failed or not verified; 2 usage; 3 a
backend could not be reached while planning.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from collections.abc import Callable
from typing import Any

from oncall.errors import EXIT_FOUND, EXIT_OK
from oncall.model.action_params import ACTION_PARAMS, ActionParams
from oncall.model.write_path import GuardVerdict, Preview

#: Every action `oncall remediate` runs, by name (the registry's: oncall/model/action_params.py).
ACTIONS = tuple(ACTION_PARAMS)


def register(commands: Any, global_options: Callable[..., None]) -> None:
    parser = commands.add_parser(
        "remediate", help="preview, confirm (typed, on a terminal) and run one remediation"
    )
    sub = parser.add_subparsers(dest="action", metavar="ACTION")
    runs = [_action_parser(sub, name, model) for name, model in ACTION_PARAMS.items()]
    rollback = sub.add_parser("rollback", help="undo a verified action (level, max-num-seqs)")
    rollback.add_argument("action_id", help="the audit action id printed when it ran")
    for action in (*runs, rollback):
        action.add_argument("--dry-run", action="store_true", help="preview only, change nothing")
        global_options(action, suppress=True)
        action.set_defaults(handler=run)
    approve = sub.add_parser("approve", help="approve another person's pending action")
    approve.add_argument("action_id")
    global_options(approve, suppress=True)
    approve.set_defaults(handler=run_approve)

    def usage(_args: argparse.Namespace) -> int:
        parser.print_usage(sys.stderr)
        return 2

    parser.set_defaults(handler=usage)


def _action_parser(sub: Any, name: str, model: type[ActionParams]) -> Any:
    """The subcommand of one action, from its parameters model: each required field is a
    positional argument, each optional one an `--option`; a small integer range is choices."""
    action = sub.add_parser(name, help=_first_line(model.__doc__))
    for field_name, info in model.model_fields.items():
        kwargs: dict[str, Any] = {"help": info.description}
        if info.annotation is int:
            kwargs["type"] = int
            low, high = _bounds(info.metadata)
            if low is not None and high is not None and high - low < 10:
                kwargs["choices"] = range(low, high + 1)
        if info.is_required():
            action.add_argument(field_name, **kwargs)
        else:
            action.add_argument(f"--{field_name.replace('_', '-')}", dest=field_name, **kwargs)
    return action


def _first_line(doc: str | None) -> str:
    return (doc or "").strip().splitlines()[0] if doc else ""


def _bounds(metadata: list[Any]) -> tuple[int | None, int | None]:
    low = next((m.ge for m in metadata if getattr(m, "ge", None) is not None), None)
    high = next((m.le for m in metadata if getattr(m, "le", None) is not None), None)
    return low, high


def params_of(args: argparse.Namespace) -> dict[str, Any]:
    fields = ACTION_PARAMS[args.action].model_fields
    return {k: getattr(args, k) for k in fields if getattr(args, k, None) is not None}


def _show(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, default=str)


def render_preview(preview: Preview) -> str:
    plan = preview.plan
    lines = [
        f"{plan.action} {plan.target.label}"
        + (f" (UID {plan.target.uid})" if plan.target.uid else ""),
        f"  before:  {plan.before}",
        f"  after:   {plan.after}",
        f"  request: {_show(plan.request)}",
        f"  dry run: {_show(preview.dry_run)}",
        "  guards:",
    ]
    lines += [
        f"    {'ok     ' if v.ok else 'REFUSED'} {v.guard}: {v.reason}" for v in preview.verdicts
    ]
    return "\n".join(lines)


def terminal_verdict() -> GuardVerdict:
    if sys.stdin.isatty() and sys.stdout.isatty():
        return GuardVerdict("terminal", True, "a person can answer on this terminal", {})
    return GuardVerdict(
        "terminal", False,
        "a typed confirmation needs a terminal (stdin and stdout); nothing was changed", {},
    )  # fmt: skip


def run(args: argparse.Namespace) -> int:
    from oncall.cli.config_cmd import load_from_args

    settings = load_from_args(args).settings
    return asyncio.run(_run(settings, args))


async def _run(settings: Any, args: argparse.Namespace) -> int:
    from oncall.service.remediation import open_remediator

    read_only = bool(getattr(args, "read_only", False))
    async with open_remediator(settings, read_only_flag=read_only) as r:
        rollback_of = args.action_id if args.action == "rollback" else None
        if rollback_of:
            plan = await r.rollback_plan(rollback_of)
        else:
            plan = await r.plan(args.action, params_of(args))

        shown = False

        async def confirm(preview: Preview) -> bool:
            nonlocal shown
            shown = True
            print(render_preview(preview), flush=True)
            if args.dry_run:
                print("--dry-run: nothing was changed")
                return False
            word = str(preview.plan.confirm_word)
            prompt = (
                f"Type the target's name ({word}) to confirm, anything else to cancel: "
                if word != "yes"
                else "Type yes to confirm, anything else to cancel: "
            )
            try:
                answer = await asyncio.to_thread(input, prompt)
            except EOFError:
                return False
            return str(answer).strip() == word

        extra = [] if args.dry_run else [terminal_verdict()]
        outcome = await r.run(plan, confirm, progress=lambda text: print(f"  … {text}", flush=True),
                              extra=extra, rollback_of=rollback_of)  # fmt: skip
        if not shown and outcome.preview is not None:
            print(render_preview(outcome.preview))
        print(f"{outcome.status}: {outcome.message} (audit action {outcome.action_id})")
        if outcome.status == "verified" and plan.undo and not rollback_of:
            print(f"to undo: oncall remediate rollback {outcome.action_id}")
        for problem in r.mirror_errors:
            print(f"oncall: audit mirror: {problem}", file=sys.stderr)
        for problem in r.audit_incomplete:  # after a change: loud, and never exit 0
            print(f"oncall: AUDIT INCOMPLETE: {problem}", file=sys.stderr)
    if r.audit_incomplete:
        return EXIT_FOUND
    return EXIT_OK if outcome.status == "verified" else EXIT_FOUND


def run_approve(args: argparse.Namespace) -> int:
    from oncall.cli.config_cmd import load_from_args

    settings = load_from_args(args).settings
    return asyncio.run(_approve(settings, args.action_id))


async def _approve(settings: Any, action_id: str) -> int:
    from oncall.service.remediation import approve

    verdict = await approve(settings, action_id)
    print(f"{'approved' if verdict.ok else 'refused'}: {verdict.reason}")
    return EXIT_OK if verdict.ok else EXIT_FOUND
