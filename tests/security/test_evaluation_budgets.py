"""Issue 29 item 4, acceptance 3: runbook evaluation with budgets.

- A catastrophic regex (`(a+)+$`) as a `kube.logs` pattern, over log lines a container printed
  (the drill's Kubernetes API, oncall's client): matched by RE2 in linear time, the step decided
  within its timeout. With Python's `re` it backtracked for hours holding the event loop, so
  neither the step's timeout nor anything else could stop it.
- A 1 KB CEL expression (31 nested `map`s over a ten-element list: 10^31 steps): the step ends
  `unknown` at its timeout with the reason, and no evaluation process is left behind.
- The app quits on `q` while that expression is being evaluated, and its evaluation stops.
- `oncall runbook lint` reports both, located.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest

from oncall.alerts.templates import expand
from oncall.checklist.engine import collect, run_checklist
from oncall.checklist.expressions import ExpressionError, compile_expression
from oncall.checklist.loader import load_runbook
from oncall.model.alerts import RuleStatus
from oncall.model.checklist_events import ChecklistEvent, StepResult, StepStarted
from oncall.model.linear_regex import compile_linear
from oncall.model.matchers import MatcherError, parse_selection
from oncall.service.checklists import load_checked, stream_checklist
from oncall.settings.model import KubernetesSettings, Settings
from oncall.tui.app import OncallApp
from oncall_drill.kube_sim import KubeSim, SimulatorThread, write_kubeconfig
from tests.cli_runner import run_oncall
from tests.drill.kube.conftest import PrintingHook
from tests.harness.waiting import until, wait_until
from tests.tui.fakes import FakeAlerts, make_app, status

NS = "ai"
REDOS = "(a+)+$"
#: What Python's `re` cannot finish with `(a+)+$`: a long run of "a" that does not end the line.
LOG = (b"a" * 590 + b"!\n") * 20


def costly_cel() -> str:
    """About 1 KB of CEL: 31 nested maps over a ten-element list."""
    digits = "[" + ",".join(str(i) for i in range(10)) + "]"
    body = "1"
    for depth in range(1, 32):
        body = f"{digits}.map(x{depth}, {body})"
    return f"size({body}) > 0"


def runbook(folder: Path, *, pod: str = "vllm-0", timeout: str = "3s") -> Path:
    path = folder / "Budgets.yaml"
    path.write_text(
        "alert: Budgets\n"
        "title: evaluation with budgets\n"
        "vars: {redos: '" + REDOS + "'}\n"
        "steps:\n"
        "  - id: logs\n"
        "    title: no log line matches\n"
        "    probe: kube.logs\n"
        f"    params: {{pod: {pod}, container: vllm, previous: false,"
        " pattern: '{{ vars.redos }}'}\n"
        "    expect: facts.found && facts.match_count == 0\n"
        f"    timeout: {timeout}\n"
        "  - id: cel\n"
        "    title: the costly expression\n"
        "    probe: kube.logs\n"
        f"    params: {{pod: {pod}, container: vllm, previous: false}}\n"
        f'    expect: "{costly_cel()}"\n'
        f"    timeout: {timeout}\n"
    )
    return path


def evaluators() -> list[int]:
    """This process's children that are evaluating an expression apart."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            cmdline = (entry / "cmdline").read_bytes()
        except (OSError, IndexError, ValueError):
            continue  # gone meanwhile
        if ppid == os.getpid() and b"oncall.checklist.isolated" in cmdline:
            found.append(int(entry.name))
    return found


def test_the_expression_is_about_a_kilobyte() -> None:
    assert 950 <= len(costly_cel()) <= 1024


async def test_a_costly_expression_is_unknown_at_its_steps_timeout(tmp_path: Path) -> None:
    loaded = load_runbook(runbook(tmp_path, timeout="2s")).runbook
    assert loaded is not None

    async def facts(_step: Any, _params: Any) -> dict[str, Any]:
        return {"found": True, "match_count": 0}

    results = {r.id: r for r in await collect(loaded, {"name": "Budgets"}, facts)}
    cel = results["cel"]
    assert cel.status == "unknown", cel
    assert cel.reason is not None
    assert cel.reason.startswith("expect: no result within"), cel.reason
    assert "nested 31 deep" in cel.reason and "stopped at the step's timeout" in cel.reason
    assert results["logs"].status == "ok"  # the other step is decided as usual
    assert evaluators() == []  # the evaluation was killed, not left running


async def test_a_costly_template_is_refused_in_process_and_the_step_unknown(
    tmp_path: Path,
) -> None:
    """Templates (`{{ … }}` in params, summaries) are evaluated in-process: past the budget
    they are refused at once, never run."""
    path = tmp_path / "Template.yaml"
    template = costly_cel().removesuffix(" > 0")
    path.write_text(
        "alert: Template\ntitle: t\nsteps:\n"
        "  - id: t\n    title: t\n    probe: kube.logs\n"
        f'    params: {{pod: "{{{{ string({template}) }}}}"}}\n'
        "    expect: facts.found\n    timeout: 60s\n"
    )
    loaded = load_runbook(path)
    assert loaded.runbook is not None, loaded.problems

    async def never(_step: Any, _params: Any) -> dict[str, Any]:
        raise AssertionError("the probe must not run")

    (result,) = await collect(loaded.runbook, {"name": "Template"}, never)
    assert result.status == "unknown", result
    assert result.reason is not None and result.reason.startswith("params: too costly")


def test_a_rule_templates_regex_over_a_label_value_is_linear() -> None:
    """The same for the alert templates oncall expands itself (a cluster's PrometheusRule is
    anyone's text; the label values come from Prometheus): `match` and `reReplaceAll` run RE2,
    as Go's regexp in Prometheus. With Python's `re` this did not return."""
    labels = {"pod": "a" * 40 + "!"}
    source = '{{ if match "(a+)+$" $labels.pod }}yes{{ else }}no{{ end }} ' + (
        '{{ reReplaceAll "(a+)+$" "x" $labels.pod }}'
    )
    assert expand(source, labels, 1.0) == f"no {labels['pod']}"


def test_re2_takes_what_re_took_and_refuses_what_it_cannot_bound() -> None:
    """A lone surrogate (JSON can carry "\\ud800" in a label value) is matched, not an
    error; a back-reference is refused when the pattern is read, with RE2's reason."""
    selection = parse_selection('{pod=~"vllm-.*"}')
    assert selection.matches({"pod": "vllm-\ud800"})
    assert compile_linear("(a+)+$").search("a" * 40 + "\ud800") is None
    with pytest.raises(MatcherError, match=r"RE2 accepts: invalid escape sequence: \\1"):
        parse_selection('{pod=~"(a)\\\\1"}')


def test_nesting_past_the_parsers_bound_is_a_located_error() -> None:
    """The CEL parser bounds its recursion (96 levels): a deeper expression is a syntax error
    at the column where it passes the bound, said plainly (not the binding's debug text)."""
    with pytest.raises(ExpressionError, match=r"^syntax error: nested deeper than 96 levels$"):
        compile_expression("(" * 200 + "1" + ")" * 200, names=[])


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[tuple[Settings, str]]:
    sim = KubeSim(hook=PrintingHook(lambda _status: LOG), start_delay=0.02, resync=0.1)
    with SimulatorThread(sim) as server:
        path = write_kubeconfig(tmp_path / "kubeconfig", server.port, sim.users)
        pods = wait_until(
            lambda: server.call(lambda: sim.ready_pods(NS)), within=10, what="2 ready pods"
        )
        k8s = KubernetesSettings(kubeconfig=path, namespace=NS, timeout=3.0)
        yield Settings(kubernetes=k8s), str(pods[0]["metadata"]["name"])


async def test_a_catastrophic_log_pattern_is_matched_in_linear_time(
    cluster: tuple[Settings, str], tmp_path: Path
) -> None:
    settings, pod = cluster
    compiled = load_checked(runbook(tmp_path, pod=pod, timeout="5s"))
    events = [e async for e in stream_checklist(settings, compiled, {"name": "Budgets"})]
    results = {e.id: e for e in events if isinstance(e, StepResult)}
    logs = results["logs"]
    assert logs.status == "ok", logs  # decided: 20 lines read, none matches
    assert logs.facts is not None
    assert (logs.facts["line_count"], logs.facts["match_count"]) == (20, 0)


class EngineChecklists:
    """The app's checklist runner over the real engine, the facts fixed."""

    def __init__(self, path: Path) -> None:
        loaded = load_runbook(path).runbook
        assert loaded is not None
        self.runbook = loaded
        self.started: list[str] = []

    async def run(self, alert: str, status: RuleStatus | None) -> AsyncIterator[ChecklistEvent]:
        async def facts(_step: Any, _params: Mapping[str, Any]) -> dict[str, Any]:
            return {"found": True, "match_count": 0}

        async for event in run_checklist(self.runbook, {"name": alert}, facts):
            if isinstance(event, StepStarted):
                self.started.append(event.id)
            yield event

    def warm_up(self) -> None:
        pass

    async def aclose(self) -> None:
        pass


async def test_q_quits_the_app_while_the_expression_is_evaluated(tmp_path: Path) -> None:
    checklists = EngineChecklists(runbook(tmp_path, timeout="60s"))
    app: OncallApp = make_app(FakeAlerts([status("Budgets", "firing", value=1.0)]), None)
    app.checklists = checklists
    async with app.run_test(size=(120, 30)) as pilot:
        await until(pilot, lambda: app.board.selected_alert() == "Budgets", "the board")
        await pilot.press("enter")
        await until(pilot, lambda: len(evaluators()) == 1, "the expression evaluated apart")
        await pilot.press("q")
        await until(pilot, lambda: not app.is_running, "the app gone")
    assert evaluators() == []
    assert "cel" in checklists.started


def test_lint_reports_the_pattern_and_the_expression(tmp_path: Path) -> None:
    path = runbook(tmp_path)
    result = run_oncall("runbook", "lint", str(path), cwd=tmp_path)
    assert result.code == 1, result.stderr
    lines = result.stdout.splitlines()
    redos = "steps.0.params.pattern: nested quantifier '(a+)+'"
    assert any(line.startswith(f"{path}:8:") and redos in line for line in lines), lines
    assert any(
        line.startswith(f"{path}:15:")
        and "steps.1.expect: too costly" in line
        and "nested 31 deep" in line
        for line in lines
    ), lines
    assert "1 runbook file: 2 problems" in result.stderr
