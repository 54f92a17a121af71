"""`oncall incident list|show|export` and `oncall note` — incidents, for on-call engineers and
the people who write the postmortem (docs/architecture.md §3).

    oncall incident [list] [-o table|json]     the team's incidents, newest first
    oncall incident show ID [-o text|json]     one incident's timeline
    oncall incident export ID [-o markdown|json]   the postmortem draft
    oncall note ID TEXT                        a note on the incident, in the audit log

Exit codes: 0 all well; 1 the audit chain failed verification (the draft still printed, and
says so at its top); 2 an unknown incident id or bad usage; 3 a backend could not be read
(the store: nothing printed; Prometheus or the verdicts: the draft names what it lacks).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from collections.abc import Callable, Coroutine
from typing import TYPE_CHECKING, Any, TypeVar

from oncall.errors import EXIT_FOUND, EXIT_INCOMPLETE, EXIT_OK

if TYPE_CHECKING:
    from oncall.incidents.postmortem import Draft
    from oncall.service.incident_view import IncidentView

T = TypeVar("T")


def register(commands: Any, global_options: Callable[..., None]) -> None:
    parser = commands.add_parser("incident", help="the team's incidents, timelines, postmortems")
    sub = parser.add_subparsers(dest="incident_command", metavar="SUBCOMMAND")
    listing = sub.add_parser("list", help="the incidents, newest first")
    listing.add_argument("-o", "--output", choices=("table", "json"), default="table")
    listing.set_defaults(handler=_run_list)
    show = sub.add_parser("show", help="one incident's timeline")
    show.add_argument("incident_id", metavar="ID", help="e.g. inc-3f9a1c2e0b")
    show.add_argument("-o", "--output", choices=("text", "json"), default="text")
    show.set_defaults(handler=_run_show)
    export = sub.add_parser("export", help="the postmortem draft (exit 1 on a broken audit chain)")
    export.add_argument("incident_id", metavar="ID", help="e.g. inc-3f9a1c2e0b")
    export.add_argument("-o", "--output", choices=("markdown", "json"), default="markdown")
    export.set_defaults(handler=_run_export)
    for one in (listing, show, export):
        global_options(one, suppress=True)
    parser.set_defaults(handler=_run_list, output="table")

    note = commands.add_parser("note", help="add a note to an incident (audited)")
    note.add_argument("incident_id", metavar="ID", help="the incident, e.g. inc-3f9a1c2e0b")
    note.add_argument("text", metavar="TEXT", nargs="+", help="what happened or what you did")
    global_options(note, suppress=True)
    note.set_defaults(handler=_run_note)


def _with_view(
    args: argparse.Namespace, work: Callable[[IncidentView], Coroutine[Any, Any, T]]
) -> T:
    from oncall.cli.config_cmd import load_from_args
    from oncall.service.incident_view import IncidentView

    settings = load_from_args(args).settings

    async def run() -> T:
        view = IncidentView(settings)
        try:
            return await work(view)
        finally:
            await view.aclose()

    return asyncio.run(run())


def _when(ts: float | None) -> str:
    from oncall.incidents.timeline import iso

    return "-" if ts is None else iso(ts)


def _run_list(args: argparse.Namespace) -> int:
    incidents = _with_view(args, lambda view: view.recent())
    if args.output == "json":
        print(json.dumps({"incidents": [i.to_json() for i in incidents]}, indent=2,
                         ensure_ascii=False))  # fmt: skip
        return EXIT_OK
    if not incidents:
        print("no incidents", file=sys.stderr)
    for inc in incidents:
        state = "ongoing" if inc.ongoing else f"closed {_when(inc.closed_at)}"
        why = inc.explanation or (inc.members[0].alert if inc.members else "")
        print(f"{inc.id}  opened {_when(inc.opened_at)}  {state:<28} "
              f"{len(inc.members):>3} alert(s)  {why}")  # fmt: skip
    return EXIT_OK


async def _draft(view: IncidentView, incident_id: str) -> Draft:
    return await view.draft(await view.get(incident_id.strip()))


def _exit_of(draft: Draft) -> int:
    if draft.chain.status == "failed":
        return EXIT_FOUND
    return EXIT_INCOMPLETE if draft.gaps else EXIT_OK


def _run_show(args: argparse.Namespace) -> int:
    from oncall.incidents.postmortem import NOT_VOUCHED, to_json
    from oncall.incidents.timeline import iso, ordered

    draft = _with_view(args, lambda view: _draft(view, args.incident_id))
    if args.output == "json":
        print(json.dumps(to_json(draft), indent=2, ensure_ascii=False))
        return _exit_of(draft)
    inc = draft.incident
    print(f"{inc.id}  {'ongoing' if inc.ongoing else 'closed ' + _when(inc.closed_at)}  "
          f"{inc.explanation}")  # fmt: skip
    for gap in draft.gaps:
        print(f"oncall: incomplete: {gap}", file=sys.stderr)
    for event in ordered(draft.events):
        mark = f"  [{event.record}]" if event.record else ""
        if event.vouched is False:
            mark += f" {NOT_VOUCHED}"
        print(f"{iso(event.ts)}  {event.kind:<9} {event.text}{mark}")
    if draft.chain.status == "failed":
        print("oncall: the audit chain failed verification: `oncall audit verify`", file=sys.stderr)
    return _exit_of(draft)


def _run_export(args: argparse.Namespace) -> int:
    from oncall.incidents.postmortem import markdown, to_json

    draft = _with_view(args, lambda view: _draft(view, args.incident_id))
    if args.output == "json":
        print(json.dumps(to_json(draft), indent=2, ensure_ascii=False))
    else:
        sys.stdout.write(markdown(draft))
    return _exit_of(draft)


def _run_note(args: argparse.Namespace) -> int:
    text = " ".join(args.text)
    record, problem = _with_view(args, lambda view: view.note(args.incident_id.strip(), text))
    print(f"noted on {args.incident_id.strip()}: record {record['seq']} ({record['id']})")
    if problem is not None:
        print(f"oncall: the team Stream did not get the note: {problem}", file=sys.stderr)
    return EXIT_OK
