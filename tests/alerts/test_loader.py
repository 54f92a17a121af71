"""Rule-file loading: good files give exact AlertRules, broken files give exact located problems.

Every broken fixture is also run through `promtool check rules` (when installed), so our
rejections stay in step with Prometheus; the few cases where promtool is knowingly more lenient
are listed in PROMTOOL_ACCEPTS and asserted the other way round.
"""

from __future__ import annotations

import functools
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from oncall.alerts.durations import parse_prom_duration
from oncall.alerts.loader import load_rule_files
from oncall.model.alerts import AlertRule

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "rules"
GOOD_DIR = FIXTURES / "loader"
GOOD = GOOD_DIR / "vllm.rules.yaml"
BROKEN = FIXTURES / "broken"
PROMTOOL = shutil.which("promtool")
needs_promtool = pytest.mark.skipif(PROMTOOL is None, reason="promtool is not installed")

_RULE_KEYS = "record, alert, expr, for, keep_firing_for, labels, annotations"
_HINT = "use whole numbers with units y, w, d, h, m, s, ms from largest to smallest, e.g. 1m30s"
_LABEL_RULE = "use letters, digits and _, not starting with a digit"

# Positions checked by hand against the fixture files: LINE:COL is 1-based.
EXPECTED: dict[str, list[str]] = {
    "annotations-on-recording.yaml": [
        "6:9: groups.0.rules.0.annotations: "
        "'annotations' is only for alerting rules, not in a recording rule"
    ],
    "bad-annotation-name.yaml": [
        "7:11: groups.0.rules.0.annotations.2nd_summary: "
        f'invalid annotation name "2nd_summary": {_LABEL_RULE}'
    ],
    "bad-for-duration.yaml": [f'6:14: groups.0.rules.0.for: invalid duration "1.5m": {_HINT}'],
    "bad-interval.yaml": [f'3:15: groups.0.interval: invalid duration "1m1h": {_HINT}'],
    "bad-label-name.yaml": [
        f'7:11: groups.0.rules.0.labels.team-name: invalid label name "team-name": {_LABEL_RULE}'
    ],
    "bad-limit.yaml": ["3:12: groups.0.limit: limit must be a whole number, not a string"],
    "bad-record-name.yaml": [
        '4:17: groups.0.rules.0.record: invalid metric name "job:up{job="vllm"}" '
        "(a selector belongs in expr)"
    ],
    "duplicate-group.yaml": ['6:11: groups.1.name: group "g" is already defined on line 2'],
    "duplicate-key.yaml": ["7:9: groups.0.rules.0.for: duplicate key"],
    "empty-expr.yaml": ["5:15: groups.0.rules.0.expr: expr is empty"],
    "for-on-recording.yaml": [
        "6:9: groups.0.rules.0.for: 'for' is only for alerting rules, not in a recording rule"
    ],
    "group-without-name.yaml": ["2:5: groups.0.name: a group needs a name"],
    "keep-firing-for-on-recording.yaml": [
        "6:9: groups.0.rules.0.keep_firing_for: "
        "'keep_firing_for' is only for alerting rules, not in a recording rule"
    ],
    "list-label-value.yaml": [
        "7:21: groups.0.rules.0.labels.severity: a label value must be a string, not a list"
    ],
    "missing-expr.yaml": [
        "4:9: groups.0.rules.0.expr: missing field 'expr' (the PromQL expression)"
    ],
    "name-label.yaml": [
        '7:11: groups.0.rules.0.labels.__name__: a rule cannot set the "__name__" label'
    ],
    "neither-record-nor-alert.yaml": [
        "4:9: groups.0.rules.0: a rule needs 'alert' (alerting rule) or 'record' (recording rule)"
    ],
    "non-string-expr.yaml": ["5:15: groups.0.rules.0.expr: expr must be a string, not a list"],
    "record-and-alert.yaml": [
        "4:9: groups.0.rules.0: a rule has either 'alert' or 'record', not both"
    ],
    "unclosed-template.yaml": [
        "7:20: groups.0.rules.0.annotations.summary: "
        '"{{" at offset 35 of the template is never closed by "}}"'
    ],
    "unknown-group-field.yaml": [
        '3:5: groups.0.intervall: unknown field "intervall" (did you mean "interval"? '
        "a group has only name, interval, query_offset, limit, labels, rules)"
    ],
    "unknown-rule-field.yaml": [
        '6:9: groups.0.rules.0.annotation: unknown field "annotation" '
        f'(did you mean "annotations"? a rule has only {_RULE_KEYS})'
    ],
    "unknown-top-field.yaml": [
        '1:1: version: unknown field "version" (a rule file has only groups)'
    ],
    "yaml-syntax.yaml": ["7:1: YAML syntax error: found unexpected end of stream"],
    # Issue 28: what Prometheus refuses and an earlier loader let through.
    "promql-syntax.yaml": [
        "5:15: groups.0.rules.0.expr: could not parse expression: unclosed left parenthesis"
    ],
    "promql-type.yaml": [
        "5:15: groups.0.rules.0.expr: could not parse expression: "
        "expected type matrix in call to function 'rate', got vector"
    ],
    "promql-bad-regex.yaml": [
        "5:15: groups.0.rules.0.expr: could not parse expression: illegal regex for vllm("
    ],
    # Rust's regex reads `vllm++`; Go's (and RE2) refuse it.
    "promql-go-regex.yaml": [
        "5:15: groups.0.rules.0.expr: could not parse expression: "
        'error parsing regexp in job=~"vllm++": bad repetition operator: ++'
    ],
    "undefined-template-variable.yaml": [
        "7:20: groups.0.rules.0.annotations.summary: "
        'undefined variable "$label" (at offset 2 of the template)'
    ],
    "undefined-template-function.yaml": [
        "7:17: groups.0.rules.0.labels.team: "
        'function "nosuchfunc" not defined (at offset 16 of the template)'
    ],
    "duplicate-label-key.yaml": ["8:11: groups.0.rules.0.labels.severity: duplicate key"],
    "several.yaml": [
        f'10:14: groups.0.rules.1.for: invalid duration "5 m": {_HINT}',
        '11:17: groups.0.rules.2.record: invalid metric name "bad name": '
        "use letters, digits, _ and :, not starting with a digit",
        "13:9: groups.0.rules.2.for: 'for' is only for alerting rules, not in a recording rule",
        f'17:11: groups.0.rules.3.labels.bad-label: invalid label name "bad-label": {_LABEL_RULE}',
        "19:20: groups.0.rules.3.annotations.summary: "
        '"{{" at offset 0 of the template is never closed by "}}"',
        '20:11: groups.1.name: group "g" is already defined on line 3',
        "21:15: groups.1.interval: a duration must be a string like 1m30s, not a number",
        "23:9: groups.1.rules.0.expr: missing field 'expr' (the PromQL expression)",
        '24:9: groups.1.rules.0.exprs: unknown field "exprs" '
        f'(did you mean "expr"? a rule has only {_RULE_KEYS})',
    ],
}

# Files promtool 2.42 accepts although we reject them, and why (see loader's docstring).
PROMTOOL_ACCEPTS: dict[str, str] = {}

# Rules that still load from broken files: problems elsewhere do not drop them.
STILL_LOADED = {
    "several.yaml": ["Good"],
    "duplicate-group.yaml": ["A"],
    "unknown-top-field.yaml": ["A"],
}


def _promtool_check(path: Path) -> subprocess.CompletedProcess[str]:
    assert PROMTOOL is not None
    argv = [PROMTOOL, "check", "rules", str(path)]
    return subprocess.run(argv, capture_output=True, text=True, timeout=60, check=False)


def test_good_file_gives_exact_rules() -> None:
    result = load_rule_files([GOOD])
    file = str(GOOD)
    # The three rules of the group `vllm-alerts` (interval 1m) share its name, file and interval.
    vllm_alerts = functools.partial(
        AlertRule, group="vllm-alerts", file=file, group_interval_s=60.0
    )
    assert result.problems == []
    assert result.files == [GOOD]
    assert result.recording == 3
    assert result.rules == [
        vllm_alerts(
            name="VllmKvCacheNearlyFull",
            expr="max by (model_name, instance) (vllm:kv_cache_usage_perc) > 0.9",
            line=20,
            for_s=300.0,
            keep_firing_for_s=90.0,
            labels={"severity": "warning", "team": "inference"},
            annotations={
                "summary": "KV cache {{ $value | humanizePercentage }} full on "
                "{{ $labels.instance }}",
                "runbook_url": "https://runbooks.example.com/vllm/kv-cache",
            },
        ),
        vllm_alerts(
            name="VllmQueueBacklog",
            expr="model_name:vllm_requests_waiting:sum > 10",
            line=30,
            for_s=600.0,
            labels={"severity": "page"},
            annotations={
                "summary": "{{ $value }} requests waiting for {{ $labels.model_name }}",
                "description": "More than 10 requests have been waiting for 10 minutes.\n"
                "{{ if gt $value 100.0 }}The backlog is severe.{{ end }}\n",
            },
        ),
        # Same name in the same group: allowed by Prometheus, kept as a separate rule.
        vllm_alerts(
            name="VllmQueueBacklog",
            expr="model_name:vllm_requests_waiting:sum > 100",
            line=40,
            labels={"severity": "critical"},
        ),
        AlertRule(
            name="VllmDown",
            expr='up{job="vllm"} == 0',
            group="vllm-availability",
            file=file,
            line=47,
            for_s=3723.0,
            labels={"severity": "page"},
            annotations={"summary": "vLLM target {{ $labels.instance }} is down"},
            group_interval_s=None,
        ),
    ]


def test_for_scale_multiplies_for_and_keep_firing_for() -> None:
    rules = {r.line: r for r in load_rule_files([GOOD], for_scale=0.1).rules}
    assert rules[20].for_s == pytest.approx(30.0)
    assert rules[20].keep_firing_for_s == pytest.approx(9.0)
    assert rules[47].for_s == pytest.approx(372.3)
    assert rules[40].for_s == 0.0
    with pytest.raises(ValueError, match="for_scale"):
        load_rule_files([GOOD], for_scale=0)


def test_group_labels_and_query_offset_of_newer_prometheus() -> None:
    result = load_rule_files([GOOD_DIR / "prom3.rules.yaml"])
    assert result.problems == []
    [rule] = result.rules
    assert rule.labels == {"team": "platform", "severity": "warning"}  # the rule's label wins


def test_folder_is_expanded_sorted_without_test_files() -> None:
    result = load_rule_files([GOOD_DIR, GOOD])  # GOOD again: read once
    assert result.files == [
        GOOD_DIR / "extra.yml",
        GOOD_DIR / "prom3.rules.yaml",
        GOOD_DIR / "vllm.rules.yaml",
    ]
    assert [r.name for r in result.rules] == [
        "AlwaysFiring",
        "GroupLabelled",
        "VllmKvCacheNearlyFull",
        "VllmQueueBacklog",
        "VllmQueueBacklog",
        "VllmDown",
    ]
    assert result.recording == 3
    assert result.problems == []


def test_missing_path_and_empty_folder_are_problems(tmp_path: Path) -> None:
    missing = tmp_path / "nope.yaml"
    result = load_rule_files([missing, tmp_path])
    assert [str(p) for p in result.problems] == [
        f"{missing}: no such file or folder",
        f"{tmp_path}: no rule files (*.yaml, *.yml) here",
    ]
    assert result.files == []


def test_broken_fixtures_all_have_expectations() -> None:
    assert sorted(p.name for p in BROKEN.iterdir()) == sorted(EXPECTED)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_broken_file_gives_exact_problems(name: str) -> None:
    path = BROKEN / name
    result = load_rule_files([path])
    assert [str(p) for p in result.problems] == [f"{path}:{line}" for line in EXPECTED[name]]
    assert [r.name for r in result.rules] == STILL_LOADED.get(name, [])


def test_problems_of_all_files_are_collected() -> None:
    files = [BROKEN / "empty-expr.yaml", GOOD, BROKEN / "bad-limit.yaml"]
    result = load_rule_files(files)
    assert [p.where for p in result.problems] == [f"{files[0]}:5:15", f"{files[2]}:3:12"]
    assert len(result.rules) == 4


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("0", 0.0), ("0s", 0.0), ("250ms", 0.25), ("1m30s", 90.0), ("1y1w", 32140800.0)],
)
def test_prometheus_durations(text: str, seconds: float) -> None:
    assert parse_prom_duration(text) == seconds


@pytest.mark.parametrize("text", ["", "5", "1.5m", "1m1h", "1ms1s", "1h1h", " 1m", "1M", "-1m"])
def test_durations_prometheus_refuses(text: str) -> None:
    with pytest.raises(ValueError):
        parse_prom_duration(text)


@needs_promtool
@pytest.mark.parametrize(
    "path",
    [GOOD, GOOD_DIR / "extra.yml", FIXTURES / "sample.rules.yaml"],
    ids=lambda p: p.name,
)
def test_good_files_pass_promtool(path: Path) -> None:
    # prom3.rules.yaml is left out: promtool 2.42 does not know query_offset or group labels.
    done = _promtool_check(path)
    assert done.returncode == 0, done.stdout + done.stderr


@needs_promtool
def test_good_file_passes_promtool_unit_test() -> None:
    assert PROMTOOL is not None
    argv = [PROMTOOL, "test", "rules", str(GOOD_DIR / "vllm.test.yaml")]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stdout + done.stderr


@needs_promtool
@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_promtool_agrees_on_broken_file(name: str) -> None:
    done = _promtool_check(BROKEN / name)
    if name in PROMTOOL_ACCEPTS:
        assert done.returncode == 0, PROMTOOL_ACCEPTS[name]
    else:
        assert done.returncode == 1, done.stdout + done.stderr


LENIENT = Path(__file__).resolve().parents[1] / "fixtures" / "rules" / "lenient"


def test_files_prometheus_accepts_load_like_prometheus() -> None:
    """An empty file is 0 rules; an unquoted scalar is its text (`priority: 1` is "1")."""
    loaded = load_rule_files([LENIENT])
    assert loaded.problems == []
    assert [(r.name, r.labels) for r in loaded.rules] == [("A", {"priority": "1"})]
    if PROMTOOL is not None:
        for path in sorted(LENIENT.iterdir()):
            assert _promtool_check(path).returncode == 0, path


ACCEPTED = FIXTURES / "accepted"
REPO = Path(__file__).resolve().parents[2]
KUBE_PROMETHEUS = REPO / "fixtures" / "rules" / "kube-prometheus"


def _accepted_corpus(tmp_path: Path) -> list[Path]:
    """Files Prometheus accepts: the crafted ones, the shipped packs and kube-prometheus'
    rule groups (each PrometheusRule's spec written out as the rule file Prometheus reads)."""
    files = sorted(ACCEPTED.iterdir()) + sorted((REPO / "alerts").glob("*.yaml"))
    for source in sorted(KUBE_PROMETHEUS.glob("*.yaml")):
        spec = yaml.safe_load(source.read_text(encoding="utf-8"))["spec"]
        plain = tmp_path / source.name
        plain.write_text(yaml.safe_dump(spec), encoding="utf-8")
        files.append(plain)
    return files


@needs_promtool
def test_every_file_promtool_accepts_oncall_accepts(tmp_path: Path) -> None:
    """Issue 28: the loader is as strict as Prometheus, no stricter: each file of the corpus
    passes `promtool check rules` and loads with no problem, every alerting rule kept."""
    files = _accepted_corpus(tmp_path)
    assert len(files) >= 12
    for path in files:
        done = _promtool_check(path)
        assert done.returncode == 0, done.stdout + done.stderr
        loaded = load_rule_files([path])
        assert loaded.problems == [], path
        alerting = sum(
            "alert" in rule
            for group in yaml.safe_load(path.read_text(encoding="utf-8"))["groups"]
            for rule in group["rules"]
        )
        assert len(loaded.rules) == alerting, path


def test_a_rule_file_of_several_mib_loads_and_a_larger_one_names_the_setting(
    tmp_path: Path,
) -> None:
    """Teams keep MiB-sized rule files (a real one is 1.2 MB): one of ~1.9 MB loads; past the
    bound (`limits.max_file_bytes`, 8 MiB) the file is refused, naming that setting."""
    rule = (
        "      - alert: Rule{n}\n"
        '        expr: sum by (instance) (rate(vllm:num_preemptions_total{{job="vllm-{n}"}}[5m]))'
        " > 0\n"
        "        labels: {{severity: warning}}\n"
        '        annotations: {{summary: "{{{{ $labels.instance }}}} preempts"}}\n'
    )
    body = "groups:\n  - name: big\n    rules:\n" + "".join(rule.format(n=n) for n in range(9000))
    big = tmp_path / "big.yaml"
    big.write_text(body, encoding="utf-8")
    assert 1_500_000 < big.stat().st_size < 8 * 1_048_576
    loaded = load_rule_files([big])
    assert loaded.problems == []
    assert len(loaded.rules) == 9000
    huge = tmp_path / "huge.yaml"
    huge.write_text(body * 5, encoding="utf-8")  # 9.8 MB
    [problem] = load_rule_files([huge]).problems
    assert (problem.line, problem.col) == (1, 1)
    assert "limits.max_file_bytes" in problem.message
