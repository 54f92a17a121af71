"""What the start-up benches measure: oncall as installed, its modules byte-compiled.

`pip install` byte-compiles a package's modules; an editable checkout run with
PYTHONDONTWRITEBYTECODE=1 (as this project's sessions are) compiles every oncall module from
source on each start, ≈ 0.15-0.3 s of CPU that no installed copy pays. The benches compile
the tree first (into the ignored `__pycache__` folders), as the install would have.
"""

from __future__ import annotations

import compileall
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "oncall"


def byte_compile() -> bool:
    """Compile oncall's modules where their cached bytecode is missing or stale; True if all
    compiled (a module with a syntax error would fail its tests anyway)."""
    return bool(compileall.compile_dir(PACKAGE, quiet=1))
