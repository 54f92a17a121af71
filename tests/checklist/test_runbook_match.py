"""Runbooks matched to alerts by label matchers: the most specific wins, the lint sees overlaps."""

from __future__ import annotations

from pathlib import Path

from oncall.checklist.loader import load_runbook
from oncall.service.checklists import find_runbook
from oncall.settings import Settings
from tests.cli_runner import run_oncall

BODY = """\
title: t
steps:
  - id: pods
    title: Pods are ready
    probe: kube.pods
"""


def _write(folder: Path, name: str, match: str) -> Path:
    path = folder / f"{name}.yaml"
    path.write_text(f"match: '{match}'\n" + BODY)
    return path


def test_the_most_specific_match_wins_and_a_named_runbook_comes_first(tmp_path: Path) -> None:
    generic = _write(tmp_path, "a-generic", '{alertname=~"KubePod.*"}')
    ours = _write(tmp_path, "b-ours", '{alertname=~"KubePod.*", namespace="ai"}')
    exact = _write(tmp_path, "c-exact", '{alertname="KubePodNotReady", namespace="ai"}')
    settings = Settings.model_validate({"runbooks": {"dirs": [str(tmp_path)]}})
    labels = {"namespace": "ai", "pod": "vllm-0"}
    assert find_runbook(settings, "KubePodNotReady", labels) == exact  # = before =~
    assert find_runbook(settings, "KubePodCrashLooping", labels) == ours  # more matchers
    assert find_runbook(settings, "KubePodPending", {"namespace": "db"}) == generic
    # The shipped `{alertname="KubePodCrashLooping"}` is more specific than `=~"KubePod.*"`.
    shipped = find_runbook(settings, "KubePodCrashLooping", {"namespace": "db"})
    assert shipped.name == "kube-pod-crash-looping.yaml"
    named = tmp_path / "KubePodCrashLooping.yaml"
    named.write_text("alert: KubePodCrashLooping\n" + BODY)
    assert find_runbook(settings, "KubePodCrashLooping", labels) == named


def test_the_shipped_generic_runbook_is_found_for_a_kube_prometheus_alert() -> None:
    path = find_runbook(Settings(), "KubeContainerWaiting", {"namespace": "ai", "pod": "x"})
    assert path.name == "kube-container-waiting.yaml"
    assert load_runbook(path).problems == []


def test_a_bad_or_missing_match_is_located(tmp_path: Path) -> None:
    bad = _write(tmp_path, "bad", "{severity=page}")
    (problem,) = load_runbook(bad).problems
    assert (problem.line, problem.key) == (1, "match") and "match:" in problem.message
    neither = tmp_path / "neither.yaml"
    neither.write_text(BODY)
    (problem,) = load_runbook(neither).problems
    assert "needs 'alert'" in problem.message


def test_lint_reports_overlapping_matches(tmp_path: Path) -> None:
    _write(tmp_path, "one", '{alertname=~"Kube.*", namespace="ai"}')
    _write(tmp_path, "two", '{alertname="KubePodNotReady", team=~"inf.*"}')
    _write(tmp_path, "three", '{alertname="KubePodNotReady", namespace="db"}')  # more specific
    _write(tmp_path, "four", '{alertname="KubePodNotReady", namespace="ai"}')  # excludes three
    result = run_oncall("runbook", "lint", str(tmp_path), cwd=tmp_path)
    assert result.code == 1
    lines = [line for line in result.stdout.splitlines() if "overlaps" in line]
    assert len(lines) == 1, result.stdout  # four, one, three, two: only one and two
    assert lines[0].startswith(f"{tmp_path / 'one.yaml'}:1:8") and "two.yaml" in lines[0]
