"""Two drill stacks, one board (issue 18's acceptance 1 and 2), real clients throughout.

`oncall drill up --contexts 2` starts two independent stacks, `eu` and `us`, with the same pod
names, and one settings file naming both. A fault injected in `eu` fires only there; the
all-contexts board shows it with its context; its checklist's facts are eu's (the same
checklist in us finds nothing); a rebuild confirmed from it deletes the pod in eu's cluster
and not the same-named pod in us's. Then one context's backends hang (loopback listeners that
never answer) and the other context's alerts keep refreshing, keys answered.

This module starts its own two stacks (module scope, once): the shared drill fixture is one
stack, and what is tested here is that two never mix.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from textual.widgets import Input

from oncall.model.alerts import RuleStatus
from oncall.model.checklist_events import StepResult
from oncall.settings import Settings
from oncall.settings.loader import load_settings
from oncall.tui.app import OncallApp
from oncall.tui.board import columns
from oncall.tui.confirm import ConfirmScreen
from oncall.tui.help import HelpScreen
from oncall.tui.incident import IncidentScreen
from tests.cli_runner import run_oncall
from tests.drill.stack.conftest import FOR_SCALE, JOBS, Drill, targets
from tests.drill.stack.remediation_helpers import vllm_pods
from tests.harness.faults import silent_listener
from tests.harness.pilot import static_text
from tests.harness.waiting import until, wait_until

ALERT = "GPUXidError"
#: Two stacks on two shared cores: a fault, its checklist and a verified rebuild take minutes.
pytestmark = pytest.mark.timeout(600)
CONTEXTS = ("eu", "us")


@pytest.fixture(scope="module")
def stacks(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    directory = tmp_path_factory.mktemp("contexts")
    up = ("drill", "up", "--contexts", "2", "--dir", str(directory), "--for-scale", str(FOR_SCALE))
    result = run_oncall(*up, timeout=240)
    try:
        assert result.code == 0, result.stderr
        prometheus = {name: Drill(directory / name, 0.0).prometheus for name in CONTEXTS}
        wait_until(
            lambda: all(_all_up(url) for url in prometheus.values()),
            within=60,
            what="every target of both stacks scraped and up",
            interval=0.2,
        )
        yield directory
    finally:
        run_oncall("drill", "down", "--dir", str(directory), timeout=120)


def _all_up(prometheus: str) -> bool:
    found = targets(prometheus)
    return {t["labels"]["job"] for t in found} >= JOBS and all(t["health"] == "up" for t in found)


def drill_cli(directory: Path, *args: str) -> None:
    result = run_oncall("drill", *args, "--dir", str(directory), timeout=60)
    assert result.code == 0, result.stderr


def pods_of(directory: Path, context: str) -> dict[str, str]:
    """Name → UID of the vLLM pods of one context's cluster, read with its own kubeconfig."""
    return {
        p["metadata"]["name"]: p["metadata"]["uid"]
        for p in vllm_pods(Drill(directory / context, 0.0))
    }


def settings_for_test(directory: Path, tmp_path: Path, **extra: object) -> Settings:
    data = yaml.safe_load((directory / "oncall.yaml").read_text())
    data["audit"] = {"path": str(tmp_path / "audit.jsonl")}
    data["guards"] = {"rate_limit_actions": 100}
    data.update(extra)
    config = tmp_path / "oncall.yaml"
    config.write_text(yaml.safe_dump(data))
    return load_settings(config=config, environ={}).settings


async def test_a_fault_in_eu_stays_in_eu_down_to_the_rebuilt_pod(
    stacks: Path, tmp_path: Path
) -> None:
    before = {name: await asyncio.to_thread(pods_of, stacks, name) for name in CONTEXTS}
    assert set(before["eu"]) == set(before["us"])  # the same pod names in both clusters
    assert before["eu"] != before["us"]  # and different pods
    settings = settings_for_test(stacks, tmp_path)
    app = OncallApp(settings)
    eu_key, us_key = f"eu/{ALERT}", f"us/{ALERT}"
    async with app.run_test(size=(140, 40)) as pilot:
        await asyncio.to_thread(drill_cli, stacks, "inject", "gpu-xid", "--context", "eu")
        try:
            last = [""]  # what findings() saw last, for the failure message

            def findings() -> bool:
                status, run = app.book.statuses.get(eu_key), app.book.runs.get(eu_key)
                last[0] = (
                    f"{status and status.state}, run {run and run.findings()}, "
                    f"{len(app.book.statuses)} rows, error {app.book.refresh_error}"
                )
                return bool(status and status.state == "firing" and run and not run.running
                            and run.results)  # fmt: skip

            await until(
                pilot,
                findings,
                "eu's GPUXidError firing with its findings",
                within=180,
                seen=lambda: last[0],
            )
            # Fires only there: us evaluates the same rule, and it is not firing.
            # (A refresh of us may time out on a loaded machine: its state is then unknown.)
            await until(
                pilot,
                lambda: app.book.statuses[us_key].state != "unknown",
                "us's state known",
                within=90,
            )
            assert app.book.statuses[us_key].state == "inactive"
            # The all-contexts board: a Context column, firing rows first across both.
            keys = [key for key, _ in app.board.columns]
            assert keys[:2] == ["state", "context"] and len(keys) == len(columns(app.settings)) + 1
            assert "routing" in keys  # each context's own Alertmanager (the drill has one each)
            rows = app.board.rows()
            cells = {key: dict(zip(keys, row, strict=True)) for key, row in rows}
            assert cells[eu_key]["context"][0] == "eu"
            assert cells[eu_key]["alert"][0] == ALERT
            states = [app.book.statuses[key].state for key, _ in rows]
            assert states.index("firing") == 0
            assert "firing" not in states[[s == "firing" for s in states].count(True) :]
            # Its facts are eu's: the Xid is on eu's GPU; the same checklist in us finds none.
            steps = {r.id: r for r in app.book.runs[eu_key].results.values()}
            for _ in range(3):  # an overloaded machine may time a probe out: run it again
                if steps["xid"].status != "unknown":
                    break
                app.start_checklist(eu_key)
                rerun = app.book.runs[eu_key]
                await until(pilot, lambda: not rerun.running, "eu's checklist again", within=90)  # noqa: B023
                steps = {r.id: r for r in rerun.results.values()}
            xid = steps["xid"]
            assert xid.status == "fail" and "Xid 13" in (xid.summary or ""), xid
            assert steps["restart_app"].status == "fail"
            # The same checklist, for the same labels (same node names), in us: no Xid there.
            # us' exporter has never seen an Xid, so (as a Helm-default dcgm-exporter) it has
            # no Xid series at all: the step is unknown for that reason, never eu's failure.
            same = dataclasses.replace(app.book.statuses[eu_key], context="us")
            for _ in range(3):  # again when a loaded machine timed the probe out
                events = [event async for event in app.checklists.run(us_key, same)]
                us_xid = next(e for e in events if isinstance(e, StepResult) and e.id == "xid")
                if "no answer within" not in (us_xid.reason or ""):
                    break
            assert us_xid.status == "unknown", us_xid
            assert "no DCGM_FI_DEV_XID" in (us_xid.reason or ""), us_xid
            # A rebuild confirmed from eu's alert: the modal names eu's cluster.
            app.open_incident(eu_key)
            await until(
                pilot, lambda: isinstance(app.screen, IncidentScreen), "the incident", within=90
            )
            incident = app.screen
            assert isinstance(incident, IncidentScreen)
            await until(pilot, lambda: bool(incident.proposals()), "the proposal", within=90)
            proposal = incident.proposals()[0]
            assert proposal.id == "rebuild-xid-pod"
            pod = str(proposal.params["pod"])
            assert pod in before["us"]  # the same-named pod exists in the other cluster
            await pilot.press("1")
            await until(
                pilot, lambda: isinstance(app.screen, ConfirmScreen), "the confirm modal", within=90
            )
            await until(
                pilot, lambda: bool(app.screen.query("#confirm-preview")), "the preview", within=90
            )
            preview = static_text(app, "#confirm-preview")
            eu_server = yaml.safe_load((stacks / "eu" / "kubeconfig").read_text())["clusters"][0]
            assert "context eu" in preview and "kube context oncall-drill" in preview
            assert f"API server {eu_server['cluster']['server']}" in preview
            app.screen.query_one("#confirm-word", Input).value = pod
            await pilot.pause()
            await pilot.press("enter")

            def verified() -> bool:
                return "verified" in static_text(app, "#confirm-progress")

            await until(pilot, verified, "the rebuild verified", within=120)
        finally:
            await asyncio.to_thread(drill_cli, stacks, "clear", "--context", "eu")
    after = {name: await asyncio.to_thread(pods_of, stacks, name) for name in CONTEXTS}
    assert pod not in after["eu"] or after["eu"][pod] != before["eu"][pod]  # eu's pod rebuilt
    assert after["us"] == before["us"]  # us's same-named pod untouched, and every other
    records = [yaml.safe_load(line) for line in (tmp_path / "audit.jsonl").read_text().splitlines()]
    assert {r["context"] for r in records} == {"eu"}
    assert records[-1]["transition"] == "verified"


async def test_one_context_hung_the_other_keeps_refreshing_and_keys_answer(
    stacks: Path, tmp_path: Path
) -> None:
    with silent_listener() as port:
        hung = f"http://127.0.0.1:{port}"
        data = yaml.safe_load((stacks / "oncall.yaml").read_text())
        contexts = {
            "eu": data["contexts"]["eu"],
            # Prometheus, Redis and vLLM accept and never answer; the timeout is long enough
            # that eu refreshes several times while hung's first refresh is still waiting.
            "hung": {
                "prometheus": {"url": hung, "timeout": "8s"},
                "redis": {"url": f"redis://127.0.0.1:{port}/0"},
                "vllm": {"urls": [hung]},
            },
        }
        settings = settings_for_test(
            stacks, tmp_path, contexts=contexts, alerts={**data["alerts"], "refresh": "1s"}
        )
        app = OncallApp(settings)
        eu_source = app.alerts_sources["eu"]
        refreshes = [0]
        real_refresh = eu_source.refresh

        async def counted() -> list[RuleStatus]:
            found = await real_refresh()
            refreshes[0] += 1
            return found

        eu_source.refresh = counted  # type: ignore[method-assign]
        async with app.run_test(size=(120, 30)) as pilot:
            await until(pilot, lambda: refreshes[0] >= 3, "three eu refreshes", within=30)
            hung_rows = [k for k in app.book.statuses if k.startswith("hung/")]
            assert hung_rows == []  # eu refreshed on its own loop while hung's still waits
            await pilot.press("question_mark")
            await until(pilot, lambda: isinstance(app.screen, HelpScreen), "help", within=5)
            await pilot.press("escape")
            # Then hung's timeout: its rows are unknown with the reason; eu's are unaffected.
            await until(
                pilot,
                lambda: any(k.startswith("hung/") for k in app.book.statuses),
                "hung's rows unknown",
                within=30,
            )
            hung_states = {s.state for k, s in app.book.statuses.items() if k.startswith("hung/")}
            assert hung_states == {"unknown"}
            assert all(
                "timeout" in (s.error or "")
                for k, s in app.book.statuses.items()
                if k.startswith("hung/")
            )
            eu_states = {s.state for k, s in app.book.statuses.items() if k.startswith("eu/")}
            assert "unknown" not in eu_states
            await pilot.press("q")
