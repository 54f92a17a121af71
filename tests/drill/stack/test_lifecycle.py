"""`drill up` brings every target up quickly; `drill down` leaves no process and no port."""

from __future__ import annotations

import json
import urllib.request
from pathlib import Path

import yaml

from oncall_drill.netutil import port_accepts
from oncall_drill.supervisor import pid_alive
from tests.cli_runner import Result, run_oncall
from tests.drill.stack.conftest import JOBS, Drill, start_drill
from tests.harness.waiting import wait_until


def children_of(pid: int) -> list[int]:
    """Pids whose parent is pid (the vLLM pod processes of the cluster)."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
                found.append(int(entry.name))
    return found


def test_prometheus_scrapes_every_simulator_within_5s_of_up(drill: Drill) -> None:
    assert drill.targets_up_after <= 5.0, f"targets up after {drill.targets_up_after:.1f}s"
    assert drill.jobs_up == JOBS


def test_status_reports_processes_and_targets(drill: Drill) -> None:
    # A pod replaced by an earlier test stays a `down` target until Prometheus re-reads its
    # discovery file (every second): status settles to 0 then.
    statuses: list[Result] = []

    def settled() -> bool:
        statuses.append(run_oncall("drill", "status", "--dir", str(drill.directory)))
        return statuses[-1].code == 0

    wait_until(settled, within=15, what="`drill status` to report every target healthy")
    out = statuses[-1].stdout
    for name in ("redis", "cluster", "gateway", "redis-exporter", "prometheus", "loadgen"):
        assert f"  {name} " in out
    assert "DEAD" not in out


def test_watch_shows_every_signal_against_its_threshold(drill: Drill) -> None:
    out = drill.cli("watch", "--count", "2", "--interval", "0.2")
    assert out.count("golden signals") == 2
    assert "vector-search-slow: VectorSearchP999High" in out
    assert "> 0.2" in out


def test_scenarios_and_inject_errors(drill: Drill) -> None:
    listing = run_oncall("drill", "scenarios")
    assert listing.code == 0
    assert "gpu-oom" in listing.stdout
    assert "LLMOutOfMemory" in listing.stdout
    bad = run_oncall("drill", "inject", "no-such-thing", "--dir", str(drill.directory))
    assert bad.code == 2
    assert "unknown scenario 'no-such-thing'" in bad.stderr
    assert "Traceback" not in bad.stderr


SAMPLE_RULES = Path(__file__).resolve().parents[2] / "fixtures" / "rules"


def test_down_leaves_no_process_and_no_port(tmp_path: Path) -> None:
    """Also: rules given to `up` reach Prometheus with their `for` scaled, and the app's
    settings carry the same scale."""
    directory = tmp_path / "drill"
    drill = start_drill(
        directory, "--replicas", "1", "--rules", str(SAMPLE_RULES), "--for-scale", "0.05"
    )
    url = f"{drill.prometheus}/api/v1/rules?type=alert"
    with urllib.request.urlopen(url, timeout=5) as response:  # noqa: S310 - loopback
        groups = json.load(response)["data"]["groups"]
    durations = {r["name"]: r["duration"] for g in groups for r in g["rules"]}
    assert durations == {"SampleSlowFire": 6, "SampleInstant": 0}
    settings = yaml.safe_load((directory / "oncall.yaml").read_text())
    assert settings["alerts"]["for_scale"] == 0.05
    state = drill.state
    pids = [p["pid"] for p in state["processes"]]
    cluster = next(p["pid"] for p in state["processes"] if p["name"] == "cluster")
    pods = children_of(cluster)
    assert pods, "the cluster runs its vLLM pods as child processes"
    ports = list(state["ports"].values())
    assert all(pid_alive(pid) for pid in pids + pods)

    result = run_oncall("drill", "down", "--dir", str(directory), timeout=60)

    assert result.code == 0, result.stdout + result.stderr
    assert [pid for pid in pids + pods if pid_alive(pid)] == []
    assert [port for port in ports if port_accepts(port)] == []
    assert not (directory / "state.json").exists()
    again = run_oncall("drill", "status", "--dir", str(directory))
    assert again.code == 2
    assert "no drill" in again.stderr
