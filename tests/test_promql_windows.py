"""Scaling the windows of PromQL expressions (oncall.promql_windows), as the drill deploys the
packs and as the app evaluates them under `alerts.for_scale`."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
import yaml

from oncall.alerts.loader import load_rule_files
from oncall.promql_windows import duration_seconds, scale_windows
from oncall_drill.rules import deploy_rules
from tests.alerts.test_rule_packs import promtool

ALERTS = Path(__file__).resolve().parent.parent / "alerts"


@pytest.mark.parametrize(
    ("expr", "scale", "scaled"),
    [
        ("rate(x[5m]) > 0", 0.05, "rate(x[60s]) > 0"),  # 15s, floored at a minute
        ("rate(x[1h])", 0.05, "rate(x[180s])"),
        ("rate(x[10s])", 0.05, "rate(x[10s])"),  # already under the floor: kept
        ("rate(x[1m])", 0.05, "rate(x[1m])"),  # at the floor: kept as written
        ("rate(x[1h30m])", 0.1, "rate(x[540s])"),
        ("rate(x[10m])", 0.05, "rate(x[60s])"),
        ("max_over_time(m[1h:1m])", 0.05, "max_over_time(m[180s:3s])"),
        ("max_over_time(m[ 1h : ])", 0.05, "max_over_time(m[180s:])"),
        ("x offset 1h == x", 0.05, "x offset 180s == x"),
        ("rate(x[5m] offset -1h)", 0.05, "rate(x[60s] offset -180s)"),
        ("rate(x[5m])", 2, "rate(x[600s])"),
        ("rate(x[5m])", 1, "rate(x[5m])"),
        # Strings and comments are not code: a `[5m]` or `offset 1h` in them stays.
        ('rate(x{path="/a[5m]", q=\'offset 1h\'}[5m])', 0.05,
         'rate(x{path="/a[5m]", q=\'offset 1h\'}[60s])'),
        ("rate(x[5m]) # was [1m]\n> 0", 0.05, "rate(x[60s]) # was [1m]\n> 0"),
        ('label_replace(x, "d", "$1", "s", "(offset 5m)")', 0.05,
         'label_replace(x, "d", "$1", "s", "(offset 5m)")'),
        ("y{offset_name=\"a\"}", 0.05, "y{offset_name=\"a\"}"),  # a label name, not offset
    ],
)  # fmt: skip
def test_scale_windows(expr: str, scale: float, scaled: str) -> None:
    assert scale_windows(expr, scale) == scaled


def test_duration_errors_name_the_text() -> None:
    with pytest.raises(ValueError, match="not a PromQL duration: '5 m'"):
        duration_seconds("5 m")


def test_the_app_evaluates_what_the_drill_deploys(tmp_path: Path) -> None:
    """Under `alerts.for_scale`, the app's rules carry the expressions of the drill's copies."""
    copies = deploy_rules([ALERTS], tmp_path / "rules", 0.05)
    deployed = {
        rule["alert"]: rule["expr"]
        for copy in copies
        for group in yaml.safe_load(copy.read_text())["groups"]
        for rule in group["rules"]
    }
    local = {rule.name: rule.expr for rule in load_rule_files([ALERTS], for_scale=0.05).rules}
    assert local == deployed
    assert all("[5m]" not in expr and "1h" not in expr for expr in local.values())


def test_scaled_packs_are_valid_rule_files(tmp_path: Path) -> None:
    copies = deploy_rules([ALERTS], tmp_path / "rules", 0.05)
    result = subprocess.run(
        [promtool(), "check", "rules", *map(str, copies)],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
