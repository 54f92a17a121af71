"""Runbooks matched to alerts by label matchers: the most specific wins, the lint sees overlaps."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from oncall.checklist.loader import load_runbook
from oncall.service import checklists
from oncall.service.checklists import find_runbook
from oncall.settings import Settings
from oncall.settings.yaml_marks import load_marked_yaml
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


def test_finding_a_runbook_by_match_reads_each_file_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 15 (a fresh `oncall check`): the search by `alert:` and the one by `match:` share
    one read of each file, and a folder named twice (relative and absolute) is searched once;
    the runbook found is the same."""
    exact = _write(tmp_path, "c-exact", '{alertname="KubePodNotReady", namespace="ai"}')
    _write(tmp_path, "a-generic", '{alertname=~"KubePod.*"}')
    reads: list[Path] = []
    original = load_marked_yaml

    def counted(path: Path, *args: Any, **kwargs: Any) -> Any:
        reads.append(path.resolve())
        return original(path, *args, **kwargs)

    monkeypatch.setattr(checklists, "load_marked_yaml", counted)
    monkeypatch.chdir(tmp_path.parent)
    twice = [str(tmp_path), tmp_path.name]  # one folder under two names
    settings = Settings.model_validate({"runbooks": {"dirs": twice}})
    assert find_runbook(settings, "KubePodNotReady", {"namespace": "ai"}) == exact
    assert len(reads) == len(set(reads))
    assert {exact.resolve(), (tmp_path / "a-generic.yaml").resolve()} <= set(reads)


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
