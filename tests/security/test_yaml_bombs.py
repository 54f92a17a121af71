"""Threat: a malicious or broken input file (issue 12, items 5, 11 and 13). A 520-byte alias
bomb, deep nesting, a 10 MB file, control characters, huge integers and unknown tags in a
settings file, a runbook or a rule file: each is one located problem (FILE:LINE:COL), found
before anything large is built, never a MemoryError or a traceback. The size limit is a
setting (`limits.max_file_bytes`)."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from oncall.alerts.loader import load_rule_files
from oncall.checklist.loader import load_runbook
from oncall.errors import ConfigError, Problem
from oncall.settings import load_settings
from oncall.settings.yaml_marks import YamlLimits, current_limits, set_limits
from tests.security.hostile_cli import run_inprocess


def billion_laughs() -> str:
    """Nine levels of nine aliases each: 9**9 (387 million) strings once expanded."""
    lines = ['a: &a ["lol_lol_lol","lol_lol_lol","lol_lol_lol","lol_lol_lol","lol_lol_lol",'
             '"lol_lol_lol","lol_lol_lol","lol_lol_lol","lol_lol_lol"]']  # fmt: skip
    for prev, name in zip("abcdefgh", "bcdefghi", strict=True):
        lines.append(f"{name}: &{name} [" + ", ".join([f"*{prev}"] * 9) + "]")
    return "\n".join(lines) + "\n"


HOSTILE: dict[str, tuple[str, str]] = {
    # name: (text, what the message says)
    "alias bomb": (billion_laughs(), "aliases expand this document past"),
    "deep flow nesting": ("x: " + "[" * 10_000 + "]" * 10_000 + "\n", "nested deeper than"),
    "deep block nesting": (
        "".join("  " * i + f"k{i}:\n" for i in range(300)) + "  " * 300 + "v\n",
        "nested deeper than",
    ),
    "recursive alias": ("a: &x {b: *x}\n", "alias refers to an enclosing node"),
    "control character": ('name: "a\x07b"\n', "U+0007 is not allowed"),
    "NUL": ("name: a\x00b\n", "U+0000 is not allowed"),
    "huge integer": ("n: " + "9" * 5000 + "\n", "more digits than Python reads"),
    "python tag": (
        "x: !!python/object/apply:os.system [id]\n",
        "could not determine a constructor",
    ),
    "bad int tag": ("x: !!int twelve\n", "cannot read this value"),
    "bad float tag": ("x: !!float [1]\n", "expected a scalar node"),
    "bad timestamp tag": ("x: !!timestamp 2026-99-99\n", "cannot read this value"),
    "not UTF-8": ("x: caf\udce9\n", "not UTF-8"),
}
LOCATED = re.compile(r":\d+:\d+:")


def _write(path: Path, text: str) -> Path:
    path.write_bytes(text.encode("utf-8", "surrogateescape"))
    return path


def _one_located(problems: list[Problem], file: str, message: str) -> None:
    assert len(problems) >= 1, problems
    first = problems[0]
    assert first.file == file and first.line is not None and first.col is not None, first
    assert message in first.message, first


@pytest.fixture(autouse=True)
def _default_limits() -> Iterator[None]:
    saved = current_limits()
    set_limits(YamlLimits())
    yield
    set_limits(saved)


def test_the_bomb_is_the_size_the_issue_says() -> None:
    assert len(billion_laughs().encode()) <= 520


@pytest.mark.parametrize("case", list(HOSTILE))
def test_settings_file(tmp_path: Path, case: str) -> None:
    text, message = HOSTILE[case]
    path = _write(tmp_path / "oncall.yaml", text)
    with pytest.raises(ConfigError) as caught:
        load_settings(config=path, environ={})
    _one_located(caught.value.problems, str(path), message)


@pytest.mark.parametrize("case", list(HOSTILE))
def test_runbook(tmp_path: Path, case: str) -> None:
    text, message = HOSTILE[case]
    result = load_runbook(_write(tmp_path / "bomb.yaml", text))
    assert result.runbook is None
    _one_located(result.problems, str(tmp_path / "bomb.yaml"), message)


@pytest.mark.parametrize("case", list(HOSTILE))
def test_rule_file(tmp_path: Path, case: str) -> None:
    text, message = HOSTILE[case]
    rules = load_rule_files([_write(tmp_path / "rules.yaml", text)])
    assert not rules.rules
    _one_located(rules.problems, str(tmp_path / "rules.yaml"), message)


@pytest.mark.parametrize(
    ("where", "load"),
    [
        ("settings", lambda p: load_settings(config=p, environ={})),
        ("runbook", load_runbook),
        ("rules", lambda p: load_rule_files([p])),
    ],
)
def test_a_10_mb_file_is_refused_before_it_is_parsed(
    tmp_path: Path, where: str, load: Callable[[Path], object]
) -> None:
    path = tmp_path / f"{where}.yaml"
    # Valid YAML all the way through: only the size limit can stop it early.
    path.write_text("items:\n" + "  - {name: x, value: 1}\n" * 450_000)
    assert path.stat().st_size > 10_000_000
    try:
        result = load(path)
    except ConfigError as exc:
        problems = exc.problems
    else:
        problems = getattr(result, "problems")  # noqa: B009 - LoadResult and RuleSet alike
    _one_located(problems, str(path), "file larger than 8,388,608 bytes (limits.max_file_bytes)")


def test_the_size_limit_is_a_setting_and_bounds_runbooks_and_rules(tmp_path: Path) -> None:
    padding = "# padding\n" * 500  # 5 KB: under the default limit, over the one set here
    (tmp_path / "runbooks").mkdir()
    (tmp_path / "runbooks" / "Big.yaml").write_text(padding + "alert: Big\n")
    (tmp_path / "rules").mkdir()
    (tmp_path / "rules" / "big.yaml").write_text(padding + "groups: []\n")
    limit = ("--set", "limits.max_file_bytes=2048")
    check = run_inprocess(*limit, "--set", f"runbooks.dirs={tmp_path / 'runbooks'}", "check", "Big")
    rules = ("--set", f"alerts.dirs={tmp_path / 'rules'}", "--set", "alerts.packs=big")
    alerts = run_inprocess(*limit, *rules, "alerts")
    for ran, name in ((check, "runbooks/Big.yaml"), (alerts, "rules/big.yaml")):
        assert ran.code == 2, ran.output
        assert re.search(
            re.escape(name) + r":1:1: file larger than 2,048 bytes \(limits.max_file_bytes\)",
            ran.stderr,
        ), ran.stderr


def test_the_limits_settings_are_validated(tmp_path: Path) -> None:
    path = _write(tmp_path / "oncall.yaml", "limits:\n  max_yaml_depth: 100000\n")
    with pytest.raises(ConfigError) as caught:
        load_settings(config=path, environ={})
    assert [(p.line, p.key) for p in caught.value.problems] == [(2, "limits.max_yaml_depth")]


def test_ordinary_anchors_and_merge_keys_still_load(tmp_path: Path) -> None:
    text = "redis: &r {timeout: 3s}\nprometheus:\n  <<: *r\n  url: http://127.0.0.1:1\n"
    settings = load_settings(config=_write(tmp_path / "oncall.yaml", text), environ={}).settings
    assert settings.prometheus.timeout == settings.redis.timeout == 3.0
