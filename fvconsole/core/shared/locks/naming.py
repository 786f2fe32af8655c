"""Which lock a directory has: one name for it, however it was reached (issue 37 item 1).

Why: a lock named after the path it was given is one lock per spelling. ``prune ALIAS`` (ALIAS a
symlink to OUT) took ``.ALIAS.fvconsole-lock`` and ran beside a prune of OUT, removing that
prune's live leftover; ``prune '~/out' --yes`` took ``CWD/~/.out.fvconsole-lock``. Every lock of
a directory is named from :func:`real_directory`: ``~`` expanded, then the real path, every
symlink resolved (the last component too, so a symlink to a directory names its target's lock;
a directory that does not exist yet keeps the name given for what does not exist).
"""

from __future__ import annotations

import os

from fvconsole.core.shared.fsutil import real


def real_directory(path: str) -> str:
    """The one name of directory ``path``: ``~`` expanded, then its real path (``fsutil.real``, the rule
    FastVideo compares dataset roots by; a prune names its scan by this too)."""
    return real(path)


def lock_file_beside(directory: str, tag: str) -> str:
    """The lock file of ``directory``: ``.<real name><tag>`` beside its real path, never inside it."""
    parent, name = os.path.split(real_directory(directory).rstrip(os.sep) or os.sep)
    return os.path.join(parent, f".{name}{tag}")
