"""Entry point of the `oncall` command: global options, subcommands, errors and exit codes.

Results go to stdout, diagnostics to stderr; an `OncallError` is printed without a traceback
and exits with its code (docs/on-call.md: 0 all well, 1 something found, 2 usage or configuration,
3 an unreachable backend left the answer incomplete). Anything else is a bug: the last-resort
handler prints one line naming it and where to report it, and exits 70 — never a traceback.
A reader that goes away (`oncall alerts | head`) ends the command quietly with 141.

The headless commands write through `RedactingStream`s: whatever they print, JSON included,
leaves the process with URL passwords, configured secrets and echoed tokens masked. The audit
commands are the exception (`VERBATIM`): records are redacted when written, then shown as is.
"""

from __future__ import annotations

import argparse
import os
import sys
import types
from collections.abc import Callable, Iterator, MutableMapping, Sequence
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import NoReturn

from oncall import __version__, runtime
from oncall.cli.lazy_parser import LazyParser
from oncall.errors import (
    EXIT_BROKEN_PIPE,
    EXIT_INTERNAL,
    EXIT_USAGE,
    OncallError,
    UsageError,
)
from oncall.redaction import RedactingStream, redact

Handler = Callable[[argparse.Namespace], int]

DESCRIPTION = """\
The on-call engineer's terminal for LLM inference services: golden alerts from Prometheus,
root-cause checklists, human-confirmed remediations and a tamper-evident audit log."""

EPILOG = """\
settings: oncall.yaml in the working directory, or --config FILE, or $ONCALL_CONFIG;
then ONCALL_* environment variables (ONCALL_REDIS__TIMEOUT=1s); then flags.
--context NAME (or $ONCALL_CONTEXT) works in one of the settings' `contexts:`.
`oncall config show` prints every effective setting and where it came from.

exit codes: 0 all well; 1 something found; 2 usage or configuration error;
3 an unreachable backend left the answer incomplete; 70 a bug in oncall (please report it)."""

#: Commands whose output is not passed through the redaction: the audit's records were
#: redacted when written and are shown byte for byte, so that their hashes still verify.
VERBATIM = frozenset({"audit"})

REPORT_TO = "please report it to the oncall maintainers with the command you ran"


def _global_options(parser: argparse.ArgumentParser, *, suppress: bool) -> None:
    """Options accepted before or after the command (`oncall --config f config show` or after)."""
    default = argparse.SUPPRESS if suppress else None
    parser.add_argument(
        "--config", type=Path, metavar="FILE", default=default, help="settings file to read"
    )
    parser.add_argument(
        "--context",
        metavar="NAME",
        default=default,
        help="the context (cluster) of `contexts:` to work in; default $ONCALL_CONTEXT",
    )
    parser.add_argument(
        "--read-only",
        action="store_true",
        default=argparse.SUPPRESS if suppress else False,
        help="refuse every remediation (sets read_only)",
    )
    parser.add_argument(
        "--set",
        dest="overrides",
        action="append",
        metavar="KEY=VALUE",
        default=argparse.SUPPRESS if suppress else [],
        help="override one setting, e.g. --set prometheus.url=http://127.0.0.1:9090",
    )


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="oncall",
        description=DESCRIPTION,
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"oncall {__version__}")
    _global_options(parser, suppress=False)
    # Each command's parser is a LazyParser: `remediate` and `audit` build their sub-parsers
    # only when named (their choices come from the actions' pydantic models).
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=LazyParser)

    config = commands.add_parser("config", help="inspect the effective settings")
    config_commands = config.add_subparsers(dest="config_command", metavar="SUBCOMMAND")
    show = config_commands.add_parser(
        "show", help="print every effective setting and where it came from (secrets masked)"
    )
    show.add_argument("-o", "--output", choices=("yaml", "json"), default="yaml")
    _global_options(show, suppress=True)
    show.set_defaults(handler=_run_config_show)
    config.set_defaults(handler=_usage_of(config))

    alerts = commands.add_parser(
        "alerts", help="the golden alerts' states (exit 1 if one fires, 3 if Prometheus is down)"
    )
    alerts.add_argument("-o", "--output", choices=("table", "json"), default="table")
    alerts.add_argument("--watch", action="store_true", help="refresh every alerts.refresh")
    alerts.add_argument(
        "--match", metavar="SELECTION", help='label matchers and/or words: severity="page" crash'
    )
    _global_options(alerts, suppress=True)
    alerts.set_defaults(handler=_run_alerts)

    check = commands.add_parser(
        "check", help="run one alert's checklist headless (exit 1 on a failing step)"
    )
    check.add_argument("alert", metavar="ALERT", help="alert name, e.g. LLMHighP99Latency")
    check.add_argument("-o", "--output", choices=("table", "json"), default="table")
    check.add_argument(
        "--record", metavar="FILE", help="write the run's facts as a runbook test case to FILE"
    )
    check.add_argument(
        "--chart",
        nargs="?",
        const="1h",
        choices=("15m", "1h", "6h", "24h"),
        metavar="WINDOW",
        help="also chart the alert and its PromQL evidence over WINDOW (15m, 1h, 6h, 24h)",
    )
    _global_options(check, suppress=True)
    check.set_defaults(handler=_run_check)

    from oncall.cli import (
        ack_cmd,
        audit_cmd,
        drill_cmd,
        incident_cmd,
        remediate_cmd,
        rules_cmd,
        runbook_cmd,
        serve_cmd,
        silence_cmd,
    )

    runbook_cmd.register(commands, _global_options)
    audit_cmd.register(commands, _global_options)
    remediate_cmd.register(commands, _global_options)
    silence_cmd.register(commands, _global_options)
    ack_cmd.register(commands, _global_options)
    drill_cmd.register(commands, _global_options)
    rules_cmd.register(commands, _global_options)
    serve_cmd.register(commands, _global_options)
    incident_cmd.register(commands, _global_options)
    return parser


class _NotTheApp(Exception):
    """`app_args` cannot tell: the whole parser decides (and reports any usage error)."""


class _GlobalOptionsOnly(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        raise _NotTheApp(message)


def app_args(words: Sequence[str]) -> argparse.Namespace | None:
    """The arguments of `oncall [GLOBAL OPTIONS]` (the app), or None for anything else.

    The whole parser holds every command's sub-parsers, and building them is ≈ 15-60 ms of
    CPU on two cores (argparse makes a parser, a formatter and a help action for each), paid
    before the app's first frame. Only the global options can start the app, so a parser of
    those alone reads them; any other word (a command, --help, --version, an unknown or
    broken option, `--`) is left to the whole parser, which answers it as before. The result
    is the whole parser's namespace for the same words (tests/test_cli.py compares them)."""
    if "--" in words:
        return None
    parser = _GlobalOptionsOnly(prog="oncall", add_help=False)
    _global_options(parser, suppress=False)
    try:
        args, rest = parser.parse_known_args(list(words), argparse.Namespace(command=None))
    except _NotTheApp:
        return None
    return None if rest else args


def _usage_of(parser: argparse.ArgumentParser) -> Handler:
    def handler(_args: argparse.Namespace) -> int:
        parser.print_usage(sys.stderr)
        return EXIT_USAGE

    return handler


def no_pydantic_plugins() -> None:
    """oncall uses no pydantic plugins: say so before the first model is built.

    Discovering plugins scans every installed distribution's entry points; with
    PYDANTIC_DISABLE_PLUGINS=__all__ pydantic skips the scan, but its loader module still
    imports `importlib.metadata` (with email, zipfile, csv: ≈ 20-40 ms of CPU) only to return
    no plugins. Where plugins are disabled for all and the loader is not loaded yet, a stand-in
    with the one function pydantic calls (`get_plugins`, pydantic/plugin/_schema_validator.py)
    returns that same empty answer. A user who sets the variable to something else (names of
    plugins to skip) gets pydantic's own loader and its discovery."""
    os.environ.setdefault("PYDANTIC_DISABLE_PLUGINS", "__all__")
    loader = "pydantic.plugin._loader"
    if os.environ["PYDANTIC_DISABLE_PLUGINS"] == "__all__" and loader not in sys.modules:
        stand_in = types.ModuleType(loader, "No pydantic plugins (oncall.cli.main).")
        stand_in.get_plugins = tuple  # type: ignore[attr-defined]  # get_plugins() -> ()
        sys.modules[loader] = stand_in


def _run_config_show(args: argparse.Namespace) -> int:
    no_pydantic_plugins()
    with runtime.start_up_paused():  # all of it is start-up: imports, models, one file read
        from oncall.cli.config_cmd import show

        return show(args)


def _run_alerts(args: argparse.Namespace) -> int:
    no_pydantic_plugins()
    from oncall.cli.alerts_cmd import run

    return run(args)


def _run_check(args: argparse.Namespace) -> int:
    no_pydantic_plugins()
    with runtime.start_up_paused():  # until check_cmd has loaded the settings and the runbook
        from oncall.cli.check_cmd import run

        return run(args)


#: The most frames a second the app draws (Textual's TEXTUAL_FPS, whose default is 60). A key
#: press landing just after a frame waits for the next: up to 16.7 ms at 60, a third of the
#: 50 ms a press may take with every backend hung (docs/PERFORMANCE.md; scripts/bench/tui.py, max
#: 40-57 ms a run at 60, 12-33 ms at 120). Frames are drawn only when something changed, so
#: an idle board costs nothing more. A TEXTUAL_FPS of the user's own is kept.
FRAME_RATE = 120


def cap_frame_rate(environ: MutableMapping[str, str] = os.environ) -> None:
    """The app's frame rate, unless the environment sets one; before Textual is imported."""
    environ.setdefault("TEXTUAL_FPS", str(FRAME_RATE))


def prepare_app_start() -> None:
    """What the process does before importing the app (also called by scripts/bench/tui.py)."""
    cap_frame_rate()
    no_pydantic_plugins()
    # Start-up creates objects by the hundred thousand (imports, CSS, the first compose), and
    # the collector walks them again and again: a seventh of the time to the first frame on
    # two cores (scripts/bench/tui.py). The app turns it back on after its first frame.
    runtime.collector_off()


def _run_app(args: argparse.Namespace) -> int:
    prepare_app_start()
    from oncall.cli.config_cmd import load_from_args

    settings = load_from_args(args).settings
    if not (sys.stdin.isatty() and sys.stdout.isatty()):
        raise UsageError(
            "the app needs a terminal; for scripts use `oncall alerts` or `oncall check ALERT`"
        )
    # Textual is imported only here: `oncall --help` and the headless commands stay light.
    from oncall.tui.app import OncallApp

    OncallApp(settings).run()
    return 0


@contextmanager
def _redacted_output() -> Iterator[None]:
    """stdout and stderr through the redaction for the length of a headless command."""
    out, err = sys.stdout, sys.stderr
    sys.stdout, sys.stderr = RedactingStream(out), RedactingStream(err)
    try:
        yield
    finally:
        wrapped, sys.stdout, sys.stderr = (sys.stdout, sys.stderr), out, err
        for stream in wrapped:
            with suppress(ValueError):  # closed; a BrokenPipeError goes on to main
                stream.flush()


def _quiet_broken_pipe() -> int:
    """The reader of stdout went away: point fd 1 at /dev/null so that the interpreter's
    final flush does not complain either (the Python docs' recipe for SIGPIPE)."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError, AttributeError):  # a stream without a file (tests): nothing to do
        pass
    return EXIT_BROKEN_PIPE


def _last_resort(exc: BaseException) -> int:
    text = redact(str(exc)).replace("\n", " ")[:300]
    line = f"oncall: internal error: {type(exc).__name__}: {text} ({REPORT_TO})"
    with suppress(OSError, ValueError):
        print(line, file=sys.stderr)
    return EXIT_INTERNAL


def main(argv: Sequence[str] | None = None) -> int:
    try:
        code = _main(argv)
        sys.stdout.flush()  # here, not at exit: a reader gone (`| head`) is then handled
    except SystemExit:  # argparse's --help and usage errors
        with suppress(BrokenPipeError):
            sys.stdout.flush()
            raise
        raise SystemExit(_quiet_broken_pipe()) from None
    except BrokenPipeError:
        return _quiet_broken_pipe()
    return code


def _main(argv: Sequence[str] | None) -> int:
    # Before the parser: `remediate` and `audit`, when named, derive their options from the
    # actions' pydantic models, and the first model built would otherwise scan every installed
    # distribution's entry points for pydantic plugins (oncall uses none): ~40 ms.
    no_pydantic_plugins()
    words = list(sys.argv[1:] if argv is None else argv)
    nul = any("\x00" in word for word in words)
    args = None if nul else app_args(words)  # the app: no need for every command's parser
    if args is None:
        parser = build_parser()
        if nul:
            # No exec'd command line can hold one (C strings); only a caller's list can, and
            # a path with it would be a ValueError deep inside whatever opens it.
            parser.error("an argument contains a NUL byte")
        args = parser.parse_args(words)
    handler: Handler | None = getattr(args, "handler", None)
    try:
        if handler is None:  # the app draws on the terminal itself; nothing to wrap
            return _run_app(args)
        runtime.freeze_at_exit()  # a headless command's exit: no collection of it all
        if args.command in VERBATIM:
            return handler(args)
        with _redacted_output():
            return handler(args)
    except OncallError as exc:
        print(redact(exc.report()), file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print("oncall: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        raise  # main's: the reader went away
    except Exception as exc:  # the last resort: one line, never a traceback
        return _last_resort(exc)
