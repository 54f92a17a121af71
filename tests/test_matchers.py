"""Label matchers and words: the board filter, `--match` and `alerts.from_prometheus`."""

from __future__ import annotations

import pytest

from oncall.model.matchers import MatcherError, parse_selection


def test_the_four_operators_with_anchored_regexes_and_absent_labels() -> None:
    labels = {"severity": "page", "team": "inference", "alertname": "KubePodNotReady"}
    assert parse_selection('severity="page"').matches(labels)
    assert not parse_selection('severity!="page"').matches(labels)
    assert parse_selection('team=~"infer.*"').matches(labels)
    assert not parse_selection('team=~"infer"').matches(labels)  # anchored, as Prometheus
    assert parse_selection('team!~"db|cache"').matches(labels)
    assert parse_selection('owner=""').matches(labels)  # absent is ""
    assert parse_selection('owner!="x"').matches(labels)
    both = parse_selection('{severity="page", alertname=~"KubePod.*"}')
    assert both.matches(labels) and len(both.matchers) == 2
    assert not both.matches({**labels, "alertname": "Watchdog"})


def test_words_are_text_and_escapes_are_read() -> None:
    selection = parse_selection('severity="page" Crash loop')
    assert selection.words == ("crash", "loop")
    assert selection.matches({"severity": "page"}, "KubePodCrashLooping: crash loop back-off")
    assert not selection.matches({"severity": "page"}, "KubePodNotReady")
    quoted = parse_selection(r'summary="say \"hi\""')
    assert quoted.matchers[0].value == 'say "hi"'
    assert str(parse_selection("{a='x'} word")) == '{a="x"} word'


@pytest.mark.parametrize(
    ("text", "words", "message"),
    [
        ("severity=page", True, "needs quotes"),
        ('team=~"("', True, "invalid regular expression"),
        ('{severity="page"', True, "without its closing"),
        ("{severity page}", True, "not a label matcher"),
        ("page", False, "not a label matcher"),
    ],
)
def test_what_cannot_be_read_is_said(text: str, words: bool, message: str) -> None:
    with pytest.raises(MatcherError, match=message):
        parse_selection(text, words=words)
