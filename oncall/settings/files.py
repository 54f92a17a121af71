"""Refusing what is not a regular file where oncall reads or appends one (docs/audit.md).

A FIFO given as the settings file, a runbook, a rule file or the audit log would block the
open or the read forever; a device would be read or written as if it were the file. Callers
open with O_NONBLOCK (a FIFO then opens at once) and ask `not_regular` of the fstat.
"""

from __future__ import annotations

import stat

_KINDS = (
    (stat.S_ISFIFO, "a FIFO"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
    (stat.S_ISDIR, "a directory"),
    (stat.S_ISLNK, "a symbolic link"),
)


def not_regular(mode: int) -> str | None:
    """What a file of `mode` (st_mode) is when it is not a regular file, else None."""
    if stat.S_ISREG(mode):
        return None
    return next((name for test, name in _KINDS if test(mode)), "not a regular file")
