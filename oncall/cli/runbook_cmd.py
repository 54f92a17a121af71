"""`oncall runbook lint|test|schema` — for runbook authors, offline (no backend is contacted).

- `lint [PATH...]` (default `runbooks/`): every problem as FILE:LINE:COL: key: message on
  stdout; exit 1 when there are any, 0 when clean. Warnings (`key: warning: …`, e.g. an
  expectation that says ok on missing data) are printed too and fail nothing.
- `test [PATH...] [--run REGEX]` (default `runbooks/`): the `tests/*.test.yaml` files; a line
  per failing case with expected-vs-got; exit 1 on any failure or bad test file.
- `schema`: the runbook JSON Schema (the committed `oncall/checklist/runbook.schema.json`).
"""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from oncall.errors import EXIT_FOUND, EXIT_OK, UsageError

DEFAULT_PATHS = [Path("runbooks")]


def register(commands: Any, global_options: Callable[..., None]) -> None:
    runbook = commands.add_parser("runbook", help="lint, test and describe runbooks (offline)")
    sub = runbook.add_subparsers(dest="runbook_command", metavar="SUBCOMMAND")
    lint = sub.add_parser("lint", help="check runbooks: schema, probes, expressions, needs")
    lint.add_argument("paths", nargs="*", type=Path, metavar="PATH")
    lint.set_defaults(handler=run_lint)
    test = sub.add_parser("test", help="run runbook unit tests (tests/*.test.yaml)")
    test.add_argument("paths", nargs="*", type=Path, metavar="PATH")
    test.add_argument("--run", metavar="REGEX", help="only tests whose name matches")
    test.set_defaults(handler=run_test)
    schema = sub.add_parser("schema", help="print the runbook JSON Schema")
    schema.set_defaults(handler=run_schema)
    new = sub.add_parser("new", help="write a starter runbook (and its test) from an alert rule")
    new.add_argument("alert", metavar="ALERT")
    new.add_argument("--dir", type=Path, default=Path("runbooks"), help="default: runbooks/")
    new.set_defaults(handler=run_new)
    for parser in (lint, test, schema, new):
        global_options(parser, suppress=True)

    def usage(_args: argparse.Namespace) -> int:
        runbook.print_usage(sys.stderr)
        return 2

    runbook.set_defaults(handler=usage)


def _paths(args: argparse.Namespace) -> list[Path]:
    paths: list[Path] = args.paths or DEFAULT_PATHS
    for path in paths:
        try:
            path.stat()
        except FileNotFoundError:
            raise UsageError(f"{path}: no such file or folder") from None
        except OSError as exc:  # a name too long, no permission
            raise UsageError(f"{path}: {exc.strerror or 'cannot be read'}") from None
    return paths


def run_lint(args: argparse.Namespace) -> int:
    from oncall.checklist.loader import runbook_files
    from oncall.service.checklists import lint_of

    paths = _paths(args)
    files = runbook_files(paths)
    problems, warnings = lint_of(paths)
    from oncall.checklist.matching import matching_runbooks, overlaps

    problems += overlaps(matching_runbooks(files))  # runbooks matched by labels
    from oncall.checklist.lint_budgets import budget_problems

    problems += [p for file in files for p in budget_problems(file)]  # what would run long
    for problem in [*problems, *warnings]:
        print(problem)
    count = len(problems)
    warned = f", {len(warnings)} warning{'s' if len(warnings) != 1 else ''}" if warnings else ""
    print(
        f"{len(files)} runbook file{'s' if len(files) != 1 else ''}: "
        + (f"{count} problem{'s' if count != 1 else ''}" if count else "clean")
        + warned,
        file=sys.stderr,
    )
    return EXIT_FOUND if problems else EXIT_OK


def run_test(args: argparse.Namespace) -> int:
    from oncall.checklist.testing import run_tests

    if args.run:
        try:
            re.compile(args.run)
        except re.error as exc:
            raise UsageError(f"--run {args.run!r}: not a regular expression: {exc}") from exc
    report = run_tests(_paths(args), name_filter=args.run)
    for problem in report.problems:
        print(problem)
    for outcome in report.outcomes:
        if outcome.passed:
            continue
        print(f"FAIL {outcome.file}:{outcome.line}: {outcome.name}")
        for mismatch in outcome.mismatches:
            print(f"  {mismatch}")
    passed = sum(1 for o in report.outcomes if o.passed)
    failed = len(report.outcomes) - passed
    verdict = "SUCCESS" if report.ok else "FAILED"
    extra = f", {len(report.problems)} file problems" if report.problems else ""
    print(
        f"{verdict}: {report.files} test files, {len(report.outcomes)} tests, "
        f"{passed} passed, {failed} failed{extra}"
    )
    return EXIT_OK if report.ok else EXIT_FOUND


def run_schema(_args: argparse.Namespace) -> int:
    from oncall.checklist.schema import schema_text

    sys.stdout.write(schema_text())
    return EXIT_OK


def run_new(args: argparse.Namespace) -> int:
    """`oncall runbook new ALERT`: from the rule in the packs and `alerts.files`; never
    overwrites a file."""
    from oncall.checklist.scaffold import starter_runbook, starter_test
    from oncall.cli.config_cmd import load_from_args
    from oncall.service.alerts import load_packs

    settings = load_from_args(args).settings
    rule = next((r for r in load_packs(settings).rules if r.name == args.alert), None)
    if rule is None:
        raise UsageError(f"no alerting rule {args.alert!r} in alerts.packs or alerts.files")
    folder: Path = args.dir
    runbook, test = folder / f"{rule.name}.yaml", folder / "tests" / f"{rule.name}.test.yaml"
    for path in (runbook, test):
        if path.exists():
            raise UsageError(f"{path} exists already: not overwritten")
    test.parent.mkdir(parents=True, exist_ok=True)
    schema = schema_line_for(folder)
    runbook.write_text(starter_runbook(rule, schema), encoding="utf-8")
    test.write_text(starter_test(rule, runbook.name), encoding="utf-8")
    print(f"wrote {runbook} and {test}; check them with: oncall runbook test {folder}")
    return EXIT_OK


def schema_line_for(folder: Path) -> str:
    """The schema line, with the committed schema's path relative to `folder`."""
    import os

    from oncall.checklist.schema import SCHEMA_PATH

    relative = os.path.relpath(SCHEMA_PATH, folder.resolve())
    return f"# yaml-language-server: $schema={relative}"
