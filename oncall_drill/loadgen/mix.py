"""The request mix of the source articles' drills (docs/drill.md): what each arrival sends.

Kinds and weights: short 60%, long 15%, multi-step 10% (one session of 2–4 turns), low-quality
10% (the gateway rejects them), boundary 5% (half empty prompts, half exactly at the prompt
limit). `MixGenerator` is seeded, so a run is reproducible and the proportions testable.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

KINDS = ("short", "long", "multi_step", "low_quality", "boundary")
WEIGHTS = (0.60, 0.15, 0.10, 0.10, 0.05)
MIX = dict(zip(KINDS, WEIGHTS, strict=True))

_VERBS = ("reset", "change", "export", "delete", "find", "update", "share", "download")
_NOUNS = (
    "password", "invoice", "API key", "billing address", "usage report", "team settings",
    "payment method", "chat history", "rate limit", "account email",
)  # fmt: skip
#: Share of short prompts that are one of the popular questions, Zipf-weighted.
POPULAR_SHARE = 0.95
_POPULAR = tuple((verb, noun) for noun in ("password", "invoice", "API key") for verb in _VERBS[:8])
_POPULAR_WEIGHTS = tuple(1.0 / (rank + 1) for rank in range(len(_POPULAR)))


def popular_prompts() -> list[str]:
    """The popular questions, as `short_prompt` words them (what a warm cache holds)."""
    return [f"How do I {verb} my {noun}?" for verb, noun in _POPULAR]


_ENDINGS = ("", " quickly", " on mobile", " for my team", " after the upgrade")
_SENTENCES = (
    "Our team runs a customer support assistant on top of a hosted language model.",
    "Last week the latency of answers doubled during the afternoon peak.",
    "We suspect the retrieval step, because the vector database was reindexed on Monday.",
    "The invoices for the last quarter also show more tokens than we expected.",
    "Please explain which settings control the number of concurrent requests.",
    "We would also like to know how caching of identical questions works.",
    "Some users report that long conversations lose track of earlier questions.",
    "Describe the steps to diagnose this and the numbers we should look at first.",
)
_FOLLOW_UPS = (
    "Can you give more detail on the second step?",
    "What if that does not work?",
    "How long does that usually take?",
    "Is there a way to automate it for the whole team?",
    "Thanks, and where do I see the result?",
)
_LOW_QUALITY = (
    ("asdf", 5),
    ("lol", 6),
    ("hmm", 4),
    ("???", 3),
    ("!!!", 4),
    ("aaaaaaaaaaaa", 1),
    ("12345", 3),
)


@dataclass(frozen=True)
class Turn:
    """One HTTP request of a scenario."""

    prompt: str
    session: str | None = None


@dataclass(frozen=True)
class Scenario:
    """What one arrival sends: a kind and its turns (several only for multi-step)."""

    kind: str
    turns: tuple[Turn, ...]


class MixGenerator:
    """Seeded source of scenarios in the drill mix."""

    def __init__(self, seed: int | None = None, prompt_limit: int = 4000) -> None:
        if prompt_limit < 1:
            raise ValueError("prompt_limit must be >= 1")
        self.rng = random.Random(seed)  # noqa: S311 - load shape, not crypto
        self.prompt_limit = prompt_limit
        self._sessions = 0

    def next(self) -> Scenario:
        """The next scenario, its kind drawn with the mix weights."""
        kind = self.rng.choices(KINDS, weights=WEIGHTS)[0]
        return Scenario(kind, self.turns(kind))

    def turns(self, kind: str) -> tuple[Turn, ...]:
        """The requests of one scenario of kind."""
        rng = self.rng
        if kind == "short":
            return (Turn(self.short_prompt()),)
        if kind == "long":
            count = rng.randint(8, 24)
            text = " ".join(rng.choice(_SENTENCES) for _ in range(count))
            return (Turn(text[: self.prompt_limit]),)
        if kind == "multi_step":
            self._sessions += 1
            session = f"drill-{rng.getrandbits(32):08x}-{self._sessions}"
            follow = rng.sample(_FOLLOW_UPS, rng.randint(1, 3))
            return tuple(Turn(p, session) for p in (self.short_prompt(), *follow))
        if kind == "low_quality":
            word, times = rng.choice(_LOW_QUALITY)
            return (Turn(" ".join([word] * times)),)
        if kind == "boundary":
            return (Turn("" if rng.random() < 0.5 else self.at_limit_prompt()),)
        raise ValueError(f"unknown kind {kind!r}")

    def short_prompt(self) -> str:
        """A one-line support question: mostly the popular few (as real FAQ traffic is, which
        is what makes a response cache pay), sometimes a rare combination."""
        rng = self.rng
        if rng.random() < POPULAR_SHARE:
            verb, noun = rng.choices(_POPULAR, weights=_POPULAR_WEIGHTS)[0]
            return f"How do I {verb} my {noun}?"
        verb, noun, end = rng.choice(_VERBS), rng.choice(_NOUNS), rng.choice(_ENDINGS)
        return f"How do I {verb} my {noun}{end}?"

    def at_limit_prompt(self) -> str:
        """A varied text of exactly `prompt_limit` characters (the longest accepted prompt)."""
        parts: list[str] = []
        length = 0
        for _ in range(self.prompt_limit):  # bounded: each sentence adds > 1 character
            if length >= self.prompt_limit:
                break
            sentence = self.rng.choice(_SENTENCES)
            length += len(sentence) + (1 if parts else 0)  # the joining space
            parts.append(sentence)
        return " ".join(parts)[: self.prompt_limit]
