"""The golden-alert packs (`alerts/*.yaml`) pass promtool and carry what an operator needs.

`promtool check rules` validates each pack and `promtool test rules` runs its unit tests
(`alerts/tests/<pack>.test.yaml`); a deliberately broken copy shows those tests can fail.
PyYAML checks the conventions promtool does not: names, severities, pack labels, annotations,
runbook paths, exporter comments, and that every alert's unit tests cover both states.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
ALERTS = ROOT / "alerts"
PACK_NAMES = ("ai-service", "platform", "vllm")
EXPECTED: dict[str, set[str]] = {
    "ai-service": {
        "LLMHighP99Latency",
        "VectorSearchP999High",
        "LLMOutOfMemory",
        "AIServiceUnavailable",
        "PromptRejectionRateHigh",
    },
    "platform": {
        "LatencyP95High",
        "ErrorRateHigh",
        "GPUMemoryHigh",
        "GPUXidError",
        "RedisHitRateLow",
        "PrometheusScrapeFailing",
        # oncall serve's own health (issue 30)
        "OncallServeDown",
        "OncallServeOverloaded",
        "OncallServeVerdictStoreErrors",
    },
    "vllm": {
        "VllmInterTokenLatencyP99High",
        "VllmTTFTP99High",
        "VllmQueueTimeP99High",
        "VllmKVCacheSaturated",
        "VllmEngineHung",
        "VllmEngineRestarted",
        "VllmRequestErrorsHigh",
    },
}
ANNOTATIONS = ("summary", "description", "runbook", "runbook_url")
RUNBOOK_URL = "https://runbooks.example.internal/oncall/"
PROMTOOL_TIMEOUT_S = 60


def pack_path(pack: str) -> Path:
    return ALERTS / f"{pack}.yaml"


def unit_tests_path(pack: str) -> Path:
    return ALERTS / "tests" / f"{pack}.test.yaml"


def promtool() -> str:
    """The promtool executable; the test fails, naming the package, when it is missing."""
    found = shutil.which("promtool")
    if found is None:
        pytest.fail(
            "promtool not found on PATH: install the Debian package `prometheus` "
            "(apt-get install prometheus), which ships promtool"
        )
    return found


def run_promtool(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [promtool(), *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=PROMTOOL_TIMEOUT_S,
        check=False,
    )


def shown(proc: subprocess.CompletedProcess[str]) -> str:
    """A promtool run as text for an assertion message."""
    argv = " ".join(str(a) for a in proc.args)
    return f"$ {argv}\nexit {proc.returncode}\n--- stdout\n{proc.stdout}--- stderr\n{proc.stderr}"


def load(path: Path) -> dict[str, Any]:
    doc = yaml.safe_load(path.read_text(encoding="utf-8"))
    assert isinstance(doc, dict), f"{path}: not a YAML mapping"
    return doc


def alerts_of(pack: str) -> list[dict[str, Any]]:
    groups = load(pack_path(pack))["groups"]
    return [rule for group in groups for rule in group["rules"] if "alert" in rule]


def test_promtool_missing_names_the_debian_package(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(shutil, "which", lambda _name: None)
    with pytest.raises(pytest.fail.Exception, match="Debian package `prometheus`"):
        promtool()


@pytest.mark.parametrize("pack", PACK_NAMES)
def test_promtool_check_rules(pack: str) -> None:
    proc = run_promtool("check", "rules", str(pack_path(pack)), cwd=ROOT)
    assert proc.returncode == 0, shown(proc)
    assert f"SUCCESS: {len(EXPECTED[pack])} rules found" in proc.stdout, shown(proc)


@pytest.mark.parametrize("pack", PACK_NAMES)
def test_promtool_test_rules(pack: str) -> None:
    proc = run_promtool("test", "rules", str(unit_tests_path(pack)), cwd=ROOT)
    assert proc.returncode == 0, shown(proc)
    assert "SUCCESS" in proc.stdout, shown(proc)


def test_alert_names_are_exactly_the_golden_alerts() -> None:
    names = [rule["alert"] for pack in PACK_NAMES for rule in alerts_of(pack)]
    assert len(names) == len(set(names)), f"duplicate alert names: {sorted(names)}"
    assert set(names) == set().union(*EXPECTED.values())
    for pack in PACK_NAMES:
        assert {rule["alert"] for rule in alerts_of(pack)} == EXPECTED[pack], pack


@pytest.mark.parametrize("pack", PACK_NAMES)
def test_one_group_named_after_the_pack(pack: str) -> None:
    groups = load(pack_path(pack))["groups"]
    assert [group["name"] for group in groups] == [pack]


@pytest.mark.parametrize("pack", PACK_NAMES)
def test_every_alert_carries_severity_pack_and_runbook(pack: str) -> None:
    problems: list[str] = []
    for rule in alerts_of(pack):
        name = rule["alert"]
        labels: dict[str, Any] = rule.get("labels") or {}
        annotations: dict[str, Any] = rule.get("annotations") or {}
        if labels.get("severity") not in ("page", "chat"):
            problems.append(f"{name}: severity {labels.get('severity')!r} is not page|chat")
        if labels.get("pack") != pack:
            problems.append(f"{name}: label pack {labels.get('pack')!r}, expected {pack!r}")
        for key in ANNOTATIONS:
            value = annotations.get(key)
            if not isinstance(value, str) or not value.strip():
                problems.append(f"{name}: annotation {key!r} missing or empty")
        if annotations.get("runbook") != f"runbooks/{name}.yaml":
            problems.append(f"{name}: runbook {annotations.get('runbook')!r}")
        if annotations.get("runbook_url") != RUNBOOK_URL + name:
            problems.append(f"{name}: runbook_url {annotations.get('runbook_url')!r}")
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("pack", PACK_NAMES)
def test_every_alerts_runbook_is_shipped(pack: str) -> None:
    missing = [
        rule["alert"]
        for rule in alerts_of(pack)
        if not (ROOT / rule["annotations"]["runbook"]).is_file()
    ]
    assert missing == [], "alerts whose runbook annotation names no file in runbooks/"


@pytest.mark.parametrize("pack", PACK_NAMES)
def test_every_alert_names_its_exporter_in_a_comment(pack: str) -> None:
    lines = pack_path(pack).read_text(encoding="utf-8").splitlines()
    missing: list[str] = []
    for index, line in enumerate(lines):
        if not line.lstrip().startswith("- alert:"):
            continue
        comments: list[str] = []
        above = index - 1
        while above >= 0 and lines[above].lstrip().startswith("#"):
            comments.append(lines[above])
            above -= 1
        if not any("Exporter:" in comment for comment in comments):
            missing.append(line.split(":", 1)[1].strip())
    assert not missing, f"no '# Exporter: ...' comment above: {missing}"


@pytest.mark.parametrize("pack", PACK_NAMES)
def test_unit_tests_cover_every_alert_both_ways(pack: str) -> None:
    """Each alert is expected silent at some time and firing, fully annotated, at another."""
    silent: set[str] = set()
    firing: set[str] = set()
    for case in load(unit_tests_path(pack))["tests"]:
        for check in case.get("alert_rule_test") or []:
            expected = check.get("exp_alerts") or []
            if not expected:
                silent.add(check["alertname"])
            elif all(set(ANNOTATIONS) <= set(a.get("exp_annotations") or {}) for a in expected):
                firing.add(check["alertname"])
    assert EXPECTED[pack] - silent == set(), "alerts never expected silent"
    assert EXPECTED[pack] - firing == set(), "alerts never expected firing with annotations"


# A copy of a pack with one change its unit tests must catch: (pack, from, to, alert).
BREAKAGES = [
    pytest.param("ai-service", "> 1.2\n", "> 2\n", "LLMHighP99Latency", id="threshold-raised"),
    pytest.param("ai-service", "for: 2m\n", "for: 3m\n", "LLMHighP99Latency", id="for-longer"),
    pytest.param("platform", "> 0.95\n", "> 0.94\n", "GPUMemoryHigh", id="threshold-lowered"),
    pytest.param(
        "platform", "(up == 1)[1h:1m]", "(up == 1)[5m:1m]", "GPUXidError", id="window-shortened"
    ),
    pytest.param(
        "platform", "changes((max by", "changes((min by", "GPUXidError", id="xid-change-per-series"
    ),
    pytest.param("vllm", "> 0.9\n", "> 0.8\n", "VllmKVCacheSaturated", id="vllm-kv-lowered"),
    pytest.param(
        "platform",
        "            and on ()\n",
        "            or on ()\n",
        "OncallServeDown",
        id="serve-absent-without-deployment",
    ),
    pytest.param(
        "platform",
        '(up{job="oncall-serve"}) == 0',
        '(up{job="oncall-serve"}) == 1',
        "OncallServeDown",
        id="serve-down-inverted",
    ),
    pytest.param(
        "platform",
        'outcome="overflowed"}[10m]',
        'outcome="overflowed"}[5m]',
        "OncallServeOverloaded",
        id="serve-overflow-window-shortened",
    ),
    pytest.param(
        "platform",
        "errors_total[5m])) > 0\n        for: 5m\n",
        "errors_total[5m])) > 0\n        for: 1m\n",
        "OncallServeVerdictStoreErrors",
        id="serve-store-errors-for-shortened",
    ),
    pytest.param(
        "vllm", "[5m]))) > 0.5\n", "[5m]))) > 0.8\n", "VllmQueueTimeP99High", id="vllm-queue"
    ),
]


@pytest.mark.parametrize(("pack", "old", "new", "alert"), BREAKAGES)
def test_a_broken_copy_fails_its_unit_tests(
    tmp_path: Path, pack: str, old: str, new: str, alert: str
) -> None:
    rules = pack_path(pack).read_text(encoding="utf-8")
    assert rules.count(old) == 1, f"{old!r} should occur once in {pack_path(pack)}"
    (tmp_path / "tests").mkdir()
    (tmp_path / f"{pack}.yaml").write_text(rules.replace(old, new), encoding="utf-8")
    copied_test = tmp_path / "tests" / f"{pack}.test.yaml"
    shutil.copyfile(unit_tests_path(pack), copied_test)

    check = run_promtool("check", "rules", str(tmp_path / f"{pack}.yaml"), cwd=tmp_path)
    assert check.returncode == 0, shown(check)  # still a valid rule file...
    proc = run_promtool("test", "rules", str(copied_test), cwd=tmp_path)
    assert proc.returncode != 0, shown(proc)  # ...whose unit tests now fail
    assert "FAILED" in proc.stdout + proc.stderr, shown(proc)
    assert alert in proc.stdout + proc.stderr, shown(proc)
