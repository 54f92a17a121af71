"""What the SVG snapshot tests share: the two terminal sizes every screen is pictured at (the
usual 100x30 and the 80x24 minimum) and the type of pytest-textual-snapshot's `snap_compare`."""

from __future__ import annotations

from collections.abc import Callable

import pytest

SIZES = [pytest.param((100, 30), id="100x30"), pytest.param((80, 24), id="80x24")]

#: `snap_compare(app, terminal_size=..., run_before=...)`: True when the picture matches.
Compare = Callable[..., bool]
