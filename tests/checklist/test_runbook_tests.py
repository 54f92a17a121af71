"""`oncall runbook test`: recorded facts in, statuses and proposals out, readable mismatches."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tests.cli_runner import run_oncall

ROOT = Path(__file__).resolve().parents[2]
RUNBOOK = ROOT / "runbooks" / "LLMHighP99Latency.yaml"


def test_shipped_runbook_tests_pass() -> None:
    result = run_oncall("runbook", "test", "runbooks/", cwd=ROOT)
    assert result.code == 0, result.stdout + result.stderr
    assert result.stdout.startswith("SUCCESS:")
    assert "0 failed" in result.stdout


def _setup(tmp_path: Path, body: str) -> Path:
    (tmp_path / "tests").mkdir()
    shutil.copy(RUNBOOK, tmp_path / "LLMHighP99Latency.yaml")
    test = tmp_path / "tests" / "LLMHighP99Latency.test.yaml"
    test.write_text("runbook: ../LLMHighP99Latency.yaml\ntests:\n" + body)
    return test


GPU_FULL = """\
  - name: wrong expectations
    facts:
      gpu_memory: {count: 1, max_memory_used_ratio: 0.99, min_memory_free_mib: 9000}
      deployment: {rollout_complete: true, unavailable_replicas: 0, ready_replicas: 2,
                   replicas: 2, max_num_seqs: 256, max_num_active_seqs: null,
                   max_num_seqs_default: null}
      kv_cache: &kv {tokens_per_s: 9.0, running: 512.0, kv_cache_usage: 0.99,
                     preemptions_per_s: 1.0, waiting: 3.0, busiest_pod: vllm-a}
      kv_imbalance: {tokens_per_s: 9.0, running: 40.0, kv_cache_usage: 0.4,
                     preemptions_per_s: 0.0, waiting: 0.0, busiest_pod: vllm-b}
      kv_fit: *kv
    expect:
      steps: {gpu_memory: ok, pods: {status: ok, summary_contains: "Ready"}}
      proposals:
        - {id: lower-max-num-seqs-kv, params: {value: 32}}
        - {id: raise-max-num-seqs}
  - name: right expectations
    facts:
      gpu_memory: {count: 1, max_memory_used_ratio: 0.99, min_memory_free_mib: 9000}
    expect:
      steps: {gpu_memory: fail, pods: unknown}
"""


def test_mismatches_are_reported_as_expected_versus_got(tmp_path: Path) -> None:
    _setup(tmp_path, GPU_FULL)
    result = run_oncall("runbook", "test", ".", cwd=tmp_path)
    assert result.code == 1
    lines = result.stdout.splitlines()
    assert lines[0] == "FAIL tests/LLMHighP99Latency.test.yaml:3: wrong expectations"
    gpu = "busiest GPU at 99%, 9,000 MiB free on the fullest"
    assert f"  step gpu_memory: expected ok, got fail ({gpu})" in lines
    assert (
        "  step pods: expected ok, got unknown (recorded at kube.pods: no recorded facts)" in lines
    )
    assert (
        "  proposals: expected [lower-max-num-seqs-kv, raise-max-num-seqs], "
        "got [lower-max-num-seqs-kv, rebuild-busiest-pod]" in lines
    )
    assert "  proposal lower-max-num-seqs-kv params.value: expected 32, got 64" in lines
    assert lines[-1] == "FAILED: 1 test files, 2 tests, 1 passed, 1 failed"


def test_run_filters_tests_by_name(tmp_path: Path) -> None:
    _setup(tmp_path, GPU_FULL)
    result = run_oncall("runbook", "test", ".", "--run", "^right", cwd=tmp_path)
    assert result.code == 0, result.stdout
    assert result.stdout.strip() == "SUCCESS: 1 test files, 1 tests, 1 passed, 0 failed"


#: A test named `typo` whose facts name a step that is not in the runbook; `expect` is its
#: `expect:` key (`stpes` is no key at all).
TYPO = "  - name: typo\n    facts: {{gpu_memroy: {{}}}}\n    expect: {{{expect}: {{}}}}\n"


@pytest.mark.parametrize(
    ("expect", "problem"),
    [
        pytest.param("stpes", "5:14: tests.0.expect.stpes: unknown key 'stpes'", id="unknown-key"),
        pytest.param(
            "steps",
            "4:13: tests.0.facts.gpu_memroy: no step 'gpu_memroy' in ../LLMHighP99Latency.yaml",
            id="unknown-step-in-facts",
        ),
    ],
)
def test_a_test_file_naming_unknown_steps_or_keys_is_located(
    tmp_path: Path, expect: str, problem: str
) -> None:
    test = _setup(tmp_path, TYPO.format(expect=expect))
    result = run_oncall("runbook", "test", str(test), cwd=tmp_path)
    assert result.code == 1
    assert f"{test}:{problem}" in result.stdout


def test_a_run_filter_that_is_no_regular_expression_is_a_usage_error(tmp_path: Path) -> None:
    _setup(tmp_path, TYPO.format(expect="stpes"))
    result = run_oncall("runbook", "test", "--run", "(", ".", cwd=tmp_path)
    assert result.code == 2
    assert "not a regular expression" in result.stderr
