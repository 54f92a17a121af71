"""Unit tests of the simulator's pure parts: selectors and the three patch dialects."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from oncall_drill.kube_sim import patch
from oncall_drill.kube_sim.errors import ApiError
from oncall_drill.kube_sim.selectors import labels_match, parse_field_selector, parse_label_selector
from tests.drill.kube.conftest import StrictCheck

LABELS = {"app": "vllm", "tier": "gpu"}


@pytest.mark.parametrize(
    ("selector", "matches"),
    [
        ("", True),
        ("app=vllm", True),
        ("app=other", False),
        ("app!=other", True),
        ("missing!=x", True),
        ("app in (vllm, x)", True),
        ("app notin (vllm)", False),
        ("missing notin (x)", True),
        ("tier,app", True),
        ("!tier", False),
        ("app in (a,b),tier=gpu", False),
        ("app in (vllm,b),tier=gpu", True),
    ],
)
def test_label_selector(selector: str, matches: bool) -> None:
    assert labels_match(parse_label_selector(selector), LABELS) is matches


@pytest.mark.parametrize(
    ("selector", "message"),
    [
        ("app = = x", "unable to parse requirement: found '=', expected: identifier"),
        ("a in (x", "unable to parse requirement: found '', expected: ',' or ')'"),
        ("app in vllm", "unable to parse requirement: found 'vllm' expected: '('"),
        ("a=b c", "found 'c', expected: ',' or 'end of string'"),
        ("a,", "found '', expected: identifier after ','"),
        ("!a=b", "found '=', expected: ',' or 'end of string'"),
        ("a ! b", "unable to parse requirement: found '!', expected: in, notin, =, ==, !=, gt, lt"),
    ],
)
def test_bad_label_selector(selector: str, message: str) -> None:
    """labels.Parse's messages (k8s.io/apimachinery pkg/labels/selector.go), as a 400."""
    with pytest.raises(ApiError) as err:
        parse_label_selector(selector)
    assert (err.value.code, err.value.message) == (400, message)


def test_bad_label_key_and_value_name_the_rule() -> None:
    with pytest.raises(ApiError) as err:
        parse_label_selector("-bad=x")
    assert err.value.message.startswith(
        'unable to parse requirement: <nil>: Invalid value: "-bad": name part must consist of'
    )
    with pytest.raises(ApiError) as err:
        parse_label_selector("app=-x")
    assert err.value.message.startswith(
        'unable to parse requirement: values[0][app]: Invalid value: "-x": a valid label must'
    )


@pytest.mark.parametrize(
    ("selector", "labels", "matches"),
    [
        ("app in ()", {"app": ""}, True),  # "()" is the set {""}, as upstream parses it
        ("app in ()", LABELS, False),
        ("app=", {"app": ""}, True),
        ("x in (in,notin)", {"x": "in"}, True),  # keywords are values in a value context
        ("gen>3", {"gen": "4"}, True),
        ("gen<3", {"gen": "4"}, False),
        ("gen>3", {"gen": "four"}, False),
    ],
)
def test_label_selector_edges(selector: str, labels: dict[str, str], matches: bool) -> None:
    assert labels_match(parse_label_selector(selector), labels) is matches


def test_field_selector_allow_list() -> None:
    (req,) = parse_field_selector("status.phase!=Running", ("status.phase",))
    assert req.negate and req.matches({"status": {"phase": "Pending"}})
    with pytest.raises(ApiError):
        parse_field_selector("spec.x=1", ("status.phase",))


DOC: dict[str, Any] = {
    "spec": {
        "containers": [
            {
                "name": "vllm",
                "image": "a",
                "args": ["--x", "1"],
                "ports": [{"containerPort": 8000}],
            },
            {"name": "sidecar", "image": "b"},
        ]
    }
}


def test_json_patch_is_atomic() -> None:
    ops = [
        {"op": "replace", "path": "/spec/containers/0/image", "value": "z"},
        {"op": "test", "path": "/spec/containers/0/args/1", "value": "2"},
    ]
    with pytest.raises(patch.PatchNotApplicable, match="testing value /spec/containers/0/args/1"):
        patch.apply_json_patch(DOC, ops)
    assert DOC["spec"]["containers"][0]["image"] == "a"


def test_json_patch_operations() -> None:
    ops = [
        {"op": "add", "path": "/spec/containers/0/args/-", "value": "--y"},
        {"op": "remove", "path": "/spec/containers/1"},
        {"op": "copy", "from": "/spec/containers/0/image", "path": "/spec/image"},
        {"op": "move", "from": "/spec/image", "path": "/spec/img~1x"},
    ]
    out = patch.apply_json_patch(DOC, ops)
    assert out["spec"]["containers"][0]["args"] == ["--x", "1", "--y"]
    assert len(out["spec"]["containers"]) == 1
    assert out["spec"]["img/x"] == "a" and "image" not in out["spec"]
    with pytest.raises(patch.PatchMalformed):
        patch.apply_json_patch(DOC, {"op": "add"})
    with pytest.raises(patch.PatchNotApplicable):
        patch.apply_json_patch(DOC, [{"op": "replace", "path": "/nope/x", "value": 1}])


@pytest.mark.parametrize(
    "ops",
    [
        [{"op": "add", "path": "/spec/x"}],  # no value
        [{"op": "test", "path": "/spec"}],  # no value
        [{"op": "move", "path": "/spec/x"}],  # no from
        [{"op": "frobnicate", "path": "/spec"}],
        [{"path": "/spec"}],  # no op
        ["not an operation"],
        {"op": "add", "path": "/spec/x", "value": 1},  # an object, not a list
    ],
)
def test_malformed_json_patch_is_400(ops: Any) -> None:
    with pytest.raises(patch.PatchMalformed):
        patch.apply_json_patch(DOC, ops)


@pytest.mark.parametrize(
    "op",
    [
        {"op": "test", "path": "/spec/containers/0/name", "value": "other"},
        {"op": "test", "path": "/spec/missing", "value": 1},
        {"op": "remove", "path": "/spec/missing"},
        {"op": "replace", "path": "/spec/containers/5", "value": {}},
        {"op": "add", "path": "/spec/containers/7", "value": {}},  # past the end
        {"op": "add", "path": "/spec/containers/x", "value": {}},  # not an index
        {"op": "copy", "from": "/spec/nothing", "path": "/spec/x"},
        {"op": "add", "path": "spec/x", "value": 1},  # not a JSON pointer
        {"op": "replace", "path": "", "value": [1]},  # the object becomes a list
    ],
)
def test_json_patch_that_does_not_apply_is_422(op: dict[str, Any]) -> None:
    with pytest.raises(patch.PatchNotApplicable):
        patch.apply_json_patch(DOC, [op])


def test_strategic_merge_patch_merge_keys_and_directives() -> None:
    out = patch.apply_strategic_merge_patch(
        DOC,
        {
            "spec": {
                "containers": [
                    {"name": "vllm", "args": ["--z"], "ports": [{"containerPort": 9000}]},
                    {"name": "sidecar", "$patch": "delete"},
                    {"name": "new", "image": "n"},
                ]
            }
        },
    )
    vllm, new = out["spec"]["containers"]
    assert vllm["args"] == ["--z"]  # replaced wholesale
    assert vllm["image"] == "a"
    assert vllm["ports"] == [{"containerPort": 8000}, {"containerPort": 9000}]
    assert new == {"name": "new", "image": "n"}
    assert DOC["spec"]["containers"][1]["name"] == "sidecar"  # input untouched


def test_merge_patch_replaces_lists_and_deletes_nulls() -> None:
    out = patch.apply_merge_patch(DOC, {"spec": {"containers": [{"name": "only"}], "x": None}})
    assert out == {"spec": {"containers": [{"name": "only"}]}}


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=5),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=3), inner, max_size=3)
    ),
    max_leaves=10,
)
json_docs = st.dictionaries(st.text(min_size=1, max_size=4), json_values, max_size=4)


@settings(max_examples=60, deadline=None)
@given(json_docs)
def test_empty_patches_change_nothing(doc: dict[str, Any]) -> None:
    assert patch.apply_merge_patch(doc, {}) == doc
    assert patch.apply_json_patch(doc, []) == doc


@settings(max_examples=60, deadline=None)
@given(json_docs, json_docs)
def test_merge_patch_sets_every_non_null_key(doc: dict[str, Any], changes: dict[str, Any]) -> None:
    out = patch.apply_merge_patch(doc, changes)
    for key, value in changes.items():
        if value is None:
            assert key not in out
        elif not isinstance(value, dict):
            assert out[key] == value


def test_strict_check_catches_unknown_fields() -> None:
    checker = StrictCheck()
    checker.check("V1Pod", b'{"metadata": {"name": "x", "bogus": 1}}')
    assert checker.problems and checker.checked == 0
    checker = StrictCheck()
    checker.check("V1Pod", b'{"metadata": {"name": "x"}}')
    assert not checker.problems and checker.checked == 1


def test_field_selector_escapes_as_apimachinery() -> None:
    """fields.ParseSelector: `\\,` `\\=` `\\\\` stand for themselves in a value, a bare `,`
    splits terms, a bare `=` in a value or an unknown escape is a 400, empty terms are
    skipped, and nothing is trimmed (a spaced field is an unsupported one)."""
    allowed = ("metadata.name", "spec.nodeName")
    (req,) = parse_field_selector(r"metadata.name=a\,b\=c\\d", allowed)
    assert (req.path, req.value, req.negate) == ("metadata.name", "a,b=c\\d", False)
    # The first operator in the term wins: `!=` is not looked for past an earlier `=`.
    (req,) = parse_field_selector("spec.nodeName!=x", allowed)
    assert req.negate and req.value == "x"
    two = parse_field_selector("metadata.name=a,,spec.nodeName==gpu-1,", allowed)
    assert [(r.path, r.value) for r in two] == [("metadata.name", "a"), ("spec.nodeName", "gpu-1")]
    for bad, said in (
        ("metadata.name=a=b", "unescaped character in value: 61"),  # %v of a rune
        (r"metadata.name=a\x", r"invalid escape sequence: \x"),
        ("metadata.name=a\\", "invalid escape sequence: \\"),
        ("metadata.name = a", "field label not supported: metadata.name "),
        ("metadata.name", "can't understand 'metadata.name'"),
    ):
        with pytest.raises(ApiError) as caught:
            parse_field_selector(bad, allowed)
        assert caught.value.code == 400 and said in caught.value.message, (bad, caught.value)
