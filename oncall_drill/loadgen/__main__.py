"""`python -m oncall_drill.loadgen ...`: run the drill load once and print its summary (cli.py)."""

from __future__ import annotations

import sys

from oncall_drill.loadgen.cli import main

if __name__ == "__main__":
    sys.exit(main())
