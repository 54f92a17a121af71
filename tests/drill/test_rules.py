"""Scaling the `for` durations of rule files the drill deploys."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st

from oncall_drill.components import DrillError
from oncall_drill.rules import deploy_rules, duration_seconds, scale_duration

SAMPLE = Path(__file__).resolve().parent.parent / "fixtures" / "rules" / "sample.rules.yaml"


@pytest.mark.parametrize(
    ("text", "scale", "scaled"),
    [("2m", 0.05, "6s"), ("1m30s", 0.1, "9s"), ("30s", 0.05, "1500ms"), ("0s", 0.5, "0s"),
     ("1h", 1.0, "3600s"), ("250ms", 2, "500ms")],
)  # fmt: skip
def test_scale_duration(text: str, scale: float, scaled: str) -> None:
    assert scale_duration(text, scale) == scaled


@given(st.integers(min_value=0, max_value=10**6), st.sampled_from([0.01, 0.05, 0.5, 1.0, 3.0]))
def test_scaled_duration_is_proportional(seconds: int, scale: float) -> None:
    scaled = duration_seconds(scale_duration(f"{seconds}s", scale))
    assert abs(scaled - seconds * scale) <= 0.0005


@pytest.mark.parametrize("bad", ["", "5", "m", "1.5m", "5 m"])
def test_rejects_what_prometheus_rejects(bad: str) -> None:
    with pytest.raises(ValueError, match="not a Prometheus duration"):
        duration_seconds(bad)


def test_deploy_scales_alerts_and_keeps_the_rest(tmp_path: Path) -> None:
    (copy,) = deploy_rules([SAMPLE.parent], tmp_path / "rules", 0.05)
    deployed = yaml.safe_load(copy.read_text())
    original = yaml.safe_load(SAMPLE.read_text())
    rules = deployed["groups"][0]["rules"]
    assert rules[1]["for"] == "6s"
    assert rules[1]["keep_firing_for"] == "3s"
    assert "for" not in rules[2]
    assert rules[0] == original["groups"][0]["rules"][0]
    assert rules[1]["annotations"] == original["groups"][0]["rules"][1]["annotations"]


def test_deploy_names_the_broken_file(tmp_path: Path) -> None:
    broken = tmp_path / "broken.yaml"
    broken.write_text("groups:\n- name: g\n  rules:\n  - alert: A\n    expr: up\n    for: soon\n")
    with pytest.raises(DrillError, match=r"broken\.yaml: not a Prometheus duration: 'soon'"):
        deploy_rules([broken], tmp_path / "out", 0.5)
    with pytest.raises(DrillError, match="not found"):
        deploy_rules([tmp_path / "absent"], tmp_path / "out", 0.5)


def test_the_drill_deploys_every_pack_of_the_checkout(tmp_path: Path) -> None:
    """`drill up` deploys the `alerts/` folder: the vllm pack with the others, scaled."""
    alerts = Path(__file__).resolve().parents[2] / "alerts"
    copies = {p.name: p for p in deploy_rules([alerts], tmp_path / "rules", 0.05)}
    assert {"ai-service.yaml", "platform.yaml", "vllm.yaml"} <= set(copies)
    rules = yaml.safe_load(copies["vllm.yaml"].read_text())["groups"][0]["rules"]
    by_name = {r["alert"]: r for r in rules}
    assert by_name["VllmInterTokenLatencyP99High"]["for"] == "6s"  # 2m x 0.05
    # Windows scale with `for`, but not below a minute: [5m] x 0.05 = 15s -> 60s.
    assert "[60s]" in by_name["VllmEngineHung"]["expr"]
    assert "[5m]" not in copies["vllm.yaml"].read_text()
    assert "for" not in by_name["VllmEngineRestarted"]
