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
import contextlib
import re
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from oncall.cli.arguments import param_argument
from oncall.cli.lazy_parser import add_lazy_command
from oncall.errors import EXIT_FOUND, EXIT_OK

if TYPE_CHECKING:
    from oncall.model.action_params import ActionParams
    from oncall.model.write_path import GuardVerdict, Preview

#: `new_action_id()` makes 12 hex digits; a little latitude for ids of older logs.
ACTION_ID = re.compile(r"[0-9a-f]{6,32}")


def register(commands: Any, global_options: Callable[..., None]) -> None:
    # The actions' sub-parsers come from their pydantic models: built only when `remediate`
    # is the command (oncall/cli/lazy_parser.py), not on every start.
    help_text = "preview, confirm (typed, on a terminal) and run one remediation"
    add_lazy_command(commands, "remediate", help_text, _populate, global_options)


def _populate(parser: argparse.ArgumentParser, global_options: Callable[..., None]) -> None:
    from oncall.model.action_params import ACTION_PARAMS

    sub = parser.add_subparsers(dest="action", metavar="ACTION")
    runs = [_action_parser(sub, name, model) for name, model in ACTION_PARAMS.items()]
    rollback = sub.add_parser("rollback", help="undo a verified action (level, max-num-seqs)")
    rollback.add_argument(
        "action_id", type=_action_id, help="the audit action id printed when it ran"
    )
    for action in (*runs, rollback):
        action.add_argument("--dry-run", action="store_true", help="preview only, change nothing")
        global_options(action, suppress=True)
        action.set_defaults(handler=run)
    approve = sub.add_parser("approve", help="approve another person's pending action")
    approve.add_argument(
        "action_id", type=_action_id, help="the id `waiting for a second person` printed"
    )
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
        if info.annotation == bool | None:
            # A yes/no parameter is a flag (--change-both); unset stays None, out of the params.
            kwargs.update(action="store_true", default=None)
        else:
            kwargs["type"] = param_argument(name, field_name)
        if info.annotation is int:
            low, high = _bounds(info.metadata)
            if low is not None and high is not None and high - low < 10:
                kwargs["choices"] = range(low, high + 1)
        if info.is_required():
            action.add_argument(field_name, **kwargs)
        else:
            action.add_argument(f"--{field_name.replace('_', '-')}", dest=field_name, **kwargs)
    return action


def _action_id(text: str) -> str:
    """An audit action id as oncall prints it (hex, `new_action_id`): anything else is a usage
    error here, before it becomes a Redis key (`oncall:approval:ID`) or an audit lookup."""
    wanted = text.strip().lower()
    if not ACTION_ID.fullmatch(wanted):
        raise argparse.ArgumentTypeError(
            f"{text!r} is not an audit action id (hex, e.g. 7ce3f53c2dd0, as printed when it ran)"
        )
    return wanted


def _first_line(doc: str | None) -> str:
    return (doc or "").strip().splitlines()[0] if doc else ""


def _bounds(metadata: list[Any]) -> tuple[int | None, int | None]:
    low = next((m.ge for m in metadata if getattr(m, "ge", None) is not None), None)
    high = next((m.le for m in metadata if getattr(m, "le", None) is not None), None)
    return low, high


def params_of(args: argparse.Namespace) -> dict[str, Any]:
    from oncall.model.action_params import ACTION_PARAMS

    fields = ACTION_PARAMS[args.action].model_fields
    return {k: getattr(args, k) for k in fields if getattr(args, k, None) is not None}


def _is_terminal(stream: Any) -> bool:
    # A closed stdin (`<&-`) leaves sys.stdin None, or a closed file: not a terminal.
    try:
        return bool(stream is not None and stream.isatty())
    except (ValueError, OSError):
        return False


def terminal_verdict() -> GuardVerdict:
    from oncall.model.write_path import GuardVerdict

    if _is_terminal(sys.stdin) and _is_terminal(sys.stdout):
        return GuardVerdict("terminal", True, "a person can answer on this terminal", {})
    return GuardVerdict(
        "terminal", False,
        "a typed confirmation needs a terminal (stdin and stdout); nothing was changed", {},
    )  # fmt: skip


def flush_type_ahead() -> None:
    """Discard what was typed before now: the answer must come after the preview is on screen.

    `tcdrain` waits until the preview has been written to the terminal; `tcflush(TCIFLUSH)`
    then drops every key pressed (or pasted, or piped through `script`) before that moment.
    """
    import termios

    with contextlib.suppress(OSError, ValueError, termios.error):
        termios.tcdrain(sys.stdout.fileno())
    with contextlib.suppress(OSError, ValueError, termios.error):
        termios.tcflush(sys.stdin.fileno(), termios.TCIFLUSH)


async def ask_typed(word: str) -> bool:
    """Ask the person on the terminal to type `word`; True only for exactly that."""
    prompt = (
        f"Type the target's name ({word}) to confirm, anything else to cancel: "
        if word != "yes"
        else "Type yes to confirm, anything else to cancel: "
    )
    if word.startswith("override "):  # a refusal a phrase lets past (capacity_guard.py)
        prompt = (
            f"A guard refuses: type {word!r} (its override) to confirm, anything else to cancel: "
        )
    import asyncio

    flush_type_ahead()
    try:
        answer = await asyncio.to_thread(input, prompt)
    except (EOFError, RuntimeError):  # RuntimeError: input() lost sys.stdin
        return False
    return str(answer).strip() == word


def _settings_and_read_only(args: argparse.Namespace) -> tuple[Any, bool]:
    """The settings, and whether `--read-only` was given. The flag also sets `read_only`; the
    read-only guard names each source it finds, so a `read_only` that only the flag set is
    left to the flag — else `--read-only` alone reads "settings read_only: true and
    --read-only", as if the settings file said so too."""
    from oncall.cli.config_cmd import load_from_args

    loaded = load_from_args(args)
    flag = bool(getattr(args, "read_only", False))
    if loaded.sources.get("read_only") == "flag --read-only":
        return loaded.settings.model_copy(update={"read_only": False}), True
    return loaded.settings, flag


def run(args: argparse.Namespace) -> int:
    import asyncio

    settings, read_only = _settings_and_read_only(args)
    return asyncio.run(_run(settings, args, read_only))


async def _run(settings: Any, args: argparse.Namespace, read_only: bool) -> int:
    from oncall.model.write_path import render_preview
    from oncall.service.remediation import open_remediator

    async with open_remediator(settings, read_only_flag=read_only) as r:
        rollback_of = args.action_id if args.action == "rollback" else None
        if rollback_of is not None:
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
            return await ask_typed(str(preview.plan.confirm_word))

        extra = [] if args.dry_run else [terminal_verdict()]
        outcome = await r.run(plan, confirm, progress=lambda text: print(f"  … {text}", flush=True),
                              extra=extra, rollback_of=rollback_of)  # fmt: skip
        if not shown and outcome.preview is not None:
            print(render_preview(outcome.preview))
        print(f"{outcome.status}: {outcome.message} (audit action {outcome.action_id})")
        if outcome.status == "verified" and plan.undo and not rollback_of:
            print(f"to undo: oncall remediate rollback {outcome.action_id}")
        reverted = await _watch_for_revert(r)
        for problem in r.mirror_errors:
            print(f"oncall: audit mirror: {problem}", file=sys.stderr)
        for problem in r.audit_incomplete:  # after a change: loud, and never exit 0
            print(f"oncall: AUDIT INCOMPLETE: {problem}", file=sys.stderr)
    if r.audit_incomplete or reverted:
        return EXIT_FOUND
    return EXIT_OK if outcome.status == "verified" else EXIT_FOUND


async def _watch_for_revert(r: Any) -> bool:
    """A managed target's revert watch, once the outcome is printed (Ctrl-C stops watching;
    the change stays); True when the change was reverted."""
    from oncall.remediation.revert_watch import watch_and_record

    if r.revert_watch is None:
        return False
    print("  (Ctrl-C stops watching; the change stays as it is)", flush=True)
    result = await watch_and_record(r, lambda text: print(f"  … {text}", flush=True))
    return result is not None and result.reverted


def run_approve(args: argparse.Namespace) -> int:
    import asyncio

    settings, read_only = _settings_and_read_only(args)
    return asyncio.run(_approve(settings, args, read_only))


async def _approve(settings: Any, args: argparse.Namespace, read_only: bool) -> int:
    """The second person: shown the requester's preview, types its word on a terminal."""
    from oncall.service.remediation import approve

    async def confirm(preview: str, word: str) -> bool:
        print("Approving another person's action:", flush=True)
        print(preview, flush=True)
        terminal = terminal_verdict()
        if not terminal.ok:
            print(f"refused (terminal): {terminal.reason}", file=sys.stderr)
            return False
        return await ask_typed(word)

    verdict = await approve(settings, args.action_id, confirm, read_only_flag=read_only)
    print(f"{'approved' if verdict.ok else 'refused'}: {verdict.reason}")
    return EXIT_OK if verdict.ok else EXIT_FOUND
