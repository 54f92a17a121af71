"""Canned answers of the degraded levels (DESIGN §2): FAQ entries (level 2), a static page (3).

Level 2 answers from a small structured FAQ without the LLM: the entry whose keywords overlap
the prompt most, else a generic entry. Level 3 serves the same static page to everyone.
"""

from __future__ import annotations

import re
from dataclasses import dataclass


@dataclass(frozen=True)
class FaqEntry:
    """One structured answer."""

    id: str
    keywords: frozenset[str]
    question: str
    answer: str


FAQ: tuple[FaqEntry, ...] = (
    FaqEntry(
        "password-reset",
        frozenset({"password", "reset", "login", "account", "sign"}),
        "How do I reset my password?",
        "Open Settings → Security → Reset password; a link is mailed to you.",
    ),
    FaqEntry(
        "billing",
        frozenset({"bill", "billing", "invoice", "payment", "refund", "charge"}),
        "Where are my invoices?",
        "Invoices are under Billing → History; refunds take 5–7 business days.",
    ),
    FaqEntry(
        "limits",
        frozenset({"limit", "quota", "rate", "tokens", "usage"}),
        "What are the usage limits?",
        "Each plan's quota is listed under Usage; limits reset at midnight UTC.",
    ),
    FaqEntry(
        "status",
        frozenset({"down", "outage", "status", "slow", "error", "broken"}),
        "Is the service down?",
        "We are running in a reduced mode; see the status page for updates.",
    ),
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
