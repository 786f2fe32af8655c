"""The one door for packages of an extra: import one, or say in one line which extra to install.

Why: the base install (``pip install fvconsole``) has no torch, safetensors, numpy or pyarrow,
so a login node gets the console and every headless command without gigabytes of wheels.
The few paths that need one (the demo, ``verify --deep``, ``--torch-check``) import it here,
inside the function that needs it; a missing package is an ``FvError`` naming the extra
(``the demo needs torch: pip install 'fvconsole[demo]'``, exit 1), never a traceback.
``tests/architecture/test_doors.py`` checks that no other module imports these packages itself.
"""

from __future__ import annotations

import importlib
import importlib.util
from types import ModuleType

from fvconsole.core.shared.errors import FvError
from fvconsole.core.shared.reasons import reason

#: Each extra and the distributions it adds (the names its imports fail on), as in pyproject.toml.
EXTRAS: dict[str, tuple[str, ...]] = {
    "demo": ("torch", "safetensors", "numpy", "pyarrow"),
    "parquet": ("pyarrow",),
    "torch": ("torch",),
    "fast": ("orjson",),
}


class MissingExtra(FvError):
    """A package of an extra is not installed: the message names the extra to install.

    Its ``reason`` (``extra.missing``) lets a front end word it as any other refusal, e.g. when
    ``--torch-check`` is refused by a migration's execution before it writes.
    """

    kind = "missing_extra"

    def __init__(self, purpose: str, package: str, extra: str) -> None:
        why = reason("extra.missing", "extra", purpose=purpose, package=package, extra=extra)
        super().__init__(why.cli, details={"missing_package": package, "extra": extra}, reason=why)
        self.purpose = purpose
        self.package = package  # one name, or several joined with ", "
        self.extra = extra


def require(module: str, *, extra: str, purpose: str) -> ModuleType:
    """``import module`` (a dotted name is fine), or raise :class:`MissingExtra`.

    ``purpose`` is what needs it, as the start of the sentence: "the demo", "--torch-check".
    The missing package named is the one the import really failed on (``safetensors.torch``
    fails on numpy when numpy is absent), when it is one of the extra's.
    """
    if extra not in EXTRAS:
        raise ValueError(f"unknown extra {extra!r}")
    try:
        return importlib.import_module(module)
    except ModuleNotFoundError as exc:
        missing = (exc.name or module).split(".")[0]
        if missing not in EXTRAS[extra] and missing != module.split(".")[0]:
            raise  # a bug or a broken install, not an absent extra: keep the real error
        raise MissingExtra(purpose, missing, extra) from None


def require_all(modules: tuple[str, ...], *, extra: str, purpose: str) -> None:
    """:func:`require` each of ``modules`` up front, so a command refuses before writing anything.

    Every absent top-level package is named at once ("the demo needs torch, pyarrow: ..."),
    found without importing anything (torch imported without numpy prints a warning first).
    """
    tops = dict.fromkeys(module.split(".")[0] for module in modules)
    missing = [top for top in tops if importlib.util.find_spec(top) is None]
    if missing:
        raise MissingExtra(purpose, ", ".join(missing), extra)
    for module in modules:
        require(module, extra=extra, purpose=purpose)


def optional(module: str) -> ModuleType | None:
    """``import module`` when it is installed, else None (an accelerator such as orjson)."""
    try:
        return importlib.import_module(module)
    except ImportError:
        return None
