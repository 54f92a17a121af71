"""`oncall rules check [--prometheus URL] [FILES]`: can every alerting rule fire here? For CI.

Reads FILES (rule files or folders; default: the configured packs and `alerts.files`) as
strictly as Prometheus does (every problem at FILE:LINE:COL), adds every alerting rule the
Prometheus evaluates (`/api/v1/rules`: located by its group and file), and judges each
rule's liveness against that Prometheus (`oncall.alerts.liveness`): a metric that does not
exist, a label matcher that empties it (naming the values it does have), a rate window under
two scrape intervals. Prints one line per finding:

    alerts/vllm.yaml:12:9: VllmPreemptions (page): silent: no series named vllm:num_preemptions
    group "kubernetes-apps" (file /etc/prometheus/rules/k.yaml): KubePodCrashLooping …

Exit codes: 1 when a file has a problem or a paging rule (severity page or critical) cannot
fire; 3 when Prometheus could not be asked (nothing is known then); 0 otherwise, silent
non-paging rules included (printed as warnings).
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from pathlib import Path
from typing import Any

from oncall.errors import EXIT_FOUND, EXIT_INCOMPLETE, EXIT_USAGE, BackendError
from oncall.model.alerts import AlertRule, Liveness
from oncall.redaction import redact

#: The severities that page someone: a rule of these that cannot fire fails the check.
PAGING = frozenset({"page", "critical"})


def register(commands: Any, global_options: Any) -> None:
    parser = commands.add_parser("rules", help="check alerting rules (for CI)")
    sub = parser.add_subparsers(dest="rules_command", metavar="SUBCOMMAND")
    check = sub.add_parser(
        "check",
        help="every rule file problem, and every rule that cannot fire here (exit 1 on a "
        "paging one)",
    )
    check.add_argument(
        "files", nargs="*", type=Path, metavar="FILES",
        help="rule files or folders (default: the configured packs and files)",
    )  # fmt: skip
    check.add_argument(
        "--prometheus", metavar="URL", help="the Prometheus to ask (default: prometheus.url)"
    )
    global_options(check, suppress=True)
    check.set_defaults(handler=_run_check)

    def usage(_args: argparse.Namespace) -> int:
        parser.print_usage(sys.stderr)
        return EXIT_USAGE

    parser.set_defaults(handler=usage)


def _where(rule: AlertRule, own: bool) -> str:
    if own:
        return f'group "{rule.group}" (file {rule.file})'
    return f"{rule.file}:{rule.line}:{rule.col or 1}"


def _run_check(args: argparse.Namespace) -> int:
    return asyncio.run(_check(args))


async def _check(args: argparse.Namespace) -> int:
    from oncall.alerts.liveness_fetch import fetch_facts, verdicts
    from oncall.alerts.loader import load_rule_files
    from oncall.alerts.remote_rules import as_rule, deployed_by_key, merged
    from oncall.backends import from_settings
    from oncall.cli.config_cmd import load_from_args
    from oncall.service.alerts import find_packs, named_files

    if args.prometheus:
        args.overrides = [*getattr(args, "overrides", []), f"prometheus.url={args.prometheus}"]
    settings = load_from_args(args).settings
    paths = list(args.files) or [*find_packs(settings), *named_files(settings)]
    loaded = await asyncio.to_thread(load_rule_files, paths)
    for problem in loaded.problems:
        print(problem)
    rules: list[tuple[AlertRule, bool]] = [(rule, False) for rule in loaded.rules]
    prom = from_settings.prometheus_client(settings.prometheus)
    try:
        try:
            groups = await prom.rules(kind="alert")
        except BackendError as exc:
            print(f"oncall rules check: prometheus: {exc}")
            return EXIT_INCOMPLETE
        mine = {(r.group, r.name) for r, _ in rules}
        for key, raws in deployed_by_key(groups).items():
            if key not in mine:
                rules.append((as_rule(key, merged(raws)), True))
        facts = await fetch_facts(prom, [r.expr for r, _ in rules])
    finally:
        await prom.aclose()
    if facts.error is not None:
        print(f"oncall rules check: {facts.error}")
        return EXIT_INCOMPLETE
    judged = await asyncio.to_thread(verdicts, [r.expr for r, _ in rules], facts)
    failing = silent = unknown = 0
    for rule, own in rules:
        verdict: Liveness = judged[rule.expr]
        if verdict.state == "live":
            continue
        paging = rule.severity in PAGING
        severity = f" ({rule.severity})" if rule.severity else ""
        level = "" if paging or verdict.state != "silent" else "warning: "
        for reason in verdict.reasons or ("",):
            print(f"{_where(rule, own)}: {level}{rule.name}{severity}: {verdict.state}: {reason}")
        silent += verdict.state == "silent"
        unknown += verdict.state == "unknown"
        failing += verdict.state == "silent" and paging
    print(
        f"{len(rules)} alerting rules checked against {redact(settings.prometheus.url)}: "
        f"{silent} cannot fire ({failing} paging), {unknown} not known, "
        f"{len(loaded.problems)} file problems"
    )
    return EXIT_FOUND if failing or loaded.problems else 0
