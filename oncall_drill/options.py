"""Option dataclasses filled from an argparse namespace.

The drill's commands (`oncall drill up`, the load generator) name their flags after the fields
of the options they build (`--for-scale` → `UpOptions.for_scale`), so a new flag reaches its
field without a line of copying; only a flag named otherwise, or one whose value needs
converting, is passed by hand.
"""

from __future__ import annotations

import argparse
import dataclasses
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

T = TypeVar("T", bound="DataclassInstance")


def from_args(cls: type[T], args: argparse.Namespace, **values: Any) -> T:
    """A `cls` whose fields take the namespace's attribute of the same name where it has one,
    and `values` over those; any other field keeps its default."""
    given = vars(args)
    named = {f.name: given[f.name] for f in dataclasses.fields(cls) if f.name in given}
    return cls(**(named | values))
