"""Canned answers of the degraded levels (docs/drill.md): FAQ entries (level 2), a static page (3).

Level 2 answers from a small structured FAQ (`faq.json`) without the LLM: the entry whose
keywords overlap the prompt most, else a generic entry. Level 3 serves the same static page to
everyone.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class FaqEntry:
    """One structured answer."""

    id: str
    keywords: frozenset[str]
    question: str
    answer: str


#: Level 2's entries: content, kept in faq.json beside this module (the first with the most
#: keywords in common wins a tie, so the file's order matters).
FAQ: tuple[FaqEntry, ...] = tuple(
    FaqEntry(row["id"], frozenset(row["keywords"]), row["question"], row["answer"])
    for row in json.loads(Path(__file__).with_name("faq.json").read_text(encoding="utf-8"))
)
GENERIC = FaqEntry(
    "generic",
    frozenset(),
    "Anything else",
    "The assistant is temporarily limited to frequently asked questions; please try later.",
)

STATIC_PAGE = (
    "<!doctype html><html><head><title>Service temporarily unavailable</title></head>"
    "<body><h1>We'll be right back</h1><p>The assistant is under maintenance. "
    "Please try again later.</p></body></html>"
)

_WORD_RE = re.compile(r"[a-z]+")


def faq_answer(prompt: str) -> FaqEntry:
    """The FAQ entry that matches prompt best (GENERIC when none shares a keyword)."""
    words = set(_WORD_RE.findall(prompt.lower()))
    best, best_score = GENERIC, 0
    for entry in FAQ:
        score = len(words & entry.keywords)
        if score > best_score:
            best, best_score = entry, score
    return best
