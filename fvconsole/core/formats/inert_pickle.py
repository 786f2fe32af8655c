"""A pickle reader that runs nothing from the file and is bounded in time and memory.

Why not ``pickle.Unpickler`` with a restrictive ``find_class``: the C unpickler still trusts
the opcode stream. ``LONG_BINPUT 0x7fffffff`` makes it allocate a 16 GiB memo array, a
dict key can be a tuple nested 10^5 deep (hashing it recurses in C), the same huge list can
be copied by a million ``REDUCE`` opcodes, and every ``GLOBAL`` went through our
``find_class`` which made a new class each time (15 MB of ``.metadata`` took 2.3 GB).

This module is a small pickle VM of its own for the opcodes of protocols 1-5 that plain
data and dataclass-like objects use. Every class or function the pickle names becomes one
interned :class:`InertGlobal` (never imported), calling it yields an :class:`InertObject`
that records arguments and state. Opcodes, memo entries, created objects, distinct globals
and copying work are capped (:class:`Limits`); dict keys are restricted to types whose
hashing is cheap and cannot be flooded. The result of a load may still be a deep, shared
or cyclic graph: :func:`check_tree` bounds it before anything walks it recursively.
Everything that goes wrong is a :class:`PickleRefused` whose message is one line.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any


class PickleRefused(ValueError):
    """The pickle is malformed, names something not allowed, or exceeds a limit."""


@dataclass(frozen=True)
class Limits:
    """Caps on one load; a pickle exceeding any of them is refused, never partly trusted."""

    #: Opcodes executed; each creates at most one value, so this also caps the objects made.
    max_ops: int = 50_000_000
    max_memo: int = 20_000_000
    max_globals: int = 256
    #: Items copied or hashed beyond O(1) (an OrderedDict built from a list, tuple keys).
    max_work: int = 50_000_000
    #: Longest text line (the module/name of a ``GLOBAL``).
    max_line: int = 1024
    #: Opcode names allowed (None: every opcode this reader knows), e.g. what torch's
    #: ``weights_only`` loader executes, so that a file only it cannot read is refused.
    opcodes: frozenset[str] | None = None


class InertGlobal:
    """A class or function named by the pickle: never imported; calling it records the call."""

    __slots__ = ("module", "name")

    def __init__(self, module: str, name: str) -> None:
        self.module = module
        self.name = name

    def __repr__(self) -> str:
        return f"<inert {self.module}.{self.name}>"


class InertObject:
    """What calling (``REDUCE``/``NEWOBJ``/``INST``/``OBJ``) an :class:`InertGlobal` yields."""

    __slots__ = ("cls", "args", "state")

    def __init__(self, cls: InertGlobal, args: tuple) -> None:
        self.cls = cls
        self.args = args
        self.state: Any = None

    def __repr__(self) -> str:
        return f"<inert {self.cls.module}.{self.cls.name} object>"


class InertPersistent:
    """A persistent id (torch.save's reference to a tensor storage): recorded, never resolved.

    Only a load that asks for it (``persistent=True``) accepts one; otherwise it is refused.
    """

    __slots__ = ("pid",)

    def __init__(self, pid: Any) -> None:
        self.pid = pid

    def __repr__(self) -> str:
        return "<inert persistent id>"


#: ``resolve(module, name)`` returns :data:`AS_DICT` to build a plain dict (``OrderedDict``),
#: :data:`AS_GLOBAL` for an inert stand-in, or raises :class:`PickleRefused`.
AS_DICT = "dict"
AS_GLOBAL = "global"
Resolver = Callable[[str, str], str]


def plain_data_only(module: str, name: str) -> str:
    """Resolver for files that must hold plain data (dicts, lists, strings, numbers)."""
    if (module, name) == ("collections", "OrderedDict"):
        return AS_DICT
    raise PickleRefused(f"names {module}.{name}; only plain data (dict, list, str, int, ...) is allowed")


_DictMaker = object()  # the value a resolver's AS_DICT global takes on the stack
_SMALL_INT = 1 << 60
_MARK = object()


def load(data: bytes, resolve: Resolver = plain_data_only, limits: Limits = Limits(), *,
         persistent: bool = False) -> Any:
    """The object the pickle ``data`` describes, built without running anything from it.

    ``persistent``: a persistent id (torch's tensor storages) becomes an :class:`InertPersistent`
    instead of a refusal.
    """
    machine = _Machine(data, resolve, limits)
    machine.persistent = persistent
    return _load(machine)


#: Kinds of the spans :func:`load_recorded` reports (``core/formats/pickle_shape.py`` matches them).
SPAN_STR = "str"
SPAN_INT = "int"
SPAN_FRAME = "frame"


def load_recorded(data: bytes, resolve: Resolver = plain_data_only,
                  limits: Limits = Limits()) -> tuple[Any, list[tuple[int, int, str]]]:
    """:func:`load`, and the byte spans whose content the load never looked at.

    Each span ``(start, end, kind)`` is one opcode pushing a string (``SHORT_BINUNICODE``,
    ``BINUNICODE``) or a small integer (``BININT1``, ``BININT2``, ``BININT``, ``LONG1``) whose
    value was never a dict key, a set member, an item of a tuple key, nor a global's module or
    name, or the 8-byte length argument of a ``FRAME`` (a hint this reader skips). Every other
    decision of the VM depends only on opcodes and types, so another pickle equal to ``data``
    outside these spans, with a string or integer opcode of the same kind in each, loads into
    a value that differs only in those opaque strings and integers.
    """
    machine = _Machine(data, resolve, limits, recording=True)
    value = _load(machine)
    used = machine.used
    assert used is not None and machine.pushes is not None
    return value, [(start, end, kind) for start, end, kind, obj in machine.pushes if id(obj) not in used]


def _load(machine: _Machine) -> Any:
    try:
        return machine.run()
    except PickleRefused:
        raise
    except (IndexError, KeyError, struct.error) as exc:
        raise PickleRefused(f"is malformed (truncated or corrupt: {exc})") from None
    except (TypeError, ValueError, UnicodeDecodeError, OverflowError) as exc:
        reason = " ".join(str(exc).split())[:160]
        raise PickleRefused(f"is malformed ({type(exc).__name__}: {reason})") from None
    except MemoryError:
        raise PickleRefused("is malformed (out of memory while reading it)") from None


class _Machine:
    """One load. A class only so the opcode loop can keep its state in locals."""

    def __init__(self, data: bytes, resolve: Resolver, limits: Limits, *, recording: bool = False) -> None:
        self.data = bytes(data)
        self.resolve = resolve
        self.limits = limits
        self.globals: dict[tuple[str, str], Any] = {}
        self.work = 0
        #: Recording (:func:`load_recorded`): every string/int push, and the values whose content was used
        #: (by id; the objects are kept alive by ``pushes`` and ``used``, so no id is reused meanwhile).
        self.pushes: list[tuple[int, int, str, Any]] | None = [] if recording else None
        self.used: dict[int, Any] | None = {} if recording else None
        self.persistent = False

    def _use(self, value: Any) -> None:
        """Recording: ``value``'s content decided something (a key, a global's name)."""
        if self.used is not None:
            self.used[id(value)] = value
            if type(value) is tuple:
                for item in value:
                    self.used[id(item)] = item

    # ----------------------------------------------------------------- helpers

    def _global(self, module: Any, name: Any) -> Any:
        if self.used is not None:
            self._use(module)
            self._use(name)
        if type(module) is not str or type(name) is not str:
            raise PickleRefused("is malformed (a global's module and name must be strings)")
        key = (module, name)
        found = self.globals.get(key)
        if found is not None:
            return found
        if len(self.globals) >= self.limits.max_globals:
            raise PickleRefused(f"names more than {self.limits.max_globals} distinct classes/functions")
        kind = self.resolve(module, name)
        found = _DictMaker if kind == AS_DICT else InertGlobal(module, name)
        self.globals[key] = found
        return found

    def _charge(self, amount: int) -> None:
        self.work += amount
        if self.work > self.limits.max_work:
            raise PickleRefused(f"needs more than {self.limits.max_work} steps of copying/hashing work")

    def _key(self, key: Any) -> Any:
        """A dict key or set member, if hashing it is cheap and cannot be flooded."""
        if self.used is not None:
            self._use(key)
        kind = type(key)
        if kind is str or kind is bytes or key is None or kind is bool or kind is InertObject or kind is InertGlobal:
            return key
        if kind is int:
            if -_SMALL_INT < key < _SMALL_INT:
                return key
            raise PickleRefused("is malformed (an integer dict key beyond 2**60)")
        if kind is tuple:
            self._charge(len(key))
            for item in key:
                if type(item) is tuple:
                    raise PickleRefused("is malformed (a nested tuple as a dict key)")
                self._key(item)
            return key
        raise PickleRefused(f"is malformed (a {kind.__name__} as a dict key)")

    def _call(self, func: Any, args: Any) -> Any:
        if type(args) is not tuple:
            raise PickleRefused("is malformed (call arguments are not a tuple)")
        if func is _DictMaker:
            result: dict = {}
            if args:
                items = args[0]
                if len(args) != 1 or type(items) not in (list, tuple, dict):
                    raise PickleRefused("is malformed (OrderedDict arguments)")
                self._charge(len(items))
                pairs = items.items() if type(items) is dict else items
                for pair in pairs:
                    if type(pair) not in (list, tuple) or len(pair) != 2:
                        raise PickleRefused("is malformed (OrderedDict arguments)")
                    result[self._key(pair[0])] = pair[1]
            return result
        if type(func) is not InertGlobal:
            raise PickleRefused(f"is malformed (calls a {type(func).__name__})")
        return InertObject(func, args)

    def _read_line(self, pos: int) -> tuple[str, int]:
        end = self.data.find(b"\n", pos, pos + self.limits.max_line + 1)
        if end < 0:
            raise PickleRefused("is malformed (a text line is missing its end or too long)")
        return self.data[pos:end].decode("utf-8"), end + 1

    # ----------------------------------------------------------------- the loop

    def run(self) -> Any:  # noqa: C901, PLR0912, PLR0915 - one opcode per branch, kept in one loop for speed
        data = self.data
        size = len(data)
        limits = self.limits
        max_ops = limits.max_ops
        max_memo = limits.max_memo
        uint32 = struct.Struct("<I").unpack_from
        int32 = struct.Struct("<i").unpack_from
        float64 = struct.Struct(">d").unpack_from
        stack: list[Any] = []
        push = stack.append
        marks: list[list[Any]] = []
        memo: dict[int, Any] = {}
        key = self._key
        ops = 0
        strict = limits.opcodes is not None
        allowed = _opcode_table(limits.opcodes)
        pos = 0
        from_bytes = int.from_bytes
        # Every opcode takes at least one byte and adds at most one memo entry, so a pickle no
        # longer than both caps cannot exceed them: the per-opcode counting is then skipped
        # (a third of the loop's time on a DCP .metadata), the caps still hold.
        counted = size > max_ops
        checks = counted or strict
        memo_checked = size > max_memo
        rec = self.pushes  # None unless recording (load_recorded)

        while True:
            if pos >= size:
                raise PickleRefused("is malformed (ends before its STOP opcode)")
            op = data[pos]
            pos += 1
            if checks:
                ops += 1
                if ops > max_ops:
                    raise PickleRefused(f"has more than {max_ops} opcodes")
                if strict and not allowed[op]:
                    raise PickleRefused(f"uses opcode {_opcode_name(op)} at byte {pos - 1}, which is not allowed here")
            if op == 0x94:  # MEMOIZE
                n = len(memo)
                if memo_checked and n >= max_memo:
                    raise PickleRefused(f"has more than {max_memo} memo entries")
                memo[n] = stack[-1]
            elif op == 0x6A:  # LONG_BINGET
                push(memo[uint32(data, pos)[0]])
                pos += 4
            elif op == 0x68:  # BINGET
                push(memo[data[pos]])
                pos += 1
            elif op == 0x4B:  # BININT1
                push(data[pos])
                pos += 1
                if rec is not None:
                    rec.append((pos - 2, pos, SPAN_INT, stack[-1]))
            elif op == 0x28:  # MARK
                marks.append(stack)
                stack = []
                push = stack.append
            elif op == 0x29:  # EMPTY_TUPLE
                push(())
            elif op == 0x81 or op == 0x52:  # NEWOBJ, REDUCE
                args = stack.pop()
                func = stack[-1]
                if type(func) is InertGlobal and type(args) is tuple:
                    stack[-1] = InertObject(func, args)
                else:
                    stack[-1] = self._call(func, args)
            elif op == 0x62:  # BUILD
                state = stack.pop()
                target = stack[-1]
                if type(target) is InertObject:
                    target.state = state
                elif state is not None:
                    raise PickleRefused(f"is malformed (sets the state of a {type(target).__name__})")
            elif op == 0x75:  # SETITEMS
                items, stack = stack, marks.pop()  # pop back to the last MARK
                push = stack.append
                target = stack[-1]
                if type(target) is not dict or len(items) % 2:
                    raise PickleRefused("is malformed (SETITEMS)")
                if rec is None:
                    for i in range(0, len(items), 2):
                        k = items[i]
                        target[k if type(k) is str else key(k)] = items[i + 1]
                else:  # every key's content counts, strings included
                    for i in range(0, len(items), 2):
                        target[key(items[i])] = items[i + 1]
            elif op == 0x7D:  # EMPTY_DICT
                push({})
            elif op == 0x85:  # TUPLE1
                stack[-1] = (stack[-1],)
            elif op == 0x86:  # TUPLE2
                second = stack.pop()
                stack[-1] = (stack[-1], second)
            elif op == 0x4D:  # BININT2
                push(data[pos] | data[pos + 1] << 8)
                pos += 2
                if rec is not None:
                    rec.append((pos - 3, pos, SPAN_INT, stack[-1]))
            elif op == 0x4A:  # BININT
                push(int32(data, pos)[0])
                pos += 4
                if rec is not None:
                    rec.append((pos - 5, pos, SPAN_INT, stack[-1]))
            elif op == 0x8C:  # SHORT_BINUNICODE
                n = data[pos]
                pos += 1
                push(data[pos:pos + n].decode("utf-8", "surrogatepass"))
                pos += n
                if rec is not None:
                    rec.append((pos - n - 2, pos, SPAN_STR, stack[-1]))
            elif op == 0x58:  # BINUNICODE
                n = uint32(data, pos)[0]
                pos += 4
                if pos + n > size:
                    raise PickleRefused("is malformed (a string runs past the end)")
                push(data[pos:pos + n].decode("utf-8", "surrogatepass"))
                pos += n
                if rec is not None:
                    rec.append((pos - n - 5, pos, SPAN_STR, stack[-1]))
            elif op == 0x71:  # BINPUT
                if len(memo) >= max_memo:
                    raise PickleRefused(f"has more than {max_memo} memo entries")
                memo[data[pos]] = stack[-1]
                pos += 1
            elif op == 0x72:  # LONG_BINPUT
                if len(memo) >= max_memo:
                    raise PickleRefused(f"has more than {max_memo} memo entries")
                memo[uint32(data, pos)[0]] = stack[-1]
                pos += 4
            elif op == 0x5D:  # EMPTY_LIST
                push([])
            elif op == 0x65:  # APPENDS
                items, stack = stack, marks.pop()  # pop back to the last MARK
                push = stack.append
                target = stack[-1]
                if type(target) is not list:
                    raise PickleRefused(f"is malformed (appends to a {type(target).__name__})")
                target.extend(items)
            elif op == 0x61:  # APPEND
                item = stack.pop()
                target = stack[-1]
                if type(target) is not list:
                    raise PickleRefused(f"is malformed (appends to a {type(target).__name__})")
                target.append(item)
            elif op == 0x73:  # SETITEM
                value = stack.pop()
                item = stack.pop()
                target = stack[-1]
                if type(target) is not dict:
                    raise PickleRefused(f"is malformed (sets an item of a {type(target).__name__})")
                target[key(item)] = value
            elif op == 0x4E:  # NONE
                push(None)
            elif op == 0x88:  # NEWTRUE
                push(True)
            elif op == 0x89:  # NEWFALSE
                push(False)
            elif op == 0x87:  # TUPLE3
                third = stack.pop()
                second = stack.pop()
                stack[-1] = (stack[-1], second, third)
            elif op == 0x74:  # TUPLE
                items, stack = stack, marks.pop()  # pop back to the last MARK
                push = stack.append
                push(tuple(items))
            elif op == 0x6C:  # LIST
                items, stack = stack, marks.pop()  # pop back to the last MARK
                push = stack.append
                push(items)
            elif op == 0x64:  # DICT
                items, stack = stack, marks.pop()  # pop back to the last MARK
                push = stack.append
                if len(items) % 2:
                    raise PickleRefused("is malformed (DICT with an odd number of items)")
                push({key(items[i]): items[i + 1] for i in range(0, len(items), 2)})
            elif op == 0x8A:  # LONG1
                n = data[pos]
                pos += 1
                push(from_bytes(data[pos:pos + n], "little", signed=True))
                pos += n
                if rec is not None:
                    rec.append((pos - n - 2, pos, SPAN_INT, stack[-1]))
            elif op == 0x8B:  # LONG4
                n = int32(data, pos)[0]
                pos += 4
                if n < 0 or pos + n > size:
                    raise PickleRefused("is malformed (a LONG4 runs past the end)")
                push(from_bytes(data[pos:pos + n], "little", signed=True))
                pos += n
            elif op == 0x47:  # BINFLOAT
                push(float64(data, pos)[0])
                pos += 8
            elif op == 0x93:  # STACK_GLOBAL
                name = stack.pop()
                stack[-1] = self._global(stack[-1], name)
            elif op == 0x63:  # GLOBAL
                module, pos = self._read_line(pos)
                name, pos = self._read_line(pos)
                push(self._global(module, name))
            elif op == 0x49 or op == 0x4C:  # INT, LONG (protocol 1 writes bools and big ints as text)
                line, pos = self._read_line(pos)
                if op == 0x49 and line in ("00", "01"):
                    push(line == "01")
                else:
                    push(int(line[:-1] if op == 0x4C and line.endswith("L") else line))
            elif op == 0x95:  # FRAME (a hint only; the frame's bytes are ordinary opcodes)
                if rec is not None:
                    rec.append((pos, pos + 8, SPAN_FRAME, _MARK))
                pos += 8
            elif op == 0x80:  # PROTO
                if data[pos] > 5:
                    raise PickleRefused(f"uses pickle protocol {data[pos]}, which is not supported")
                pos += 1
            elif op == 0x2E:  # STOP
                if len(stack) != 1 or marks:
                    raise PickleRefused("is malformed (STOP with an unbalanced stack)")
                return stack[0]
            elif op == 0x30:  # POP
                if stack:
                    stack.pop()
                else:
                    stack = marks.pop()
                    push = stack.append
            elif op == 0x31:  # POP_MARK
                stack = marks.pop()
                push = stack.append
            elif op == 0x32:  # DUP
                push(stack[-1])
            elif op == 0x43:  # SHORT_BINBYTES
                n = data[pos]
                pos += 1
                push(data[pos:pos + n])
                pos += n
            elif op in (0x42, 0x8E, 0x8D, 0x96, 0x54, 0x55):
                # BINBYTES, BINBYTES8, BINUNICODE8, BYTEARRAY8, BINSTRING, SHORT_BINSTRING
                width = {0x42: 4, 0x8E: 8, 0x8D: 8, 0x96: 8, 0x54: 4, 0x55: 1}[op]
                n = from_bytes(data[pos:pos + width], "little")
                pos += width
                if pos + n > size:
                    raise PickleRefused("is malformed (a string runs past the end)")
                raw = data[pos:pos + n]
                pos += n
                if op == 0x8D:
                    push(raw.decode("utf-8", "surrogatepass"))
                elif op == 0x96:
                    push(bytearray(raw))
                elif op in (0x54, 0x55):  # protocol-1 str: decoded as torch.load does (strict utf-8)
                    push(raw.decode("utf-8"))
                else:
                    push(raw)
            elif op == 0x8F:  # EMPTY_SET
                push(set())
            elif op == 0x90:  # ADDITEMS
                items, stack = stack, marks.pop()  # pop back to the last MARK
                push = stack.append
                target = stack[-1]
                if type(target) is not set:
                    raise PickleRefused("is malformed (ADDITEMS)")
                for item in items:
                    target.add(key(item))
            elif op == 0x91:  # FROZENSET
                items, stack = stack, marks.pop()  # pop back to the last MARK
                push = stack.append
                push(frozenset(key(item) for item in items))
            elif op == 0x92:  # NEWOBJ_EX
                kwargs = stack.pop()
                args = stack.pop()
                if type(kwargs) is not dict or kwargs:
                    raise PickleRefused("is malformed (NEWOBJ_EX with keyword arguments)")
                stack[-1] = self._call(stack[-1], args)
            elif op == 0x6F:  # OBJ: MARK cls args... OBJ
                items, stack = stack, marks.pop()  # pop back to the last MARK
                push = stack.append
                if not items:
                    raise PickleRefused("is malformed (OBJ without a class)")
                push(self._call(items[0], tuple(items[1:])))
            elif op == 0x69:  # INST: MARK args... INST module\nname\n
                module, pos = self._read_line(pos)
                name, pos = self._read_line(pos)
                items, stack = stack, marks.pop()  # pop back to the last MARK
                push = stack.append
                push(self._call(self._global(module, name), tuple(items)))
            elif op in (0x50, 0x51):  # PERSID, BINPERSID
                if not self.persistent:
                    raise PickleRefused("refers to external data (a persistent id, e.g. a tensor storage)")
                if op == 0x50:
                    pid, pos = self._read_line(pos)
                    push(InertPersistent(pid))
                else:
                    stack[-1] = InertPersistent(stack[-1])
            elif op in (0x82, 0x83, 0x84):  # EXT1, EXT2, EXT4
                raise PickleRefused("uses the copyreg extension registry (EXT opcodes)")
            elif op in (0x97, 0x98):  # NEXT_BUFFER, READONLY_BUFFER
                raise PickleRefused("refers to out-of-band buffers")
            else:
                raise PickleRefused(f"is malformed (unknown opcode 0x{op:02x} at byte {pos - 1})")


def _opcode_table(names: frozenset[str] | None) -> bytes:
    """256 flags, 1 where the opcode byte is allowed (all when ``names`` is None)."""
    import pickletools

    if names is None:
        return b"\x01" * 256
    table = bytearray(256)
    for info in pickletools.opcodes:
        if info.name in names:
            table[ord(info.code)] = 1
    return bytes(table)


def _opcode_name(op: int) -> str:
    import pickletools

    return next((info.name for info in pickletools.opcodes if ord(info.code) == op), f"0x{op:02x}")


# --------------------------------------------------------------------------- bounding the result


@dataclass(frozen=True)
class TreeLimits:
    """Bounds on the loaded value as a tree (shared references counted once per use)."""

    max_depth: int = 100
    max_nodes: int = 1_000_000


def check_tree(value: Any, limits: TreeLimits = TreeLimits()) -> None:
    """Refuse a cyclic value, or one that is too deep or too large when walked as a tree.

    Pickle memo references can make a 1 KB file into a value whose recursive walk (``==``,
    ``repr``, JSON, a field-by-field diff) takes 2**100 steps or recurses forever; this
    walk visits each distinct container once (iteratively) and adds up what a recursive
    walk would see.
    """
    # Every container stays alive (reachable from ``value``) during the walk, so ids are stable.
    sizes: dict[int, tuple[int, int]] = {}  # id -> (nodes, depth) of finished containers
    on_path: set[int] = set()
    stack: list[tuple[Any, list[Any] | None]] = [(value, None)]
    while stack:
        node, children = stack[-1]
        if children is None:
            kids = _children(node)
            if kids is None:
                stack.pop()
                _finish(stack, 1, 0, limits)
                continue
            ident = id(node)
            if ident in on_path:
                raise PickleRefused("holds a value that contains itself (a reference cycle)")
            if ident in sizes:
                stack.pop()
                nodes, depth = sizes[ident]
                _finish(stack, nodes, depth, limits)
                continue
            on_path.add(ident)
            if len(on_path) > limits.max_depth:
                raise PickleRefused(f"nests deeper than {limits.max_depth} levels")
            stack[-1] = (node, [1, 0, kids])  # nodes so far, deepest child, remaining children
            continue
        tally = children
        if tally[2]:
            stack.append((tally[2].pop(), None))
            continue
        stack.pop()
        on_path.discard(id(node))
        nodes, depth = tally[0], tally[1] + 1
        sizes[id(node)] = (nodes, depth)
        _finish(stack, nodes, depth, limits)


def _finish(stack: list, nodes: int, depth: int, limits: TreeLimits) -> None:
    """Add a finished node's totals to its parent's tally."""
    if nodes > limits.max_nodes:
        raise PickleRefused(f"holds more than {limits.max_nodes} values (counting shared references)")
    if depth > limits.max_depth:
        raise PickleRefused(f"nests deeper than {limits.max_depth} levels")
    if stack:
        tally = stack[-1][1]
        tally[0] += nodes
        if depth > tally[1]:
            tally[1] = depth
        if tally[0] > limits.max_nodes:
            raise PickleRefused(f"holds more than {limits.max_nodes} values (counting shared references)")


def _children(node: Any) -> list[Any] | None:
    kind = type(node)
    if kind is list or kind is tuple or kind is set or kind is frozenset:
        return list(node)
    if kind is dict:
        out: list[Any] = []
        for k, v in node.items():
            out.append(k)
            out.append(v)
        return out
    if kind is InertObject:
        return [node.args, node.state]
    return None


# --------------------------------------------------------------------------- numpy arrays

#: What numpy's ``ndarray.__reduce__`` names: ``_reconstruct(ndarray, (0,), b"b")``, then BUILD
#: with ``(version, shape, dtype, is_fortran, raw bytes)``; the dtype is ``dtype("u4", False, True)``
#: and, under protocol 2, the raw bytes are ``_codecs.encode(text, "latin1")``. A resolver that
#: allows these gets inert stand-ins like any other global; :func:`numpy_array` reads them.
NUMPY_ARRAY_NAMES = frozenset({
    ("numpy.core.multiarray", "_reconstruct"), ("numpy._core.multiarray", "_reconstruct"),
    ("numpy", "ndarray"), ("numpy", "dtype"), ("_codecs", "encode"),
})
_DTYPE_CODES = frozenset("biufcV")


@dataclass(frozen=True)
class InertArray:
    """A numpy array as its pickle describes it: dtype code (``"u4"``), shape and its raw bytes' length."""

    dtype: str
    shape: tuple[int, ...]
    nbytes: int


def _raw_length(raw: Any) -> int | None:
    """Bytes of an array's raw data: bytes, or ``_codecs.encode(text, "latin1")`` (one byte a character)."""
    if type(raw) is bytes or type(raw) is bytearray:
        return len(raw)
    if (type(raw) is InertObject and (raw.cls.module, raw.cls.name) == ("_codecs", "encode")
            and len(raw.args) == 2 and type(raw.args[0]) is str and raw.args[1] == "latin1"):
        text = raw.args[0]
        return len(text) if text.isascii() or max(map(ord, text)) < 256 else None
    return None


def numpy_array(value: Any) -> InertArray | None:
    """The :class:`InertArray` an inert load made of a pickled numpy array (None: not one, or inconsistent)."""
    if type(value) is not InertObject or value.cls.name != "_reconstruct" or (
            value.cls.module, value.cls.name) not in NUMPY_ARRAY_NAMES:
        return None
    state = value.state
    if type(state) is not tuple or len(state) != 5:
        return None
    _version, shape, dtype, _fortran, raw = state
    if type(shape) is not tuple or not all(type(n) is int and n >= 0 for n in shape):
        return None
    if type(dtype) is not InertObject or (dtype.cls.module, dtype.cls.name) != ("numpy", "dtype") or not dtype.args:
        return None
    code = dtype.args[0]
    if type(code) is not str or len(code) < 2 or code[0] not in _DTYPE_CODES or not code[1:].isdigit():
        return None
    count = 1
    for n in shape:
        count *= n
    length = _raw_length(raw)
    if length is None or length != count * int(code[1:]):
        return None
    return InertArray(code, shape, length)
