"""Argument types shared by the commands that run an action (`remediate`, `ack`, `silence`):
each value checked as the action's parameters model will check it, so that a bad one is a
usage error naming the argument, as argparse's own are.

Light on purpose: the commands' parsers are built on every start; pydantic and the models
are imported when a value is first checked, not when this module is.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any


def param_argument(action: str, field: str) -> Callable[[str], Any]:
    """An argparse `type` checking one parameter as the action's model will check it, so that
    a bad value (empty, blank, a NUL byte, too long, not an id) is a usage error naming the
    argument, as argparse's own are, not a pydantic report later. The models (pydantic) are
    imported on the first call, not when the parser is built."""

    def check(text: str) -> Any:
        from pydantic import ValidationError

        from oncall.model.action_params import ACTION_PARAMS

        model = ACTION_PARAMS[action]
        info = model.model_fields[field]
        value: Any = _int_argument(text) if info.annotation is int else text
        try:
            # The field's own validators (bounds, pattern, field_validator), without the others.
            model.__pydantic_validator__.validate_assignment(model.model_construct(), field, value)
        except ValidationError as exc:
            raise argparse.ArgumentTypeError(_why(text, exc, info.description)) from None
        return value  # as given: the model normalises it (strips a note) when it is built

    return check


def _why(text: str, exc: Any, description: str | None) -> str:
    """A pydantic error about `text` in a person's words, the value shown escaped and cut."""
    error = exc.errors()[0]
    shown = repr(text) if len(text) <= 40 else f"{text[:37]!r}… ({len(text)} characters)"
    if error["type"] == "string_pattern_mismatch":
        what = (description or "a valid value").rstrip(".")
        return f"{shown} is not {what[:1].lower()}{what[1:]} (must match {error['ctx']['pattern']})"
    message = str(error["msg"]).removeprefix("Value error, ")
    return f"{shown}: {message[:1].lower()}{message[1:]}"


def _int_argument(text: str) -> int:
    # argparse's int() reads any Unicode digit ("٣" → 3): ASCII digits only, a usage error else.
    from oncall.model.action_params import ascii_int

    try:
        return ascii_int(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from exc
