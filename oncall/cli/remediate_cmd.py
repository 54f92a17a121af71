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

ACTIONS = ("rebuild-pod", "set-degradation-level", "set-max-num-seqs")


def register(commands: Any, global_options: Callable[..., None]) -> None:
    parser = commands.add_parser(
        "remediate", help="preview, confirm (typed, on a terminal) and run one remediation"
    )
    sub = parser.add_subparsers(dest="action", metavar="ACTION")
    pod = sub.add_parser(
        "rebuild-pod", help="delete a pod (UID precondition); wait for its replacement"
    )
    pod.add_argument("pod")
    pod.add_argument("--namespace")
    pod.add_argument("--uid", help="act only if the pod still has this UID")
    level = sub.add_parser("set-degradation-level", help="0 normal, 1 RAG off, 2 FAQ, 3 static")
    level.add_argument("level", type=int, choices=range(4))
    seqs = sub.add_parser(
        "set-max-num-seqs", help="patch vLLM --max-num-seqs and follow the rollout"
    )
    seqs.add_argument("deployment")
    seqs.add_argument("value", type=int)
    seqs.add_argument("--container")
    seqs.add_argument("--namespace")
    rollback = sub.add_parser("rollback", help="undo a verified action (level, max-num-seqs)")
    rollback.add_argument("action_id", help="the audit action id printed when it ran")
    for action in (pod, level, seqs, rollback):
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


def _params(args: argparse.Namespace) -> dict[str, Any]:
    if args.action == "rebuild-pod":
        raw = {"pod": args.pod, "namespace": args.namespace, "uid": args.uid}
    elif args.action == "set-degradation-level":
        raw = {"level": args.level}
    else:
        raw = {"deployment": args.deployment, "value": args.value, "container": args.container,
               "namespace": args.namespace}  # fmt: skip
    return {k: v for k, v in raw.items() if v is not None}


def _show(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, default=str)


def render_preview(preview: Any) -> str:
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


def terminal_verdict() -> Any:
    from oncall.remediation.guards import GuardVerdict

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
    from oncall.remediation.executor import Remediator

    async with Remediator(settings, read_only_flag=bool(getattr(args, "read_only", False))) as r:
        rollback_of = args.action_id if args.action == "rollback" else None
        if rollback_of:
            plan = await r.rollback_plan(rollback_of)
        else:
            plan = await r.plan(args.action, _params(args))

        shown = False

        async def confirm(plan_: Any, preview: Any) -> bool:
            nonlocal shown
            shown = True
            print(render_preview(preview), flush=True)
            if args.dry_run:
                print("--dry-run: nothing was changed")
                return False
            word = str(plan_.confirm_word)
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
    return EXIT_OK if outcome.status == "verified" else EXIT_FOUND


def run_approve(args: argparse.Namespace) -> int:
    from oncall.cli.config_cmd import load_from_args

    settings = load_from_args(args).settings
    return asyncio.run(_approve(settings, args.action_id))


async def _approve(settings: Any, action_id: str) -> int:
    from oncall.remediation.executor import Remediator

    async with Remediator(settings) as r:
        verdict = await r.two_person.approve(action_id, r.holder)
    print(f"{'approved' if verdict.ok else 'refused'}: {verdict.reason}")
    return EXIT_OK if verdict.ok else EXIT_FOUND
