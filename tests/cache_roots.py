"""The cache root refusal in the command line's words, for the tests of roots and of eviction plans.

``dangerous_root_reason`` is a test helper, not a name of the package (it was
``core/cache/roots.py``'s until the tests worded ``root_refusal`` themselves): the tests
state what each root must give, by hand, and read the refusal through it.
"""

from __future__ import annotations

from fvconsole.core.cache.roots import root_refusal


def dangerous_root_reason(real_root: str, has_entries: bool, force: bool) -> str | None:
    """``root_refusal`` of a resolved root in the command line's words, or None."""
    why = root_refusal(real_root, real_root, has_entries, force)
    return None if why is None else why.cli
