"""`oncall audit list|show|verify|acknowledge|export` — for audit reviewers; reads `audit.path`.

- `list [--since DUR|TIME] [--actor X] [--action A] [--target T] [--context NAME]
  [-o table|json]`: --context keeps the records of actions in that context (`contexts:`);
  the table has a CONTEXT column when a record listed carries one
- `show ID`: one record by id or seq, as indented JSON; exit 2 when there is none.
- `verify`: "OK: N records, chain intact", or every break in the chain, each with its scar id;
  the local chain is cross-checked against the team Stream (`audit.redis_stream`): records
  the Stream has that the file lost, and the reverse, and this account's deleted logs. Scars a
  reviewer acknowledged as "ACKNOWLEDGED: …"; actions started without an outcome as
  "INCOMPLETE: …". Exit 1 on any problem or incomplete action; else 3 when the Stream was
  unreachable or off ("LOCAL ONLY: …", and "LOCAL CHAIN INTACT", never "OK": the file
  agreeing with itself proves nothing against whoever can write it); else 0.
- `acknowledge SCAR --reason TEXT`: a reviewer signs off one scar that verify lists (typed
  confirmation on a terminal; an `acknowledged` record, copied to the Stream). Verify then
  lists it as acknowledged, not as a break; any new problem is still a break.
- `export [-o jsonl|csv]` (same filters as list): JSONL is the log's lines verbatim; CSV
  has fixed columns (`CSV_COLUMNS`), a `context` one among them (empty: no context).

Secrets in the settings are masked in everything printed, even in a line written by hand.
The log is read through `oncall.service.audit_view.LiveAudit`, as the app's audit screen reads it.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from oncall.cli.lazy_parser import add_lazy_command
from oncall.errors import EXIT_FOUND, EXIT_INCOMPLETE, EXIT_OK, EXIT_USAGE, UsageError
from oncall.redaction import json_terminal_safe, terminal_safe

if TYPE_CHECKING:
    from oncall.service.audit_view import AuditQuery, LiveAudit, LogLine

TABLE_WIDTHS = {"CONTEXT": 20, "TARGET": 40, "ALERT": 28, "OUTCOME": 40}


def register(commands: Any, global_options: Callable[..., None]) -> None:
    # `--action`'s choices are the registry's names (pydantic models): the sub-parsers are
    # built only when `audit` is the command (oncall/cli/lazy_parser.py).
    help_text = "list, show, verify and export the audit log"
    add_lazy_command(commands, "audit", help_text, _populate, global_options)


def _populate(audit: argparse.ArgumentParser, global_options: Callable[..., None]) -> None:
    sub = audit.add_subparsers(dest="audit_command", metavar="SUBCOMMAND")

    listing = sub.add_parser("list", help="the records, oldest first (filters combine)")
    _filters(listing)
    listing.add_argument("-o", "--output", choices=("table", "json"), default="table")
    listing.set_defaults(handler=run_list)

    show = sub.add_parser("show", help="one record as JSON, by id or seq (exit 2 if none)")
    show.add_argument("record_id", metavar="ID", help="record id (000007-3f9a1c2e) or seq (7)")
    show.set_defaults(handler=run_show)

    verify = sub.add_parser(
        "verify", help="prove the log was not edited, cut or reordered (exit 1 if it was)"
    )
    verify.set_defaults(handler=run_verify)

    acknowledge = sub.add_parser(
        "acknowledge", help="sign off one scar verify lists, as reviewed (typed, on a terminal)"
    )
    acknowledge.add_argument(
        "scar", metavar="SCAR", help="the scar id verify prints, e.g. 3f9a1c2e"
    )
    acknowledge.add_argument("--reason", required=True, metavar="TEXT", help="what was reviewed")
    acknowledge.set_defaults(handler=run_acknowledge)

    export = sub.add_parser("export", help="the records as JSONL (verbatim lines) or CSV")
    _filters(export)
    export.add_argument("-o", "--output", choices=("jsonl", "csv"), default="jsonl")
    export.set_defaults(handler=run_export)

    for parser in (listing, show, verify, acknowledge, export):
        global_options(parser, suppress=True)

    def usage(_args: argparse.Namespace) -> int:
        audit.print_usage(sys.stderr)
        return EXIT_USAGE

    audit.set_defaults(handler=usage)


def _filters(parser: argparse.ArgumentParser) -> None:
    from oncall.model.action_params import ACTION_PARAMS

    parser.add_argument("--since", metavar="DUR|TIME", help="e.g. 1h, 2d or 2025-06-01T12:00Z")
    parser.add_argument("--actor", metavar="USER", help="user name contains this")
    parser.add_argument("--action", choices=tuple(ACTION_PARAMS), help="this remediation only")
    parser.add_argument("--target", metavar="NAME", help="target name contains this")


def _open_log(args: argparse.Namespace) -> LiveAudit:
    # oncall uses no pydantic plugins; discovering them slows every headless command's start.
    os.environ.setdefault("PYDANTIC_DISABLE_PLUGINS", "__all__")
    from oncall.cli.config_cmd import load_from_args
    from oncall.service.audit_view import LiveAudit

    return LiveAudit(load_from_args(args).settings)


def _query(args: argparse.Namespace) -> AuditQuery:
    from oncall.service.audit_view import AuditQuery, parse_since

    try:
        since = parse_since(args.since) if args.since else None
    except OverflowError:  # "99999999999d": further back than a datetime can go
        raise UsageError(f"--since {args.since!r}: too far back") from None
    return AuditQuery(
        since=since,
        actor=args.actor,
        action=args.action,
        target=args.target,
        context=getattr(args, "context", None),  # --context: that context's records only
    )


def _selected(audit: LiveAudit, args: argparse.Namespace) -> list[LogLine]:
    query = _query(args)
    if not audit.path.exists():
        print(f"oncall: no audit log at {audit.path} yet", file=sys.stderr)
        return []
    lines = audit.lines(query)
    bad = [line for line in lines if line.problem is not None]
    for line in bad:
        print(f"oncall: {audit.path}: line {line.number}: {line.problem}", file=sys.stderr)
    if bad:
        print("oncall: run `oncall audit verify` to check the whole chain", file=sys.stderr)
    return lines


def render_table(lines: list[LogLine]) -> str:
    """The records as columns; CONTEXT (before TARGET, which it scopes) only when a record has
    one: a log of one cluster (no `contexts:`) keeps its narrower table."""
    from oncall.audit.query import text_of
    from oncall.service.audit_view import cut, row_of

    # Decided first, so that a table without the column never builds its cells.
    with_context = any(line.record and text_of(line.record.get("context")) for line in lines)
    header = ("SEQ", "TIME (UTC)", "USER", "TRANSITION", "ACTION",
              *(("CONTEXT",) if with_context else ()), "TARGET", "ALERT", "OUTCOME")  # fmt: skip
    rows: list[tuple[str, ...]] = [header]
    for line in lines:
        row = row_of(line.number, line.record, line.problem)
        if row.problem is not None:
            # Untruncated, in the last column, so it does not widen the others.
            rows.append(("-", *[""] * (len(header) - 2), row.outcome))
            continue
        context: tuple[str, ...] = ()
        if with_context:
            context = (text_of(line.record.get("context")) if line.record else "",)
        cells = (
            str(row.seq), row.time, row.user, row.transition, row.action, *context, row.target,
            row.alert, row.outcome,
        )  # fmt: skip
        rows.append(tuple(cut(c, TABLE_WIDTHS.get(h)) for c, h in zip(cells, header, strict=True)))
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    text = [
        "  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip() for row in rows
    ]
    return "\n".join(text) + "\n"


def run_list(args: argparse.Namespace) -> int:
    audit = _open_log(args)
    lines = _selected(audit, args)
    if args.output == "json":
        body = [
            line.record if line.problem is None and line.record is not None
            else {"line": line.number, "problem": line.problem}
            for line in lines
        ]  # fmt: skip
        print(json_terminal_safe(json.dumps(body, indent=2, ensure_ascii=False)))
    else:
        sys.stdout.write(terminal_safe(render_table(lines)))
    return EXIT_OK


def run_show(args: argparse.Namespace) -> int:
    audit = _open_log(args)
    wanted = args.record_id.strip()
    record = audit.find(wanted)
    if record is None:
        raise UsageError(f"no audit record with id or seq {wanted!r} in {audit.path}")
    print(json_terminal_safe(json.dumps(record, indent=2, ensure_ascii=False)))
    return EXIT_OK


def run_verify(args: argparse.Namespace) -> int:
    import asyncio

    audit = _open_log(args)
    if not audit.exists:
        print(f"oncall: no audit log at {audit.path} yet", file=sys.stderr)
    report = asyncio.run(audit.check_anchored())
    count = f"{report.count} record{'s' if report.count != 1 else ''}"
    if report.ok and report.incomplete_check is not None:
        # The file agrees with itself, which whoever can write it can arrange: not "OK".
        print(f"LOCAL CHAIN INTACT: {count}; not anchored, so not proven")
    elif report.ok:
        print(f"OK: {count}, chain intact")
    else:
        for item in report.breaks:
            print(f"{item} (scar {item.scar})")
    for note in report.notes:
        print(f"NOTE: {note}")
    for done in report.acknowledged:
        print(f"ACKNOWLEDGED: {done}")
    for action in report.incomplete:
        print(f"INCOMPLETE: {action}")
    if report.incomplete_check is not None:
        print(f"LOCAL ONLY: {report.incomplete_check}; only the local chain was checked")
    elif report.anchor is not None:
        print(f"ANCHOR: {report.anchor}")
    if not report.ok:
        print(
            f"FAILED: {count} read from {audit.path}; the chain is broken "
            "(a reviewer signs off a scar: oncall audit acknowledge SCAR --reason TEXT)",
            file=sys.stderr,
        )
    if not report.ok or report.incomplete:
        return EXIT_FOUND
    return EXIT_INCOMPLETE if report.incomplete_check is not None else EXIT_OK


def run_acknowledge(args: argparse.Namespace) -> int:
    import asyncio

    audit = _open_log(args)
    reason = " ".join(str(args.reason).split())
    if not reason:
        raise UsageError("--reason: say what was reviewed")
    report = asyncio.run(audit.check_anchored())
    wanted = args.scar.strip().lower()
    found = next((item for item in report.breaks if item.scar == wanted), None)
    if found is None:
        done = next((a for a in report.acknowledged if a.scar.scar == wanted), None)
        if done is not None:
            print(f"already acknowledged: {done}")
            return EXIT_OK
        raise UsageError(f"no scar {wanted!r} among the problems `oncall audit verify` lists now")
    scar = found
    if not (sys.stdin.isatty() and sys.stdout.isatty()):
        raise UsageError("acknowledging a scar needs a typed confirmation on a terminal")
    print(f"scar {scar.scar}: {scar}\nreason: {reason}", flush=True)
    if report.incomplete_check is not None:
        print(f"note: {report.incomplete_check}", flush=True)
    # What was typed before the scar was on screen does not count (tcdrain, then tcflush).
    from oncall.cli.remediate_cmd import flush_type_ahead

    flush_type_ahead()
    try:
        answer = input(f"Type the scar id ({scar.scar}) to sign it off as reviewed: ")
    except EOFError:
        answer = ""
    if answer.strip().lower() != scar.scar:
        print("cancelled: nothing was recorded")
        return EXIT_FOUND
    record, mirror_problem = asyncio.run(audit.acknowledge(scar, reason))
    print(f"acknowledged: scar {scar.scar} (record {record['seq']}, {record['id']})")
    if mirror_problem is not None:
        print(
            f"oncall: the team Stream did not get the acknowledgement: {mirror_problem}; "
            "verify will report it as missing from the Stream",
            file=sys.stderr,
        )
    return EXIT_OK


def run_export(args: argparse.Namespace) -> int:
    from oncall.service.audit_view import to_csv

    audit = _open_log(args)
    lines = _selected(audit, args)
    if args.output == "csv":
        records = [line.record for line in lines if line.problem is None and line.record]
        sys.stdout.write(to_csv(records))
        return EXIT_OK
    # The lines' exact bytes (so each still matches its hash); a text stream without a binary
    # buffer (a caller's StringIO) gets them decoded.
    out = getattr(sys.stdout, "buffer", None)
    for line, raw, masked in audit.export_lines(lines):
        if masked:
            print(
                f"oncall: line {line.number} holds a configured secret; masked in this export "
                "(that line no longer matches its hash)",
                file=sys.stderr,
            )
        if out is not None:
            out.write(raw)
        else:
            sys.stdout.write(raw.decode("utf-8", "replace"))
    (out or sys.stdout).flush()
    return EXIT_OK
