"""`$(VAR)` expansion as the kubelet does it (Kubernetes docs, "Define a command and arguments
for a container"; the kubelet's third_party/forked/golang/expansion)."""

from __future__ import annotations

import pytest

from oncall.model.kube_expansion import Env, expand

ENV = Env(values={"A": "1", "MODEL": "qwen"}, opaque=frozenset({"TOKEN"}))


@pytest.mark.parametrize(
    ("text", "expanded"),
    [
        ("$(A)", "1"),
        ("x$(A)y$(MODEL)", "x1yqwen"),
        ("$(NOPE)", "$(NOPE)"),  # undefined: left as written
        ("$$(A)", "$(A)"),  # escaped: not expanded
        ("$$$(A)", "$1"),
        ("$(A", "$(A"),  # incomplete reference
        ("$A", "$A"),
        ("cost $", "cost $"),
        ("", ""),
    ],
)
def test_expansion_rules(text: str, expanded: str) -> None:
    assert expand(text, ENV).text == expanded


def test_names_are_classified() -> None:
    result = expand("$(A) $(TOKEN) $(NOPE) $(A)", ENV)
    assert (result.resolved, result.unresolved, result.undefined) == (("A",), ("TOKEN",), ("NOPE",))
    with_env_from = expand("$(NOPE)", Env(has_env_from=True))
    assert (with_env_from.unresolved, with_env_from.undefined) == (("NOPE",), ())


def test_spec_span_maps_literal_text_back_and_refuses_variable_text() -> None:
    text = "--x=$(A) --y=64"
    result = expand(text, ENV)
    assert result.text == "--x=1 --y=64"
    start = result.text.index("64")
    span = result.spec_span(start, start + 2)
    assert span is not None and text[span[0] : span[1]] == "64"
    assert result.spec_span(4, 5) is None  # the "1" came from $(A)
    escaped = expand("6$$4", ENV)
    assert escaped.text == "6$4" and escaped.spec_span(0, 3) is None


def test_env_values_see_only_earlier_entries_and_value_from_is_opaque() -> None:
    env = Env.of_container(
        {
            "env": [
                {"name": "B", "value": "$(A)-b"},  # A is not defined yet: stays literal
                {"name": "A", "value": "a"},
                {"name": "C", "value": "$(A)-c"},
                {"name": "S", "valueFrom": {"secretKeyRef": {"name": "s", "key": "k"}}},
                {"value": "no name"},
            ],
            "envFrom": [{"configMapRef": {"name": "cm"}}],
        }
    )
    assert dict(env.values) == {"B": "$(A)-b", "A": "a", "C": "a-c"}
    assert env.opaque == {"S"} and env.has_env_from
