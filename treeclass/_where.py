"""Reading a `where` function (`lambda m: m.layers[1].w`) into the path(s) it selects.

A path is a tuple of steps, `(key, is_item)`: `(("layers", False), (1, True), ("w",
False))`. Two readers produce the same paths:

- `_Node`, the reference: `where` is called on a stand-in that records each attribute
  and item read. Anything else (a call, arithmetic, a comparison, `bool()`, `len()`)
  raises at once, naming the node it was applied to. Whether each read exists in the
  object is checked afterwards, by the walk in `_step.py`.
- `_constant_paths`, the fast way for the common case: a lambda whose body reads only
  constant attribute names and constant indices of its argument (`m.layers[-1].w`, or
  a tuple of such reads) selects the same path(s) on every call, because its code
  object holds all it reads. Those paths are computed once from the bytecode and
  cached by code object. Any other instruction (a closure variable, a global, a call)
  sends the function to `_Node`, which is always correct; so does an unknown opcode
  of a future Python.

Why the bytecode at all: recording costs a Python call per read plus a frame for
`where`, more than the `replace()` calls themselves. Measured on a 3-level path
(benchmarks/whole_models.py, against the hand-written chain of `replace()` calls): a
recorded path makes `replace_at` about 4.5x the chain, a constant one, read once and
compiled (`_path_function.py`), about 1.35x.

Why the cache is keyed by code object and not by function: a path is safe to reuse
only if nothing outside the code decides it. This lambda's code reads `i` from a
closure cell, so it is never cached, and each call records the current `i`:

    for i in range(3):
        mlp = tc.replace_at(mlp, lambda m: m.layers[i].w, w[i])
"""

from __future__ import annotations

import dis
import sys
import types
from collections.abc import Callable
from typing import Any, Final, NoReturn

Step = tuple[Any, bool]
Path = tuple[Step, ...]

MSG_NOT_READ: Final = """\
{path}: `where` {did}, but it may only read fields and entries.

replace_at records the path that `where` reads (`lambda m: m.layers[1].w`) and replaces
the node at its end; to compute a new value from the old one, pass a function:

    tc.replace_at(obj, lambda m: m.layers[1].w, fn=lambda w: w * 2)"""

_MSG_RETURN: Final = """\
`where` returned {what}; it must return a node read from its argument, or a tuple of
them: lambda m: m.layers[1].w  or  lambda m: (m.layers[0].w, m.layers[1].w)"""


def format_path(root: str, path: Path) -> str:
    """`MLP.layers[1].w` for the root name `MLP` and that path."""
    return root + "".join(f"[{key!r}]" if item else f".{key}" for key, item in path)


class _Node:
    """What `where` receives: one recorded read, linked to the read before it."""

    # Field names cannot start with `_tc_` (treeclass reserves the prefix), so these
    # slots never hide a field from `__getattr__`. The root holds the root's name in
    # `_tc_key`, for messages.
    __slots__ = ("_tc_item", "_tc_key", "_tc_parent")
    _tc_parent: _Node | None
    _tc_key: Any
    _tc_item: bool

    def __getattr__(self, name: str) -> _Node:
        if name[:2] == "__" == name[-2:]:
            # Probes such as hasattr(x, "__array_interface__") from numpy or JAX: no
            # field has a dunder name, and a node for one would mislead the probe.
            raise AttributeError(name)
        node = _new(_Node)
        node._tc_parent, node._tc_key, node._tc_item = self, name, False
        return node

    def __getitem__(self, key: Any) -> _Node:
        if type(key) is _Node:
            raise TypeError(MSG_NOT_READ.format(path=_node_path(key), did="used it as an index"))
        if isinstance(key, slice):
            path = _node_path(self)
            msg = (
                f"{path}[{key.start}:{key.stop}]: `where` sliced {path}, but it may only "
                "select single entries; select several as a tuple: "
                f"lambda m: ({format_path('m', _steps(self))}[0], ...)"
            )
            raise TypeError(msg)
        node = _new(_Node)
        node._tc_parent, node._tc_key, node._tc_item = self, key, True
        return node

    def __repr__(self) -> str:
        return f"<replace_at path {_node_path(self)}>"

    def _tc_refuse(self, did: str) -> NoReturn:
        raise TypeError(MSG_NOT_READ.format(path=_node_path(self), did=did))

    def __call__(self, *args: object, **kwargs: object) -> NoReturn:
        self._tc_refuse("called it")

    def __bool__(self) -> NoReturn:
        self._tc_refuse("took its truth value (an `if`, `and`, `or` or `not`)")

    def __hash__(self) -> NoReturn:
        self._tc_refuse("hashed it (used it as a dict key?)")

    def __iter__(self) -> NoReturn:
        self._tc_refuse("iterated over it (select entries by index: m.layers[0])")

    def __len__(self) -> NoReturn:
        self._tc_refuse("took its len()")

    def __contains__(self, item: object) -> NoReturn:
        self._tc_refuse("tested membership (`in`) on it")

    def __index__(self) -> NoReturn:
        self._tc_refuse("used it as an index")

    def __array__(self, *args: object, **kwargs: object) -> NoReturn:
        self._tc_refuse("passed it to a NumPy function")


_new: Final = object.__new__


def _refusing(did: str) -> Callable[..., NoReturn]:
    def method(self: _Node, *args: object) -> NoReturn:
        self._tc_refuse(did)

    return method


# Arithmetic and comparisons: each raises, naming the node and the operator.
_OPERATORS: Final = {
    "add": "+", "sub": "-", "mul": "*", "matmul": "@", "truediv": "/", "floordiv": "//",
    "mod": "%", "pow": "**", "lshift": "<<", "rshift": ">>", "and": "&", "or": "|",
    "xor": "^", "divmod": "divmod()",
}
for _op, _sym in _OPERATORS.items():
    setattr(_Node, f"__{_op}__", _refusing(f"computed with it ({_sym})"))
    setattr(_Node, f"__r{_op}__", _refusing(f"computed with it ({_sym})"))
for _op in ("neg", "pos", "abs", "invert", "int", "float", "complex", "round"):
    setattr(_Node, f"__{_op}__", _refusing(f"computed with it (__{_op}__)"))
for _op, _sym in {"lt": "<", "le": "<=", "gt": ">", "ge": ">=", "eq": "==", "ne": "!="}.items():
    setattr(_Node, f"__{_op}__", _refusing(f"compared it ({_sym})"))


def _steps(node: _Node) -> Path:
    steps: list[Step] = []
    while node._tc_parent is not None:
        steps.append((node._tc_key, node._tc_item))
        node = node._tc_parent
    steps.reverse()
    return tuple(steps)


def _node_path(node: _Node) -> str:
    root = node
    while root._tc_parent is not None:
        root = root._tc_parent
    return format_path(root._tc_key, _steps(node))


def _describe(value: object) -> str:
    name = type(value).__name__
    return f"{'an' if name[0] in 'aeiouAEIOU' else 'a'} {name}"


def _record(where: Callable[[Any], Any], root_name: str) -> Path | list[Path]:
    root = _new(_Node)
    root._tc_parent, root._tc_key, root._tc_item = None, root_name, False
    selected = where(root)
    if type(selected) is _Node:
        return _steps(selected)
    if isinstance(selected, tuple | list):
        items: list[Any] = list(selected)
        bad = next((s for s in items if type(s) is not _Node), None)
        if bad is None:
            return [_steps(s) for s in items]
        raise TypeError(_MSG_RETURN.format(what=f"a {type(selected).__name__} holding {_describe(bad)}"))
    raise TypeError(_MSG_RETURN.format(what=_describe(selected)))


# Instructions that do nothing (RESUME starts every function since 3.11).
_SKIP: Final = frozenset({"RESUME", "NOP", "CACHE", "EXTENDED_ARG"})
_LOAD_ARG: Final = frozenset({"LOAD_FAST", "LOAD_FAST_BORROW", "LOAD_FAST_CHECK"})
_LOAD_CONST: Final = frozenset({"LOAD_CONST", "LOAD_SMALL_INT"})
_KEY_TYPES: Final = (int, str)


class _Const:
    """A constant on the simulated stack (an index, before BINARY_SUBSCR takes it)."""

    __slots__ = ("value",)

    def __init__(self, value: Any) -> None:
        self.value = value


def _constant_paths(code: types.CodeType) -> Path | list[Path] | None:
    """The path(s) that a function with this code selects on every call, or None if
    its body does anything but read constant names and indices of its argument."""
    # *args, **kwargs, generators and coroutines of all kinds: not a plain read.
    if code.co_argcount < 1 or code.co_flags & (0x04 | 0x08 | 0x20 | 0x80 | 0x100 | 0x200):
        return None
    arg = code.co_varnames[0]
    # The stack holds a path (tuple of steps), a list of paths, or a _Const.
    stack: list[Any] = []
    for ins in dis.get_instructions(code):
        op = ins.opname
        top = stack[-1] if stack else None
        if op in _SKIP:
            continue
        if op in _LOAD_ARG and ins.argval == arg:
            stack.append(())
        elif op == "LOAD_ATTR" and type(top) is tuple:
            # Since 3.12 the low bit of LOAD_ATTR's argument marks a method load.
            if sys.version_info >= (3, 12) and (ins.arg or 0) & 1:
                return None
            stack[-1] = (*top, (ins.argval, False))
        elif op in _LOAD_CONST and type(ins.argval) in _KEY_TYPES:
            stack.append(_Const(ins.argval))
        elif op == "BINARY_SUBSCR" or (op == "BINARY_OP" and ins.argrepr == "[]"):
            if len(stack) < 2 or type(top) is not _Const or type(stack[-2]) is not tuple:
                return None
            stack.pop()
            stack[-1] = (*stack[-1], (top.value, True))
        elif op == "BUILD_TUPLE" and 0 < (ins.arg or 0) <= len(stack):
            n = ins.arg or 0
            if any(type(p) is not tuple for p in stack[-n:]):
                return None
            stack[-n:] = [list(stack[-n:])]
        elif op == "RETURN_VALUE" and len(stack) == 1 and type(top) is not _Const:
            return top
        else:
            return None
    return None


_CACHE_SIZE: Final = 1024
# id(code) -> (code, paths or None). Holding the code keeps its id from being reused.
_cache: dict[int, tuple[types.CodeType, Path | list[Path] | None]] = {}


def constant_paths(where: Callable[[Any], Any]) -> Path | list[Path] | None:
    """The path(s) `where` selects on every call, read once from its code; None when
    they may change from call to call (or `where` is not a plain function)."""
    if not isinstance(where, types.FunctionType):
        return None  # a bound method's code reads from self, not from its argument
    code = where.__code__
    entry = _cache.get(id(code))
    if entry is None or entry[0] is not code:
        if len(_cache) >= _CACHE_SIZE:
            _cache.clear()
        entry = _cache[id(code)] = (code, _constant_paths(code))
    return entry[1]


def read_paths(where: Callable[[Any], Any], root_name: str) -> Path | list[Path]:
    """The path `where` selects (a tuple of steps), or the paths (a list of them) when
    it returns a tuple; `root_name` names the root in messages."""
    paths = constant_paths(where)
    return _record(where, root_name) if paths is None else paths
