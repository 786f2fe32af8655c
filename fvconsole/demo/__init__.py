"""Fixture builders and the demo workspace: the only code that needs the ``demo`` extra."""

from __future__ import annotations

from types import ModuleType

from fvconsole.core.shared.optional import require, require_all

#: What building the demo (real DCP checkpoints, Parquet, safetensors) imports.
DEMO_MODULES = ("torch", "torch.distributed.checkpoint", "safetensors.torch", "numpy", "pyarrow.parquet")


def demo_module(name: str) -> ModuleType:
    """``name`` (torch, pyarrow.parquet, ...), or MissingExtra naming the ``demo`` extra."""
    return require(name, extra="demo", purpose="the demo")


def require_demo_extra() -> None:
    """Refuse up front, before anything is built, when a package of the ``demo`` extra is missing."""
    require_all(DEMO_MODULES, extra="demo", purpose="the demo")
