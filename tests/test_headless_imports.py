"""Headless commands stay light: they load neither textual nor kubernetes
(docs/architecture.md §1)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.harness.faults import refused_port

PROBE = """
import io, json, sys, contextlib
from oncall.cli.main import main
out = io.StringIO()
with contextlib.redirect_stdout(out):
    try:
        code = main(sys.argv[1:])
    except SystemExit as exc:
        code = exc.code
heavy = sorted({m.split('.')[0] for m in sys.modules} & {'textual', 'kubernetes', 'rich'})
models = sorted(set(sys.modules) & {'pydantic', 'oncall.model.action_params'})
probes = sorted(m for m in sys.modules if m.startswith('oncall.probes.'))
probes += sorted({m.split('.')[0] for m in sys.modules} & {'prometheus_client'})
report = {"code": code, "heavy": heavy, "models": models, "probes": probes}
print(json.dumps(report))
"""


def probe(argv: list[str], cwd: Path, *, prelude: str = "") -> tuple[dict[str, Any], str]:
    """Run `oncall ARGV` in a fresh interpreter: its exit code and heavy imports, its stderr."""
    proc = subprocess.run(
        [sys.executable, "-c", prelude + PROBE, *argv],
        capture_output=True,
        text=True,
        cwd=cwd,
        check=False,
        timeout=60,
    )
    return json.loads(proc.stdout.strip().splitlines()[-1]), proc.stderr


@pytest.mark.parametrize("argv", [["--help"], ["config", "show"], ["config", "show", "-o", "json"]])
def test_headless_command_does_not_import_textual_or_kubernetes(
    argv: list[str], tmp_path: Path
) -> None:
    report, stderr = probe(argv, tmp_path)
    assert report["code"] == 0, stderr
    assert report["heavy"] == []


def test_the_parser_does_not_build_the_actions_models(tmp_path: Path) -> None:
    """Issue 13/15: the parser lists `remediate` and `audit` without importing the actions'
    pydantic models (≈ 0.1 s of CPU on every start, the app's included): `oncall --help`
    loads no pydantic at all; `oncall remediate --help`, which lists the actions, does."""
    report, stderr = probe(["--help"], tmp_path)
    assert (report["code"], report["models"]) == (0, []), stderr
    report, stderr = probe(["remediate", "--help"], tmp_path)
    assert (report["code"], report["models"]) == (0, ["oncall.model.action_params", "pydantic"])


def test_probe_would_notice_a_heavy_import(tmp_path: Path) -> None:
    """The check above can fail: importing textual first shows up in the report."""
    report, _ = probe(["--help"], tmp_path, prelude="import textual\n")
    assert report["heavy"] == ["rich", "textual"]


RUNBOOK = """\
alert: HeadlessProbe
title: A runbook whose steps ask Prometheus and Redis only
steps:
  - id: up
    title: Prometheus answers
    probe: prometheus.query
    params: {query: up}
  - id: redis
    title: Redis answers
    probe: redis.stats
"""


def _prometheus_and_redis_runbook(tmp_path: Path) -> None:
    """RUNBOOK in tmp_path/runbooks, and settings there whose Prometheus and Redis refuse."""
    (tmp_path / "runbooks").mkdir()
    (tmp_path / "runbooks" / "HeadlessProbe.yaml").write_text(RUNBOOK, encoding="utf-8")
    settings = {
        "prometheus": {"url": f"http://127.0.0.1:{refused_port()}", "timeout": "1s"},
        "redis": {"url": f"redis://127.0.0.1:{refused_port()}/0", "timeout": "1s"},
        "runbooks": {"dirs": [str(tmp_path / "runbooks")]},
    }
    (tmp_path / "oncall.yaml").write_text(json.dumps(settings), encoding="utf-8")


@pytest.mark.parametrize("argv", [["alerts"], ["alerts", "-o", "json"], ["check", "HeadlessProbe"]])
def test_alerts_and_check_do_not_import_textual(argv: list[str], tmp_path: Path) -> None:
    """`oncall alerts` and `oncall check` reach Prometheus and the backends through the service,
    never through the app: with every backend refusing they exit 3, and load no textual (nor
    kubernetes: this runbook has no Kubernetes step). rich they do load, through httpx: its
    package imports its own command line (`httpx._main`, rich and click) whenever they are
    installed, and textual's dependency on rich installs it."""
    _prometheus_and_redis_runbook(tmp_path)
    report, stderr = probe(argv, tmp_path)
    assert report["code"] == 3, stderr
    assert set(report["heavy"]) <= {"rich"}


def test_check_imports_only_the_probe_families_its_runbook_uses(tmp_path: Path) -> None:
    """Issue 15 (a fresh `oncall check`): a runbook of Prometheus and Redis steps loads those
    two probe modules and not the vLLM (prometheus_client's parser), Kubernetes or GPU ones;
    `oncall runbook schema`, which lists every probe, loads them all (so the check can fail)."""
    _prometheus_and_redis_runbook(tmp_path)
    report, stderr = probe(["check", "HeadlessProbe", "-o", "json"], tmp_path)
    assert report["code"] == 3, stderr
    assert [p for p in report["probes"] if p not in BASE_PROBE_MODULES] == [
        "oncall.probes.absence",  # the Prometheus probes' "no such series" reasons
        "oncall.probes.prometheus",
        "oncall.probes.redis",
    ]
    report, stderr = probe(["runbook", "schema"], tmp_path)
    assert report["code"] == 0, stderr
    assert {"oncall.probes.vllm", "oncall.probes.kube"} <= set(report["probes"])


def test_a_check_of_a_runbook_proposing_nothing_does_not_import_the_actions(
    tmp_path: Path,
) -> None:
    """Issue 15: the actions' parameters models (≈ 11 ms of a fresh check) are for a runbook
    that names an action; this one has no remediation. A runbook with one loads them (the
    names checked, its parameters validated), so the check can fail."""
    _prometheus_and_redis_runbook(tmp_path)
    report, stderr = probe(["check", "HeadlessProbe", "-o", "json"], tmp_path)
    assert (report["code"], report["models"]) == (3, ["pydantic"]), stderr
    runbook = tmp_path / "runbooks" / "HeadlessProbe.yaml"
    runbook.write_text(
        runbook.read_text(encoding="utf-8")
        + "remediations:\n  x:\n    action: acknowledge\n    title: On it\n"
        + "    params: {alert: HeadlessProbe}\n",
        encoding="utf-8",
    )
    report, stderr = probe(["check", "HeadlessProbe", "-o", "json"], tmp_path)
    assert (report["code"], report["models"]) == (3, ["oncall.model.action_params", "pydantic"])


VLLM_RATES_RUNBOOK = """\
alert: HeadlessRates
title: A runbook whose vLLM step asks Prometheus
steps:
  - id: rates
    title: vLLM rates
    probe: vllm.rates
"""


def test_a_vllm_rates_check_does_not_import_the_exposition_parser(tmp_path: Path) -> None:
    """Issue 15: `vllm.rates` asks Prometheus; only `vllm.metrics` parses a scrape, so a check
    of the former loads the vLLM probes without prometheus_client (≈ 0.1 s of CPU). The
    probe sees the package where it is loaded (`prelude`), so the check can fail."""
    (tmp_path / "runbooks").mkdir()
    (tmp_path / "runbooks" / "HeadlessRates.yaml").write_text(VLLM_RATES_RUNBOOK, "utf-8")
    settings = {
        "prometheus": {"url": f"http://127.0.0.1:{refused_port()}", "timeout": "1s"},
        "runbooks": {"dirs": [str(tmp_path / "runbooks")]},
    }
    (tmp_path / "oncall.yaml").write_text(json.dumps(settings), encoding="utf-8")
    report, stderr = probe(["check", "HeadlessRates", "-o", "json"], tmp_path)
    assert report["code"] == 3, stderr
    assert "oncall.probes.vllm" in report["probes"]
    assert "prometheus_client" not in report["probes"]
    loaded, _ = probe(["check", "HeadlessRates", "-o", "json"], tmp_path, prelude=PARSER)
    assert "prometheus_client" in loaded["probes"]


PARSER = "import prometheus_client.parser\n"


#: What every checklist imports, whichever probes its steps use.
BASE_PROBE_MODULES = {"oncall.probes.base", "oncall.probes.context", "oncall.probes.registry"}


KUBE_RUNBOOK = """\
alert: HeadlessKube
title: A runbook with a Kubernetes step
steps:
  - id: pods
    title: vLLM pods
    probe: kube.pods
    params: {selector: app=vllm}
"""


def test_a_kubernetes_step_does_not_import_the_official_client(tmp_path: Path) -> None:
    """oncall's Kubernetes client is its own (httpx): a check with a kube.pods step, the API
    refusing, exits 3 without loading the `kubernetes` package (nor textual)."""
    from oncall_drill.kube_sim import Users, write_kubeconfig

    (tmp_path / "runbooks").mkdir()
    (tmp_path / "runbooks" / "HeadlessKube.yaml").write_text(KUBE_RUNBOOK, encoding="utf-8")
    kubeconfig = write_kubeconfig(tmp_path / "kubeconfig", refused_port(), Users())
    settings = {
        "prometheus": {"url": f"http://127.0.0.1:{refused_port()}", "timeout": "1s"},
        "kubernetes": {"kubeconfig": str(kubeconfig), "timeout": "1s"},
        "runbooks": {"dirs": [str(tmp_path / "runbooks")]},
    }
    (tmp_path / "oncall.yaml").write_text(json.dumps(settings), encoding="utf-8")
    report, stderr = probe(["check", "HeadlessKube", "-o", "json"], tmp_path)
    assert report["code"] == 3, stderr
    assert "kubernetes" not in report["heavy"] and "textual" not in report["heavy"]


PLUGIN_LOADER = """
import json, os, sys
from oncall.cli.main import no_pydantic_plugins
no_pydantic_plugins()
from oncall.settings.loader import load_settings
load_settings(config=None)
print(json.dumps(sorted(set(sys.modules) & {"importlib.metadata"})))
"""


@pytest.mark.parametrize(
    ("disabled", "scanned"), [(None, []), ("some-plugin", ["importlib.metadata"])]
)
def test_plugins_disabled_for_all_skips_pydantic_plugin_loader(
    disabled: str | None, scanned: list[str], tmp_path: Path
) -> None:
    """With PYDANTIC_DISABLE_PLUGINS=__all__ (oncall's default) the settings build without
    pydantic's plugin loader and its `importlib.metadata`; a user naming plugins to skip gets
    pydantic's own loader (which scans the entry points), so the check can fail."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ONCALL_", "PYDANTIC_"))}
    if disabled is not None:
        env["PYDANTIC_DISABLE_PLUGINS"] = disabled
    proc = subprocess.run(
        [sys.executable, "-c", PLUGIN_LOADER],
        capture_output=True, text=True, cwd=tmp_path, env=env, check=False, timeout=60,
    )  # fmt: skip
    assert json.loads(proc.stdout.strip().splitlines()[-1]) == scanned, proc.stderr


#: What the board's first frame does not show, so `import oncall.tui.app` must not load it: the
#: write path's types, the checklist events, the `:` prompt with the palette's provider, the
#: help, incident, confirm and audit screens and the remediation door. Each is imported when
#: first used, or by the app's warm-up thread after the first alert states (issue 13.5).
LATER_THAN_THE_FIRST_FRAME = (
    "oncall.model.alertmanager",
    "oncall.model.write_path",
    "oncall.model.checklist_events",
    "oncall.tui.commands",
    "oncall.tui.help",
    "oncall.tui.incident",
    "oncall.tui.confirm",
    "oncall.tui.audit_screen",
    "oncall.service.remediation",
)

APP_MODULE = """
import json, sys
import oncall.tui.app
print(json.dumps(sorted(set(sys.modules) & set(sys.argv[1:]))))
"""


@pytest.mark.parametrize(
    ("prelude", "loaded"), [("", []), ("import oncall.tui.help\n", ["oncall.tui.help"])]
)
def test_the_app_module_loads_nothing_the_first_frame_does_not_show(
    prelude: str, loaded: list[str]
) -> None:
    """The second case loads one of them first, so the check can fail."""
    argv = [sys.executable, "-c", prelude + APP_MODULE, *LATER_THAN_THE_FIRST_FRAME]
    proc = subprocess.run(argv, capture_output=True, text=True, check=False, timeout=60)
    assert json.loads(proc.stdout.strip().splitlines()[-1]) == loaded, proc.stderr


AT_EXIT = """
import atexit, contextlib, gc, io, sys
from oncall.cli.main import main
with contextlib.redirect_stdout(io.StringIO()):
    code = main(sys.argv[1:])
frozen = gc.get_freeze_count()  # as the caller had it when the command returned: none
atexit._run_exitfuncs()  # what the interpreter's exit runs before it finalizes
print(code, frozen, gc.get_freeze_count() > 0)
"""


@pytest.mark.parametrize(
    ("argv", "code"),
    [(["check", "HeadlessProbe"], "3"), (["alerts"], "3"), (["config", "show"], "0")],
)
def test_a_headless_command_has_everything_frozen_before_the_interpreter_finalizes(
    argv: list[str], code: str, tmp_path: Path
) -> None:
    """Issue 15: the interpreter's exit collects every object that is not frozen, 0.12-0.16 s
    of a fresh check (40-120 ms of `config show` and `alerts`) spent freeing what the exit
    frees anyway; a command leaves the collector as the caller had it when it returns, and
    has everything frozen at the exit instead."""
    _prometheus_and_redis_runbook(tmp_path)
    proc = subprocess.run(
        [sys.executable, "-c", AT_EXIT, *argv],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        check=False,
        timeout=60,
    )
    assert proc.stdout.split() == [code, "0", "True"], proc.stderr
