"""What a CEL expression may cost to evaluate: a bound from its shape and the facts it is given.

CEL has no loops, but its comprehension macros (`all`, `exists`, `exists_one`, `map`,
`filter`) nest: each iterates its range once per iteration of every macro around it, so 950
characters of nested `map`s over a ten-element list ran 62 s (docs/audit.md). The binding
(`cel`, a Rust core) has no cost limit and holds the GIL while it evaluates: no thread, timeout
or `q` can interrupt it. So the cost is bounded before evaluation, from what can be known:

- the expression's `Shape`, read from its text when it compiles (string literals blanked):
  how deep its macros nest, how many `+` it has (list concatenation can lengthen a range), and
  how many elements its longest list or map literal may have (its commas + 1);
- the longest list or map among the facts it is handed (`longest`).

`estimate` = length of the text x (longest range)^depth, with the longest range the facts'
longest list times the `+` count, or the literal bound, whichever is larger; depth 0 counts
as 1 (comparing two lists is linear in them). It bounds the steps the evaluation takes, up
to a constant, from above (every character counts as a step of the body). Measured on this
binding: 5 nested maps over ten-element literals, 166 characters, estimate 1.7e7, ran 0.24 s;
6 nested, 197 characters, 2e8: 7 s. Expressions runbooks write
(`facts.pods.all(p, p.ready)` over 8 pods: ~500 units; over 2,000 log lines: ~1e5) are far
below `INLINE_COST`; one past it is evaluated in a separate process that is killed at the
step's deadline (`oncall.checklist.isolated`), and `runbook lint` reports an expression past
`LINT_COST` for lists of `LINT_LIST_LENGTH` elements.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

#: Evaluated in the process (on the event loop): at most ~35 ms by the measures above.
INLINE_COST = 1_000_000
#: Reported by `runbook lint`: over ~1.5 s for ranges of `LINT_LIST_LENGTH` elements.
LINT_COST = 100_000_000
LINT_LIST_LENGTH = 100

_MACRO_CALL = re.compile(r"\.\s*(?:all|exists_one|exists|map|filter)\s*\(")


@dataclass(frozen=True)
class Shape:
    """What bounds an expression's cost, read from its text."""

    length: int
    depth: int  # macros nested in one another, at the deepest
    growth: int  # 1 + the `+` signs: how many lists one range could be concatenated from
    literal: int  # an upper bound on the elements of its longest list literal

    def estimate(self, longest: int) -> float:
        """Steps to evaluate over facts whose longest list or map has `longest` elements."""
        widest = max(1, longest * self.growth, self.literal)
        return float(self.length) * float(widest) ** max(1, self.depth)

    def nesting(self) -> str:
        """'comprehension macros nested 6 deep' for messages."""
        return f"comprehension macros (all, exists, map, filter) nested {self.depth} deep"


def shape_of(plain: str) -> Shape:
    """The shape of an expression whose string literals are blanked out (`plain`)."""
    macro_opens = {match.end() - 1 for match in _MACRO_CALL.finditer(plain)}
    # Per open delimiter, innermost last: does it open a macro's body; commas directly in it.
    opens_macro: list[bool] = []
    commas: list[int] = []
    depth = deepest = literal = 0
    for index, char in enumerate(plain):
        if char in "([{":
            opens_macro.append(index in macro_opens)
            commas.append(0)
            depth += opens_macro[-1]
            deepest = max(deepest, depth)
        elif char in ")]}" and commas:
            depth -= opens_macro.pop()
            literal = max(literal, commas.pop() + 1)
        elif char == "," and commas:
            commas[-1] += 1
    return Shape(len(plain), deepest, 1 + plain.count("+"), literal)
