"""What `tui.py`, its parts and its child processes share: constants, RSS, the child's argv.

Only the standard library: the child processes import this, and their start-up is measured.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKS = ("ai-service", "platform")
ONCALL = str(Path(sys.executable).parent / "oncall")
WIDTH, HEIGHT = 80, 24
RUN_DEADLINE_S = 30.0  # one start-up run, one wait for the board's rows
SAMPLE_EVERY_S = 10.0
ENTRY = Path(__file__).resolve().with_name("tui.py")  # the children run this file


def rss_mb() -> float:
    """This process's resident set size (/proc/self/statm: pages)."""
    resident = int(Path("/proc/self/statm").read_text().split()[1])
    return resident * os.sysconf("SC_PAGE_SIZE") / 2**20


def child_argv(*args: str) -> list[str]:
    return [sys.executable, str(ENTRY), "_child", *args]
