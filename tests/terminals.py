"""Reading what a child process wrote to a pseudo-terminal, for tests that run the CLI on one."""

from __future__ import annotations

import os


def read_until_closed(leader: int) -> bytes:
    """Everything the terminal received until the child closed it (EIO or end of file); ``leader`` is closed after."""
    chunks = []
    try:
        while True:
            try:
                data = os.read(leader, 65536)
            except OSError:  # EIO: the child closed the terminal
                break
            if not data:
                break
            chunks.append(data)
    finally:
        os.close(leader)
    return b"".join(chunks)
