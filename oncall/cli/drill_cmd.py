"""`oncall drill up|down|status|inject|clear|scenarios|watch`: the drill environment.

The only module outside `oncall_drill/` that imports it (import-linter contract), and only
inside the handlers: the drill and its libraries are the optional extra `oncall[drill]`, so
`oncall --help` and every other command work without them, and `oncall drill ...` without
them says how to install them (exit 2) instead of failing in a simulator's child process.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import math
import sys
import time
from pathlib import Path
from typing import Any

from oncall.errors import EXIT_FOUND, EXIT_USAGE, OncallError

DEFAULT_DIR = Path(".drill")
# The top-level modules of the `drill` extra in pyproject.toml (aiohttp, jsonpatch, trustme).
EXTRA_MODULES = ("aiohttp", "jsonpatch", "trustme")
INSTALL_COMMAND = "pip install 'oncall[drill]'"


class DrillCommandError(OncallError):
    exit_code = EXIT_USAGE


def register(commands: Any, global_options: Any) -> None:
    """Add the `drill` command and its subcommands to the CLI parser."""
    drill = commands.add_parser("drill", help="the simulated service stack for demos and game days")
    sub = drill.add_subparsers(dest="drill_command", metavar="SUBCOMMAND")

    def add(name: str, help_text: str, handler: Any) -> argparse.ArgumentParser:
        parser: argparse.ArgumentParser = sub.add_parser(name, help=help_text)
        parser.add_argument("--dir", type=Path, default=DEFAULT_DIR, help="drill directory")
        global_options(parser, suppress=True)
        parser.set_defaults(handler=handler)
        return parser

    up = add("up", "start the stack in the background and write oncall.yaml + kubeconfig", run_up)
    up.add_argument("--scenario", help="inject this scenario once the stack is up")
    up.add_argument(
        "--for-scale", type=float, default=1.0, help="scale of the deployed rules' `for` durations"
    )
    up.add_argument(
        "--rules",
        type=Path,
        action="append",
        default=[],
        metavar="PATH",
        help="rule file or folder to deploy to the drill's Prometheus (default: ./alerts)",
    )
    up.add_argument("--replicas", type=int, default=2, help="vLLM pods")
    up.add_argument(
        "--ready-delay",
        type=float,
        metavar="SECONDS",
        help="how long a started pod takes to become Ready (a vLLM pod loading its weights: "
        "minutes in production; default: a fraction of a second)",
    )
    up.add_argument(
        "--contexts",
        type=int,
        default=0,
        metavar="N",
        help="N independent stacks in DIR/eu, DIR/us, … and DIR/oncall.yaml naming them all "
        "(--scenario goes to the first); other commands take --context NAME for one of them",
    )
    up.add_argument(
        "--fleet",
        action="store_true",
        help="a fleet for benchmarks: 5,000 pods over 50 nodes and 20 Deployments, 400 GPUs, "
        "200 more alerting rules",
    )
    up.add_argument(
        "--managed",
        action="store_true",
        help="the vLLM Deployment owned by a simulated production-stack operator (VLLMRuntime) "
        "that reverts a patch of its args after --operator-delay",
    )
    up.add_argument(
        "--operator-delay",
        type=float,
        default=60.0,
        metavar="SECONDS",
        help="--managed: seconds before the operator reverts a patch, times --for-scale "
        "(default 60)",
    )
    up.add_argument(
        "--dcgm-layout",
        default="helm",
        help="DCGM labels: helm (default Helm install), or any of honor-labels, hostname, "
        "virtual-gpus, mig (comma-separated)",
    )
    add("down", "stop every process the drill started", run_down)
    status = add(
        "status", "processes, URLs and Prometheus targets of the running drill", run_status
    )
    status.add_argument("-o", "--output", choices=("table", "json"), default="table")
    inject = add("inject", "inject a scenario's faults into the running drill", run_inject)
    inject.add_argument("scenario")
    add("clear", "undo every fault and return to the base load", run_clear)
    notes = add(
        "notifications", "what `oncall serve` sent the drill's chat sink (one per verdict)",
        run_notifications,
    )  # fmt: skip
    notes.add_argument("-o", "--output", choices=("table", "json"), default="table")
    scenarios = add("scenarios", "list the scenarios and the alert each trips", run_scenarios)
    scenarios.add_argument("-o", "--output", choices=("table", "json"), default="table")
    watch = add(
        "watch", "the golden signals of every scenario, live, against thresholds", run_watch
    )
    watch.add_argument("--interval", type=float, default=2.0)
    watch.add_argument("--count", type=int, default=0, help="stop after N refreshes (0: Ctrl-C)")

    @_drill_errors
    def usage(_args: argparse.Namespace) -> int:
        drill.print_usage(sys.stderr)
        return EXIT_USAGE

    drill.set_defaults(handler=usage)


def missing_extra() -> list[str]:
    """The modules of the `drill` extra that cannot be found (without importing any of them)."""
    missing = []
    for name in EXTRA_MODULES:
        try:
            found = importlib.util.find_spec(name) is not None
        except (ImportError, ValueError):  # a broken install, or a module blocked in sys.modules
            found = False
        if not found:
            missing.append(name)
    return missing


def install_hint(missing: list[str]) -> str:
    """One line for stderr: what is missing and the command that installs it."""
    return f"oncall drill needs the drill extra (missing: {', '.join(missing)}): {INSTALL_COMMAND}"


def _drill_errors(fn: Any) -> Any:
    def wrapper(args: argparse.Namespace) -> int:
        # Checked up front: `up` would otherwise start simulators that die on their imports.
        # All three: aiohttp alone proves nothing, kubernetes>=37 depends on it too.
        if missing := missing_extra():
            print(install_hint(missing), file=sys.stderr)
            return EXIT_USAGE
        from oncall_drill.components import DrillError

        try:
            result: int = fn(args)
            return result
        except DrillError as exc:
            raise DrillCommandError(f"drill: {exc}") from exc
        except ModuleNotFoundError as exc:
            # Found above but not importable after all (a partial install, a submodule missing).
            if (exc.name or "").partition(".")[0] not in EXTRA_MODULES:
                raise
            print(install_hint([exc.name or ""]), file=sys.stderr)
            return EXIT_USAGE

    return wrapper


def _stack_dir(args: argparse.Namespace) -> Path:
    """--dir, or with `--context NAME` that stack of a `--contexts` drill."""
    from oncall_drill.contexts import stack_dir

    return stack_dir(args.dir, getattr(args, "context", None))


@_drill_errors
def run_up(args: argparse.Namespace) -> int:
    from oncall_drill.options import from_args
    from oncall_drill.stack import UpOptions, up

    started = time.monotonic()
    options = from_args(UpOptions, args, directory=args.dir, rules=tuple(args.rules))
    if args.contexts:
        return _up_contexts(options, args.contexts, started)
    state = up(options)
    directory = Path(state.directory)
    print(f"drill up in {time.monotonic() - started:.1f}s: {directory}")
    for name, url in state.urls.items():
        print(f"  {name:<11} {url}")
    if state.scenario:
        print(f"  scenario    {state.scenario}")
    print(
        "\nuse it:\n"
        f"  oncall --config {directory / 'oncall.yaml'} config show\n"
        f"  kubeconfig for the kubernetes Python client: {directory / 'kubeconfig'}\n"
        f"  oncall drill watch --dir {args.dir}      # golden signals vs thresholds\n"
        f"  oncall drill inject SCENARIO --dir {args.dir} ; oncall drill clear --dir {args.dir}\n"
        f"  oncall drill down --dir {args.dir}"
    )
    return 0


def _up_contexts(options: Any, count: int, started: float) -> int:
    from oncall_drill.contexts import up_contexts

    stacks = up_contexts(options, count)
    directory = Path(options.directory).resolve()
    print(f"drill up with {len(stacks)} contexts in {time.monotonic() - started:.1f}s: {directory}")
    for name, state in stacks:
        print(f"  {name:<4} prometheus {state.urls['prometheus']}  kubernetes "
              f"{state.urls['kubernetes']}" + (f"  scenario {state.scenario}" if state.scenario
                                               else ""))  # fmt: skip
    print(
        "\nuse it:\n"
        f"  oncall --config {directory / 'oncall.yaml'}            # every context on one board\n"
        f"  oncall --config {directory / 'oncall.yaml'} --context {stacks[0][0]} alerts\n"
        f"  oncall drill inject SCENARIO --dir {options.directory} --context {stacks[0][0]}\n"
        f"  oncall drill down --dir {options.directory}"
    )
    return 0


@_drill_errors
def run_down(args: argparse.Namespace) -> int:
    from oncall_drill.contexts import context_names, down_contexts
    from oncall_drill.stack import down

    names = context_names(args.dir)
    report = down(args.dir) if names is None else down_contexts(args.dir, names)
    problems = [r for r in report if not (r["stopped"] and r["port_free"])]
    for row in report:
        mark = "stopped" if row["stopped"] else "STILL RUNNING"
        port = (
            ""
            if not row["port"]
            else f" port {row['port']} {'free' if row['port_free'] else 'BUSY'}"
        )
        print(f"{row['name']:<15} pid {row['pid']:<7} {mark}{port}")
    return EXIT_FOUND if problems else 0


@_drill_errors
def run_notifications(args: argparse.Namespace) -> int:
    from oncall.redaction import json_terminal_safe, terminal_safe
    from oncall_drill.always_on import NOTIFICATIONS
    from oncall_drill.notify_sink import read_messages

    messages = read_messages(_stack_dir(args).resolve() / NOTIFICATIONS)
    if args.output == "json":
        print(json_terminal_safe(json.dumps(messages, indent=2, ensure_ascii=False)))
        return 0
    for message in messages:
        at = time.strftime("%H:%M:%S", time.localtime(float(str(message.get("at", 0)))))
        body = message.get("body")
        text = body.get("text", "") if isinstance(body, dict) else str(body)
        print(terminal_safe(f"{at} → {message.get('name')}"))
        for line in str(text).splitlines():
            print(terminal_safe(f"    {line}"))
    if not messages:
        print("no notifications yet", file=sys.stderr)
    return 0


@_drill_errors
def run_status(args: argparse.Namespace) -> int:
    from oncall_drill.stack import status

    info = status(_stack_dir(args))
    # "unknown" is a target found but not scraped yet (a new pod after a rollout): not down.
    healthy = all(p["alive"] for p in info["processes"]) and not any(
        t["health"] == "down" for t in info["targets"]
    )
    if args.output == "json":
        print(json.dumps(info, indent=2))
        return 0 if healthy else EXIT_FOUND
    print(f"drill in {info['directory']}  scenario: {info['scenario'] or 'none'}")
    for proc in info["processes"]:
        state = "up" if proc["alive"] else "DEAD"
        print(f"  {proc['name']:<15} pid {proc['pid']:<7} port {proc['port']:<6} {state}")
    print("prometheus targets:")
    for target in info["targets"]:
        error = f"  {target['error']}" if target["error"] else ""
        print(f"  {target['job']:<19} {target['instance']:<21} {target['health']}{error}")
    return 0 if healthy else EXIT_FOUND


@_drill_errors
def run_inject(args: argparse.Namespace) -> int:
    from oncall_drill.stack import inject

    scenario = inject(_stack_dir(args), args.scenario)
    print(f"injected {scenario.name}: should trip {scenario.alert or 'no alert'}")
    return 0


@_drill_errors
def run_clear(args: argparse.Namespace) -> int:
    from oncall_drill.stack import clear

    clear(_stack_dir(args))
    print("cleared: simulators reset, OOM-killed pods rebuilt, base load")
    return 0


@_drill_errors
def run_scenarios(args: argparse.Namespace) -> int:
    from oncall_drill.scenario_catalog import all_scenarios

    scenarios = all_scenarios()
    if args.output == "json":
        print(json.dumps([s.model_dump(by_alias=True) for s in scenarios.values()], indent=2))
        return 0
    for scenario in scenarios.values():
        print(f"{scenario.name:<24} {scenario.alert or '-':<26} {scenario.description}")
    return 0


def _fmt(value: float) -> str:
    if math.isnan(value):
        return "n/a"
    return f"{value:.3g}"


@_drill_errors
def run_watch(args: argparse.Namespace) -> int:
    import asyncio

    from oncall_drill.scenario_catalog import all_scenarios
    from oncall_drill.stack import load_state

    state = load_state(args.dir)
    signals = [(s.name, s.alert, s.signal) for s in all_scenarios().values() if s.signal]
    return asyncio.run(_watch(state.urls["prometheus"], signals, args.interval, args.count))


async def _watch(url: str, signals: list[Any], interval: float, count: int) -> int:
    import asyncio

    from oncall.backends.from_settings import prometheus_client
    from oncall.errors import BackendError
    from oncall.settings.model import PrometheusSettings

    refreshes = 0
    async with prometheus_client(PrometheusSettings(url=url, timeout=2.0)) as prom:
        while count == 0 or refreshes < count:
            lines = [time.strftime("%H:%M:%S") + "  golden signals (scenario: alert)"]
            for name, alert, signal in signals:
                try:
                    samples = await prom.query(signal.query)
                    value = samples[0].value if samples else math.nan
                    text = _fmt(value)
                except BackendError as exc:
                    value, text = math.nan, f"unknown ({exc.reason})"
                crossed = not math.isnan(value) and (
                    value > signal.threshold if signal.op == ">" else value < signal.threshold
                )
                flag = "CROSSED" if crossed else "ok"
                label = f"{name}: {alert}"
                threshold = f"{signal.op} {signal.threshold:<6g}"
                lines.append(f"  {label:<48} {text:>10} {threshold} {flag}")
            print("\n".join(lines), flush=True)
            refreshes += 1
            if count == 0 or refreshes < count:
                await asyncio.sleep(interval)
    return 0
