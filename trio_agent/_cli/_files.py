"""Opening the files the program reads (session files, images) without surprises."""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import BinaryIO

__all__ = ["NotARegularFileError", "open_regular_file"]


class NotARegularFileError(OSError):
    """:func:`open_regular_file` found a FIFO, a device, a directory, ..."""


def open_regular_file(path: Path) -> BinaryIO:
    """Open ``path`` for reading in binary mode if it is a regular file (links followed).

    Opening never blocks: a FIFO is opened without waiting for a writer, then refused.

    Raises:
        NotARegularFileError: ``path`` is not a regular file (its ``strerror`` says
            what it is).
        OSError: it cannot be opened.
    """
    nonblocking = getattr(os, "O_NONBLOCK", 0)
    fd = os.open(path, os.O_RDONLY | nonblocking | getattr(os, "O_CLOEXEC", 0))
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            problem = "is a directory" if stat.S_ISDIR(mode) else "is not a regular file"
            raise NotARegularFileError(0, problem, str(path))
        if nonblocking:
            os.set_blocking(fd, True)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise
