"""Shape checks for what a node sends back: its result envelope and its command's JSON.

A node's answer is data from another machine (another fvconsole version, a broken
install, a hostile prolog). The fleet code reads a few fields of it to aggregate and render:
each of those must have the type it is read as, so that a wrong one makes *that node*
``invalid`` with a reason naming the field (``entries[3].bytes: expected an integer, got
str``) instead of a TypeError for the whole run or a silent zero. Fields the fleet code
does not read pass through untouched.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from fvconsole.core.shared.untrusted import UntrustedError, parse_reason

#: Byte counts and sizes beyond this are not sizes (and would overflow float formatting).
MAX_INT = 1 << 63

LS = "cache-ls"
EVICT = "cache-evict"
VERIFY = "cache-verify"


class ShapeError(ValueError):
    """A field of the wrong type; the message names it."""


def _type_name(value: Any) -> str:
    return "null" if value is None else type(value).__name__


def _int(value: Any, where: str, *, optional: bool = True) -> None:
    if value is None and optional:
        return
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < MAX_INT:
        got = value if isinstance(value, int) and not isinstance(value, bool) else _type_name(value)
        raise ShapeError(f"{where}: expected a non-negative integer, got {str(got)[:40]}")


def _number(value: Any, where: str) -> None:
    if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float))):
        raise ShapeError(f"{where}: expected a number, got {_type_name(value)}")


def _str(value: Any, where: str, *, optional: bool = True) -> None:
    if value is None and optional:
        return
    if not isinstance(value, str):
        raise ShapeError(f"{where}: expected a string, got {_type_name(value)}")


def _bool(value: Any, where: str) -> None:
    if value is not None and not isinstance(value, bool):
        raise ShapeError(f"{where}: expected true/false, got {_type_name(value)}")


def _items(doc: Mapping[str, Any], name: str, *, required: bool) -> list[Mapping[str, Any]]:
    value = doc.get(name)
    if value is None and not required:
        return []
    if not isinstance(value, list):
        raise ShapeError(f"{name}: expected a list, got {_type_name(value)}")
    for i, item in enumerate(value):
        if not isinstance(item, Mapping):
            raise ShapeError(f"{name}[{i}]: expected an object, got {_type_name(item)}")
    return value


def _common(doc: Mapping[str, Any]) -> None:
    _str(doc.get("error"), "error")
    _str(doc.get("root"), "root")
    _str(doc.get("node"), "node")
    _str(doc.get("note"), "note")
    for name in ("cap_bytes", "fs_free_bytes", "fs_total_bytes", "total_bytes", "freed_bytes"):
        _int(doc.get(name), name)


def _check_ls(doc: Mapping[str, Any], ok: bool) -> None:
    for i, entry in enumerate(_items(doc, "entries", required=ok)):
        where = f"entries[{i}]"
        _str(entry.get("key"), f"{where}.key", optional=False)
        _str(entry.get("status"), f"{where}.status", optional=False)
        _int(entry.get("bytes"), f"{where}.bytes", optional=False)
        _number(entry.get("last_used"), f"{where}.last_used")
        _bool(entry.get("is_symlink"), f"{where}.is_symlink")
        _str(entry.get("path"), f"{where}.path")


def _check_evict(doc: Mapping[str, Any], ok: bool) -> None:
    for i, item in enumerate(_items(doc, "evict", required=ok)):
        _str(item.get("key"), f"evict[{i}].key", optional=False)
        _int(item.get("bytes"), f"evict[{i}].bytes")
    for i, item in enumerate(_items(doc, "skipped", required=False)):
        _str(item.get("key"), f"skipped[{i}].key")
        _str(item.get("reason"), f"skipped[{i}].reason")
    _bool(doc.get("executed"), "executed")


def _check_verify(doc: Mapping[str, Any], ok: bool) -> None:
    _bool(doc.get("ok"), "ok")
    for i, entry in enumerate(_items(doc, "entries", required="error" not in doc)):
        _str(entry.get("key"), f"entries[{i}].key", optional=False)
        _bool(entry.get("ok"), f"entries[{i}].ok")
        _str(entry.get("not_verifiable"), f"entries[{i}].not_verifiable")
        for j, problem in enumerate(_items(entry, "problems", required=False)):
            for name in ("shard", "param", "problem"):
                _str(problem.get(name), f"entries[{i}].problems[{j}].{name}")


_CHECKS: dict[str, Callable[[Mapping[str, Any], bool], None]] = {
    LS: _check_ls, EVICT: _check_evict, VERIFY: _check_verify}


def check_envelope(payload: Mapping[str, Any]) -> str | None:
    """The runner's envelope: ``exit`` an integer (or null for a node-side timeout), ``output`` an object or null."""
    code = payload.get("exit")
    if code is not None and (isinstance(code, bool) or not isinstance(code, int) or not -1 << 31 <= code < 1 << 31):
        return f"exit: expected an integer, got {_type_name(code)}"
    if payload.get("output") is not None and not isinstance(payload.get("output"), dict):
        return f"output: expected an object, got {_type_name(payload.get('output'))}"
    if payload.get("invalid_output") is not None and not isinstance(payload.get("invalid_output"), str):
        return "invalid_output: expected a string"
    if payload.get("reason") is not None:
        if not isinstance(payload.get("reason"), dict):
            return "reason: expected an object"
        try:  # a damaged reason makes this node invalid; the other nodes' results stand
            parse_reason(payload["reason"], "result", "reason")
        except UntrustedError as exc:
            return str(exc).removeprefix("result: ")
    timeout = payload.get("timeout")
    if timeout is not None and (isinstance(timeout, bool) or not isinstance(timeout, (int, float))):
        return f"timeout: expected a number, got {_type_name(timeout)}"
    return None


def check_document(kind: str | None, doc: Mapping[str, Any], ok: bool) -> str | None:
    """None when ``doc`` (a node's ``cache ls``/``cache evict`` JSON) has the shape the fleet reads.

    ``ok``: the command exited 0, so its main list must be present.
    """
    try:
        _common(doc)
        check = _CHECKS.get(kind or "")
        if check is not None:
            check(doc, ok)
    except ShapeError as exc:
        return str(exc)
    return None
