"""`fvconsole cache` (placeholder: registers nothing yet)."""

from __future__ import annotations

import argparse


def register(sub: argparse._SubParsersAction) -> None:
    """Add this command's parser to `sub`."""
