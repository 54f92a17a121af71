"""Runbooks matched to alerts by label matchers: the most specific wins, the lint sees overlaps."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

import pytest

from oncall.checklist.loader import load_runbook
from oncall.errors import UsageError
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


@pytest.fixture
def reads(monkeypatch: pytest.MonkeyPatch) -> list[Path]:
    """Every runbook file `find_runbook` parses, resolved, in order."""
    parsed: list[Path] = []
    original = load_marked_yaml

    def counted(path: Path, *args: Any, **kwargs: Any) -> Any:
        parsed.append(path.resolve())
        return original(path, *args, **kwargs)

    monkeypatch.setattr(checklists, "load_marked_yaml", counted)
    return parsed


def test_finding_a_runbook_by_match_reads_each_file_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, reads: list[Path]
) -> None:
    """Issue 15 (a fresh `oncall check`): the search by `alert:` and the one by `match:` share
    one read of each file, and a folder named twice (relative and absolute) is searched once;
    the runbook found is the same."""
    exact = _write(tmp_path, "c-exact", '{alertname="KubePodNotReady", namespace="ai"}')
    _write(tmp_path, "a-generic", '{alertname=~"KubePod.*"}')
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


# -- the index: `find_runbook` parses a runbook file again only when it has changed --------
# The app looks up the runbook of every alert it runs a checklist for; parsing every runbook
# each time cost ~60 ms of CPU a lookup in the fleet soak. The files are written, then dated
# back: one modified within `RACY_NS` is parsed at every lookup (its stat could not tell a
# second write in the same timestamp tick).

LABELS = {"namespace": "ai", "pod": "vllm-0"}


def _dated(path: Path, seconds_ago: float) -> Path:
    then = time.time_ns() - int(seconds_ago * 1e9)
    os.utime(path, ns=(then, then))
    return path


@pytest.fixture
def folder(tmp_path: Path) -> tuple[Settings, Path, Path]:
    """Settings whose runbooks folder holds a generic and a specific `match:` runbook."""
    generic = _dated(_write(tmp_path, "a-generic", '{alertname=~"Gpu.*"}'), 60)
    specific = _dated(_write(tmp_path, "b-ai", '{alertname=~"Gpu.*", namespace="ai"}'), 60)
    settings = Settings.model_validate({"runbooks": {"dirs": [str(tmp_path)]}})
    return settings, generic, specific


def test_an_unchanged_set_is_parsed_once(
    folder: tuple[Settings, Path, Path], reads: list[Path]
) -> None:
    settings, _, specific = folder
    assert find_runbook(settings, "GpuXidErrors", LABELS) == specific
    assert specific.resolve() in reads
    reads.clear()
    assert find_runbook(settings, "GpuXidErrors", LABELS) == specific
    assert find_runbook(settings, "GpuHot", {"namespace": "db"}) == folder[1]
    assert reads == []  # the shipped runbooks neither


def test_an_edited_added_or_removed_file_is_seen_at_the_next_lookup(
    folder: tuple[Settings, Path, Path], reads: list[Path]
) -> None:
    settings, generic, specific = folder
    assert find_runbook(settings, "GpuXidErrors", LABELS) == specific
    reads.clear()
    _dated(_write(specific.parent, "b-ai", '{alertname=~"Gpu.*", namespace="inference"}'), 30)
    assert find_runbook(settings, "GpuXidErrors", LABELS) == generic
    assert reads == [specific.resolve()]  # only the edited file
    added = _dated(_write(specific.parent, "c-xid", '{alertname="GpuXidErrors"}'), 30)
    assert find_runbook(settings, "GpuXidErrors", LABELS) == added
    added.unlink()
    generic.unlink()
    assert find_runbook(settings, "GpuXidErrors", {"namespace": "inference"}) == specific
    with pytest.raises(UsageError, match="no runbook for alert 'GpuXidErrors'"):
        find_runbook(settings, "GpuXidErrors", LABELS)


def test_a_file_rewritten_with_the_same_size_is_parsed_again(
    folder: tuple[Settings, Path, Path], reads: list[Path]
) -> None:
    settings, generic, specific = folder
    assert find_runbook(settings, "GpuXidErrors", LABELS) == specific
    before = specific.stat()
    _write(specific.parent, "b-ai", '{alertname=~"Gpu.*", namespace="db"}')
    os.utime(specific, ns=(before.st_atime_ns, before.st_mtime_ns + 1_000_000))  # 1 ms later
    assert specific.stat().st_size == before.st_size
    reads.clear()
    assert find_runbook(settings, "GpuXidErrors", LABELS) == generic
    assert reads == [specific.resolve()]


def test_a_file_just_written_is_parsed_at_every_lookup(
    folder: tuple[Settings, Path, Path], reads: list[Path]
) -> None:
    """Its stat cannot yet tell a second write of the same size in the same tick."""
    settings, _, specific = folder
    assert find_runbook(settings, "GpuXidErrors", LABELS) == specific
    fresh = _write(specific.parent, "c-xid", '{alertname="GpuXidErrors", namespace="ai"}')
    for _ in range(2):
        reads.clear()
        assert find_runbook(settings, "GpuXidErrors", LABELS) == fresh
        assert reads == [fresh.resolve()]
