"""An argparse parser whose arguments are added only when it is used, for `oncall`'s commands.

`oncall remediate` and `oncall audit` derive their sub-parsers and choices from the actions'
pydantic parameters models (oncall/model/action_params.py): importing and building those costs
a tenth of a second or more of CPU, and every start would pay it while the parser is built —
the app's first frame and every headless `oncall check` included. Each top-level command is a
`LazyParser`; one given `populate` runs it the first time it parses, prints help or prints
usage, which only happens when its command was named on the command line. The top-level
`--help` lists each command by its `help=` string alone, so it needs no population.
"""

from __future__ import annotations

import argparse
import functools
from collections.abc import Callable, Sequence
from typing import Any

Populate = Callable[[argparse.ArgumentParser], None]


def add_lazy_command(
    commands: Any,
    name: str,
    help_text: str,
    populate: Callable[..., None],
    global_options: Callable[..., None],
) -> None:
    """Add the command `name` to the `commands` sub-parsers, its arguments added by
    `populate(parser, global_options=...)` only when it is the command named."""
    commands.add_parser(
        name, help=help_text, populate=functools.partial(populate, global_options=global_options)
    )


class LazyParser(argparse.ArgumentParser):
    """An ArgumentParser that calls `populate(self)` once, just before it is first used."""

    def __init__(self, *args: Any, populate: Populate | None = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._populate = populate

    def populated(self) -> None:
        populate, self._populate = self._populate, None
        if populate is not None:
            populate(self)

    def parse_known_args(  # type: ignore[override]  # typeshed's overloads; one signature here
        self, args: Sequence[str] | None = None, namespace: argparse.Namespace | None = None
    ) -> tuple[argparse.Namespace, list[str]]:
        self.populated()
        return super().parse_known_args(args, namespace)

    def format_help(self) -> str:
        self.populated()
        return super().format_help()

    def format_usage(self) -> str:  # print_usage and error() come through here
        self.populated()
        return super().format_usage()
