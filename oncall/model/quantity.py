"""Kubernetes resource quantities (`500m`, `64Gi`, `1`, `1e3`) read exactly, never trusted.

The apiserver's grammar (apimachinery `resource.ParseQuantity`): an optional sign, a decimal
number, then a binary suffix (Ki Mi Gi Ti Pi Ei), a decimal one (n u m k M G T P E) or an
exponent (`e3`, `E-2`). A value read off a Node or a pod template (a seed file, a hostile or
broken API answer) that is not such a quantity is a `QuantityError` naming the value, so the
node-fit check (oncall/model/node_fit.py) says "malformed" instead of raising a traceback or
reading it as 0. Values are `Decimal`s: `0.1` cpu is exactly a tenth, and a huge exponent
(`1e999999`) is compared, never expanded into a billion-digit integer.
"""

from __future__ import annotations

import re
from decimal import Decimal, InvalidOperation

_QUANTITY = re.compile(
    r"(?P<number>[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+))"
    r"(?P<suffix>Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE]|[eE][+-]?[0-9]+)?"
)
_BINARY = {"Ki": 1, "Mi": 2, "Gi": 3, "Ti": 4, "Pi": 5, "Ei": 6}
_DECIMAL = {"n": -9, "u": -6, "m": -3, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}
#: Longer than any quantity a real object holds; a longer string is refused before parsing.
MAX_CHARS = 64
#: The apiserver refuses exponents past this (apimachinery's scale limits).
MAX_EXPONENT = 1000


class QuantityError(ValueError):
    """Not a Kubernetes quantity; the message quotes the value (shortened)."""


def parse_quantity(value: object) -> Decimal:
    """The quantity's value (`"500m"` → 0.5, `"1Gi"` → 1073741824); QuantityError otherwise.

    An int is taken as it is (YAML `nvidia.com/gpu: 1`); a bool, float or anything else is not
    a quantity the apiserver would have stored."""
    if isinstance(value, bool) or not isinstance(value, int | str):
        raise QuantityError(f"not a quantity: {_shown(value)}")
    text = str(value).strip()
    if len(text) > MAX_CHARS:
        raise QuantityError(f"not a quantity: {_shown(value)} (over {MAX_CHARS} characters)")
    found = _QUANTITY.fullmatch(text)
    if found is None:
        raise QuantityError(f"not a quantity: {_shown(value)}")
    try:
        number = Decimal(found["number"])
    except InvalidOperation as exc:  # the pattern admits only decimals; kept for safety
        raise QuantityError(f"not a quantity: {_shown(value)}") from exc
    suffix = found["suffix"] or ""
    if suffix in _BINARY:
        return number * (Decimal(1024) ** _BINARY[suffix])
    if suffix in _DECIMAL:
        return number.scaleb(_DECIMAL[suffix])
    if suffix:
        exponent = int(suffix[1:])
        if abs(exponent) > MAX_EXPONENT:
            raise QuantityError(f"not a quantity: {_shown(value)} (exponent out of range)")
        return number.scaleb(exponent)
    return number


def format_quantity(resource: str, value: Decimal) -> str:
    """How a person reads an amount: memory in Gi, cpu in cores, anything else as a count."""
    if resource == "memory" or resource.endswith("storage"):
        return f"{_plain(value / (Decimal(1024) ** 3))}Gi"
    return _plain(value)


def _plain(value: Decimal) -> str:
    if value == value.to_integral_value():
        return str(int(value)) if abs(value) < Decimal(10) ** 30 else f"{value:.3E}"
    return f"{value:.3f}".rstrip("0").rstrip(".")


def _shown(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 40 else f"{text[:37]}..."
