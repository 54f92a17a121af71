"""`{{ CEL | spec }}` templates: the `join` spec writes a list as words."""

from __future__ import annotations

import pytest

from oncall.checklist.expressions import ExpressionError
from oncall.checklist.templates import compile_template

#: Events as the kube.events probe reports them (Kubernetes core/v1 Event: type, reason).
EVENTS = [
    {"type": "Warning", "reason": "BackOff", "count": 4},
    {"type": "Normal", "reason": "Created", "count": 1},
    {"type": "Warning", "reason": "OOMKilling", "count": 1},
]


def render(text: str, facts: object) -> object:
    return compile_template(text, names={"facts"}).render({"facts": facts})


def test_join_writes_a_list_as_words() -> None:
    facts = {"reasons": ["BackOff", "Created"], "none": [], "n": [1, 2.5, None]}
    assert render("reasons: {{ facts.reasons | join }}", facts) == "reasons: BackOff, Created"
    assert render("{{ facts.none | join }}", facts) == "none"
    assert render("{{ facts.n | join }}", facts) == "1, 2.5, n/a"
    assert render("was {{ facts.reasons }}", facts) == "was ['BackOff', 'Created']"  # no spec


def test_join_of_only_the_warnings_an_oom_summary_counts() -> None:
    summary = (
        "{{ size(facts.events.filter(e, e.type == 'Warning')) }} warning events: "
        "{{ facts.events.filter(e, e.type == 'Warning').map(e, e.reason) | join }}"
    )
    assert render(summary, {"events": EVENTS}) == "2 warning events: BackOff, OOMKilling"


def test_join_of_something_else_is_an_error() -> None:
    with pytest.raises(ExpressionError, match="join applies to a list"):
        render("{{ facts.x | join }}", {"x": 3})
