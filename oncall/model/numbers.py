"""Numbers read from text another system wrote: ASCII digits only, never a traceback.

`str.isdigit` is true for "³" and "²", which `int()` then refuses (ValueError), and for "٣",
which `int()` reads as 3: a hostile or broken backend's label, header or Redis field must not
crash a decode, nor pass for a number it does not spell.
"""

from __future__ import annotations


def ascii_int(text: str) -> int | None:
    """The non-negative integer `text` spells in ASCII digits, else None."""
    return int(text) if text.isascii() and text.isdigit() else None
