"""Settings loader details: durations, duplicate keys, odd files, precedence."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st

from oncall.errors import ConfigError
from oncall.settings import FlagValue, load_settings, yaml_marks
from oncall.settings.durations import format_duration, parse_duration
from oncall.settings.yaml_marks import YamlLimits, current_limits, set_limits


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("5s", 5.0), ("1m30s", 90.0), ("250ms", 0.25), ("2h", 7200.0), ("1.5", 1.5), (3, 3.0)],
)
def test_parse_duration(text: str | int, seconds: float) -> None:
    assert parse_duration(text) == seconds


@pytest.mark.parametrize("text", ["", "5", "5x", "s", "1m 30s", "m5"][2:])
def test_parse_duration_rejects(text: str) -> None:
    with pytest.raises(ValueError, match="invalid duration"):
        parse_duration(text)


@given(st.integers(min_value=1, max_value=10**7))
def test_duration_format_round_trips(seconds: int) -> None:
    assert parse_duration(format_duration(float(seconds))) == seconds


def _problems(tmp_path: Path, text: str) -> list[str]:
    (tmp_path / "oncall.yaml").write_text(text)
    with pytest.raises(ConfigError) as caught:
        load_settings(cwd=tmp_path, environ={})
    return [str(p) for p in caught.value.problems]


def test_duplicate_keys_are_reported(tmp_path: Path) -> None:
    problems = _problems(tmp_path, "redis:\n  timeout: 1s\n  timeout: 2s\n")
    assert problems == ["oncall.yaml:3:3: redis.timeout: duplicate key"]


def test_top_level_must_be_a_mapping(tmp_path: Path) -> None:
    problems = _problems(tmp_path, "- a\n- b\n")
    assert problems == ["oncall.yaml:1:1: the top level must be a mapping of settings"]


def test_section_must_be_a_mapping(tmp_path: Path) -> None:
    problems = _problems(tmp_path, "redis: 5\n")
    assert problems == ["oncall.yaml:1:8: redis: expected a mapping of settings"]


def test_list_item_error_points_at_the_item(tmp_path: Path) -> None:
    problems = _problems(tmp_path, "vllm:\n  urls:\n    - http://a\n    - [nested]\n")
    assert problems[0].startswith("oncall.yaml:4:7: vllm.urls.1:")


def test_empty_file_means_defaults(tmp_path: Path) -> None:
    (tmp_path / "oncall.yaml").write_text("# nothing yet\n")
    loaded = load_settings(cwd=tmp_path, environ={})
    assert loaded.settings.redis.timeout == 2.0
    assert set(loaded.sources.values()) == {"default"}


def test_precedence_file_env_flag(tmp_path: Path) -> None:
    (tmp_path / "oncall.yaml").write_text(
        "redis:\n  timeout: 1s\n  url: redis://127.0.0.1:7000/1\n"
    )
    loaded = load_settings(
        cwd=tmp_path,
        environ={"ONCALL_REDIS__TIMEOUT": "2s"},
        flags=[FlagValue(("redis", "timeout"), "3s", "--set redis.timeout")],
    )
    assert loaded.settings.redis.timeout == 3.0
    assert loaded.settings.redis.url == "redis://127.0.0.1:7000/1"
    assert loaded.sources["redis.timeout"] == "flag --set redis.timeout"
    assert loaded.sources["redis.url"] == "oncall.yaml:3"


def test_env_json_list(tmp_path: Path) -> None:
    loaded = load_settings(
        cwd=tmp_path, environ={"ONCALL_VLLM__URLS": '["http://a:1", "http://b:2"]'}
    )
    assert loaded.settings.vllm.urls == ["http://a:1", "http://b:2"]


def test_env_bad_json_is_reported(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as caught:
        load_settings(cwd=tmp_path, environ={"ONCALL_VLLM__URLS": "[oops"})
    assert str(caught.value.problems[0]).startswith(
        "env ONCALL_VLLM__URLS: vllm.urls: invalid JSON"
    )


def test_a_problem_carries_file_line_col_and_key_as_fields(tmp_path: Path) -> None:
    (tmp_path / "oncall.yaml").write_text("redis:\n  timeout: soon\n")
    with pytest.raises(ConfigError) as caught:
        load_settings(cwd=tmp_path, environ={"ONCALL_VLLM__URLS": "["})
    by_key = {p.key: p for p in caught.value.problems}
    timeout = by_key["redis.timeout"]
    assert (timeout.file, timeout.line, timeout.col) == ("oncall.yaml", 2, 12)
    urls = by_key["vllm.urls"]
    assert (urls.file, urls.line, urls.col) == ("env ONCALL_VLLM__URLS", None, None)
    assert str(urls).startswith("env ONCALL_VLLM__URLS: vllm.urls: invalid JSON")


def test_read_only_flag_alone_is_reported_as_the_flag(tmp_path: Path) -> None:
    """Issue 12, item 13: `--read-only` given alone names the flag as its source, also when
    the settings file says the same."""
    (tmp_path / "oncall.yaml").write_text("read_only: true\n")
    flags = [FlagValue(("read_only",), True, "--read-only")]
    for environ in ({}, {"ONCALL_READ_ONLY": "false"}):
        loaded = load_settings(cwd=tmp_path, environ=environ, flags=flags)
        assert loaded.settings.read_only is True
        assert loaded.sources["read_only"] == "flag --read-only"


def test_limits_section_defaults_and_bounds(tmp_path: Path) -> None:
    try:
        loaded = load_settings(cwd=tmp_path, environ={"ONCALL_LIMITS__MAX_FILE_BYTES": "4096"})
        assert current_limits().max_file_bytes == 4096  # every later read is bounded by it
    finally:
        set_limits(YamlLimits())
    assert loaded.settings.limits.max_file_bytes == 4096
    assert loaded.sources["limits.max_file_bytes"] == "env ONCALL_LIMITS__MAX_FILE_BYTES"
    assert _problems(tmp_path, "limits:\n  max_file_bytes: 10\n") == [
        "oncall.yaml:2:19: limits.max_file_bytes: Input should be greater than or equal to 1024"
        " (got 10)"
    ]


@pytest.mark.parametrize(
    "value",
    ["inf", "nan", "1e400", "9" * 400, "9" * 5000 + "s"],
    ids=["inf", "nan", "e", "9s", "s"],
)
def test_huge_and_non_finite_durations_are_located_errors(tmp_path: Path, value: str) -> None:
    (problem,) = _problems(tmp_path, f"redis:\n  timeout: '{value}'\n")
    assert problem.startswith("oncall.yaml:2:12: redis.timeout: invalid duration")
    assert len(problem) < 200  # the value is shortened, not echoed in full


CHECKOUT = Path(__file__).resolve().parents[1]
SHIPPED_YAML = sorted(
    p for folder in ("alerts", "runbooks", "fixtures", "examples") if (CHECKOUT / folder).is_dir()
    for p in (CHECKOUT / folder).rglob("*.y*ml")
)  # fmt: skip


def _read_with(path: Path, *, libyaml: bool, monkeypatch: pytest.MonkeyPatch) -> tuple[object, ...]:
    with monkeypatch.context() as patch:
        patch.setattr(yaml_marks, "HAVE_LIBYAML", libyaml)
        doc, problems = yaml_marks.load_marked_yaml(path)
    return doc.data, doc.key_at, doc.value_at, problems


def test_libyaml_and_the_python_reader_agree_on_every_shipped_file(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The fast path (libyaml's scanner under the same bounded composer) reads each rule
    pack, runbook and fixture to the same data, positions and problems as pyyaml's own."""
    assert yaml_marks.HAVE_LIBYAML and len(SHIPPED_YAML) > 20
    for path in SHIPPED_YAML:
        fast = _read_with(path, libyaml=True, monkeypatch=monkeypatch)
        assert fast == _read_with(path, libyaml=False, monkeypatch=monkeypatch), path


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("a: 1\nb: \x80x\n", "2:4: YAML syntax error: character U+0080 is not allowed in YAML"),
        ("a: 1\n  b: 2\n", "2:4: YAML syntax error: mapping values are not allowed here"),
    ],
)
def test_errors_read_as_the_python_reader_words_them(
    tmp_path: Path, text: str, message: str
) -> None:
    """libyaml words its errors its own way ("… not allowed in this context"): a file with
    a character pyyaml refuses, or any error, is read again by pyyaml's reader."""
    path = tmp_path / "bad.yaml"
    path.write_text(text, encoding="utf-8")
    assert yaml_marks._parse_fast(text, YamlLimits(), yaml_marks.MarkedDocument("x"), []) is None
    _doc, problems = yaml_marks.load_marked_yaml(path, "bad.yaml")
    assert [str(p) for p in problems] == [f"bad.yaml:{message}"]


@pytest.mark.parametrize(
    ("escape", "why"),
    [
        ("\\U00110000", "chr() arg not in range(0x110000)"),
        ("\\U99999999", "Python int too large to convert to C int"),
    ],
)
def test_an_escape_past_unicode_is_a_located_syntax_error(
    tmp_path: Path, escape: str, why: str
) -> None:
    """pyyaml's reader calls chr() on a double-quoted "\\U" escape and lets a ValueError out
    for one past U+10FFFF (found by tests/security/test_fuzz_inputs.py): a syntax error at
    its line and column, never a traceback."""
    path = tmp_path / "oncall.yaml"
    path.write_text(f'runbooks:\n  dirs:\n  - "ab{escape}"\n', encoding="utf-8")
    _doc, problems = yaml_marks.load_marked_yaml(path, "oncall.yaml")
    # Line 3, column 10: the escape's hex digits.
    assert [str(p) for p in problems] == [
        f"oncall.yaml:3:10: YAML syntax error: cannot read this value: {why}"
    ]
    with pytest.raises(ConfigError) as raised:
        load_settings(config=path, environ={})
    assert [(p.line, p.col) for p in raised.value.problems] == [(3, 10)]


def test_an_escape_past_unicode_in_a_multi_document_file_is_a_yaml_error() -> None:
    """The multi-document reader (PrometheusRule objects) raises it as a located YAML error
    too, which its callers report with the file's line and column."""
    text = 'kind: PrometheusRule\n---\nalert: "x\\U99999999"\n'
    with pytest.raises(yaml.MarkedYAMLError) as raised:
        yaml_marks.compose_documents(text, YamlLimits())
    mark = raised.value.problem_mark
    assert mark is not None and (mark.line + 1, mark.column + 1) == (3, 12)
