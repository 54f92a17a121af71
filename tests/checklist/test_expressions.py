"""Runbook expressions: compile-time checks, evaluation over facts, caps, and CEL's semantics."""

from __future__ import annotations

import contextlib
import subprocess
import sys
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from oncall.checklist.expressions import (
    MAX_EXPRESSION_CHARS,
    MAX_FACTS_DEPTH,
    CompiledExpression,
    ExpressionError,
    compile_expression,
    evaluate_bool,
)

NAMES = ("alert", "gpu", "vllm", "redis", "pods", "steps")

FACTS: dict[str, Any] = {
    "alert": {"labels": {"pod": "vllm-0", "namespace": "llm"}, "value": 42.0},
    "gpu": {"memory_used_ratio": 0.97, "count": 8, "temperature_c": 81},
    "vllm": {"num_requests_waiting": 17, "models": ["llama-3-70b", "llama-3-8b"]},
    "redis": {"hit_ratio": 0.71},
    "pods": [
        {"name": "vllm-0", "ready": True, "restarts": 0, "last_termination_reason": None},
        {"name": "vllm-1", "ready": False, "restarts": 4, "last_termination_reason": "OOMKilled"},
    ],
    "steps": {"queue": {"output": {"waiting": 17.0, "threshold": 10}}},
}


def compiled(text: str) -> CompiledExpression:
    return compile_expression(text, names=NAMES)


def value(text: str, facts: dict[str, Any] | None = None) -> object:
    return compiled(text).evaluate(FACTS if facts is None else facts)


def test_comparisons_over_nested_facts() -> None:
    assert value("gpu.memory_used_ratio > 0.95 && vllm.num_requests_waiting > 10") is True
    assert value("steps.queue.output.waiting > 20.0") is False
    assert value("alert.labels['namespace'] == 'llm' && pods[1].restarts >= 4") is True
    assert value("pods[0].last_termination_reason == null") is True


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("has(alert.labels.pod)", True),
        ("has(alert.labels.node)", False),
        ("pods.exists(p, p.last_termination_reason == 'OOMKilled')", True),
        ("pods.all(p, p.ready)", False),
        ("pods.exists_one(p, p.restarts > 0)", True),
        ("size(pods.filter(p, !p.ready)) > 0", True),
        ("pods.filter(p, !p.ready).map(p, p.name)", ["vllm-1"]),
        ("size(vllm.models)", 2),
        ("'llama-3-8b' in vllm.models", True),
    ],
)
def test_macros(text: str, expected: object) -> None:
    assert value(text) == expected


def test_ternary_gives_a_string() -> None:
    assert value('redis.hit_ratio < 0.8 ? "low" : "ok"') == "low"


def test_string_functions() -> None:
    assert value("alert.labels.pod.startsWith('vllm-') && alert.labels.pod.endsWith('-0')")
    assert value("alert.labels.pod.contains('llm')") is True
    assert value("alert.labels.pod.matches('^vllm-[0-9]+$')") is True
    assert value("'pod ' + alert.labels.pod") == "pod vllm-0"
    assert value("string(gpu.count) + ' GPUs'") == "8 GPUs"


def test_results_are_plain_python_values() -> None:
    assert value("{'pods': size(pods), 'names': pods.map(p, p.name)}") == {
        "pods": 2,
        "names": ["vllm-0", "vllm-1"],
    }
    assert value("duration('90s')") == 90.0
    assert value("timestamp('2024-01-01T00:00:00Z')") == "2024-01-01T00:00:00+00:00"
    assert value("b'abc'") == "abc"


def test_unknown_top_level_name_suggests_the_nearest() -> None:
    with pytest.raises(ExpressionError) as caught:
        compiled("gpu.count > 1 && gpuu.memory_used_ratio > 0.9")
    assert str(caught.value) == "unknown name 'gpuu' (did you mean 'gpu'?)"
    assert caught.value.column == 18


def test_unknown_name_without_a_near_one_lists_the_known_ones() -> None:
    with pytest.raises(ExpressionError, match="unknown name 'zzz'; known names: alert, gpu"):
        compiled("zzz > 1")


def test_names_bound_by_macros_are_not_unknown() -> None:
    assert compiled("pods.exists(pod, pod.restarts > 3)").names == ("pods",)


def test_a_name_inside_a_string_literal_is_not_where_the_unknown_one_is() -> None:
    with pytest.raises(ExpressionError) as caught:
        compiled("'gpuu' == gpuu.name")
    assert caught.value.column == 11


@pytest.mark.parametrize(
    ("text", "column", "message"),
    [
        ("gpu.memory_used_ratio +", 24, "syntax error: unexpected end of expression"),
        ("gpu.count &&& 1", 13, "syntax error: token recognition error at: '& '"),
        ("gpu.count >\n  (1 +", 19, "syntax error: unexpected end of expression"),
        ("", 1, "syntax error: unexpected end of expression"),
    ],
)
def test_syntax_error_has_its_column(text: str, column: int, message: str) -> None:
    with pytest.raises(ExpressionError) as caught:
        compiled(text)
    assert caught.value.column == column
    assert str(caught.value) == message


def test_too_long_expression_is_refused_before_parsing() -> None:
    text = "1 == 1 && " * (MAX_EXPRESSION_CHARS // 10) + "true"
    with pytest.raises(ExpressionError, match=f"the limit is {MAX_EXPRESSION_CHARS}"):
        compiled(text)


def test_deeply_nested_expression_is_an_error_not_a_crash() -> None:
    with pytest.raises(ExpressionError, match="syntax error"):
        compiled("(" * 500 + "1" + ")" * 500)


def test_oversized_facts_are_refused() -> None:
    with pytest.raises(ExpressionError, match="larger than 1000000 bytes"):
        value("size(steps) > 0", {"steps": {"log": ["x" * 1000] * 1100}})


def test_over_deep_facts_are_refused() -> None:
    deep: dict[str, Any] = {"leaf": 1}
    for _ in range(MAX_FACTS_DEPTH):
        deep = {"next": deep}
    with pytest.raises(ExpressionError, match=f"deeper than {MAX_FACTS_DEPTH} levels"):
        value("has(steps.next)", {"steps": deep})


def test_facts_of_other_types_are_refused() -> None:
    with pytest.raises(ExpressionError, match=r"fact steps\.when is a object"):
        value("has(steps.when)", {"steps": {"when": object()}})


def test_only_referenced_facts_are_checked() -> None:
    facts = {**FACTS, "redis": {"bad": object()}}
    assert value("gpu.count == 8", facts) is True


def test_a_referenced_fact_that_is_not_given_is_an_error() -> None:
    with pytest.raises(ExpressionError, match="no fact named 'redis'"):
        value("redis.hit_ratio < 0.8", {"gpu": {}})


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("gpu.nope > 1", r"no such key 'nope' \(test for it with has"),
        ("pods[5].name == 'x'", "list index out of range"),
        ("gpu.count + 'a'", "type mismatch"),
        ("gpu.count / 0 > 1", "^division by zero$"),
        ("gpu.count % 0 > 1", "^modulo by zero$"),
        ("9223372036854775807 + gpu.count > 0", "integer overflow"),
        ("alert.labels.pod.split('-')", "unknown function or name 'split'"),
        ("pods.exists(p, p.ready) && p.ready", "unknown function or name 'p'"),
    ],
)
def test_evaluation_errors_are_expression_errors(text: str, message: str) -> None:
    with pytest.raises(ExpressionError, match=message):
        value(text)


def test_expect_must_be_bool() -> None:
    assert evaluate_bool(compiled("gpu.count == 8"), FACTS) is True
    with pytest.raises(ExpressionError, match="must give true or false, but gave int 8"):
        evaluate_bool(compiled("gpu.count"), FACTS)
    with pytest.raises(ExpressionError, match="gave null"):
        evaluate_bool(compiled("pods[0].last_termination_reason"), FACTS)


def test_ints_stay_int_and_floats_stay_double() -> None:
    assert value("gpu.count") == 8
    assert isinstance(value("gpu.count"), int)
    assert isinstance(value("steps.queue.output.waiting"), float)
    assert value("type(gpu.count) == int && type(steps.queue.output.waiting) == double")


def test_int_and_double_compare_numerically_but_do_not_mix_in_arithmetic() -> None:
    # Heterogeneous comparison, as this binding (and recent CEL specs) do it.
    assert value("1 < 1.5") is True
    assert value("gpu.count == 8.0") is True
    assert value("steps.queue.output.waiting > steps.queue.output.threshold") is True
    # Arithmetic does not convert: an explicit double() is needed.
    with pytest.raises(ExpressionError, match="type mismatch"):
        value("gpu.count + 0.5")
    assert value("double(gpu.count) + 0.5") == 8.5
    assert value("7 / 2") == 3


def test_string_size_counts_utf8_bytes_in_this_binding() -> None:
    # The CEL spec (and cel-python) say 5 code points; recorded so a binding upgrade shows up.
    assert value("size('héllo')") == 6


def test_importing_the_module_does_not_import_the_binding() -> None:
    code = "import sys, oncall.checklist.expressions; print('cel' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=200))
def test_arbitrary_text_only_ever_raises_expression_error(text: str) -> None:
    try:
        result = compile_expression(text, names=NAMES)
    except ExpressionError as exc:
        assert exc.column is None or 1 <= exc.column <= len(text) + 1
    else:
        assert isinstance(result, CompiledExpression)


_TOKENS = st.sampled_from(
    [
        *NAMES,
        *("p", ".", "(", ")", "[", "]", "'x'", "1", "2.5", "&&", "||", "!", "?", ":", ","),
        *("==", "<", "+", "/", "size", "has", "exists", "filter", "null", "true", " "),
    ]
)


@settings(max_examples=300, deadline=None)
@given(st.lists(_TOKENS, max_size=25).map("".join))
def test_token_soup_compiles_and_evaluates_or_raises_expression_error(text: str) -> None:
    with contextlib.suppress(ExpressionError):
        compile_expression(text, names=NAMES).evaluate(FACTS)
