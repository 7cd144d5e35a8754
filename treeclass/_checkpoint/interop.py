"""Treeclasses in `jax.export` and `flax.serialization`, each class registered when created
(`ON_CLASS`), through each library's public registration call only.

In jax.export a class travels as `module.qualname` (the second live class of one name as
`module.qualname#2`, and so on), its fields by name: the dynamic fields' names in order, and each
static value as checkpoints encode it (`manifest.encode_static`), read back without running code:
functions, classes, enum members and dataclasses are looked up by name in modules already
imported; only containers are called, and treeclasses are built as JAX's unflatten builds them.

flax, which finds serializers by exact type, is never imported (slow): a class created after it
is registered at once; those created before it when `flax.serialization` has been executed, by a
loader wrapped around its own (`_OnImport`), as the import system's documentation shows."""

import dataclasses
import functools
import importlib.abc
import importlib.machinery
import importlib.util
import json
import sys
import weakref
from collections.abc import Mapping, Sequence
from types import ModuleType
from typing import Any, Final

import jax
import jax.export
import numpy as np

from treeclass._checkpoint.manifest import canonical, encode_static
from treeclass._checkpoint.state_dict import differences
from treeclass._checkpoint.template import CheckpointError, keyed
from treeclass._core.decorator import ON_CLASS
from treeclass._core.layout import Layout, layout_of
from treeclass._core.show import short_repr
from treeclass._core.tree import equal
from treeclass._core.walk import node_def

_MSG_STATIC: Final = """\
{cls}.{name} holds {value}, which jax.export cannot carry: a static value travels as
checkpoints write it (numbers, strings, None, tuples, NamedTuples, lists, sets, dicts,
dataclasses and treeclasses of those, NumPy dtypes, and enum members, functions or classes
defined at a module's top level, found by name).
Make it one of those, e.g. a string naming the choice that a method maps to the object."""

_MSG_FIELD: Final = """\
{cls}.{field}: {problem}.
The class here has dynamic fields {dynamic} and static fields {static}. jax.export finds a
treeclass's values by field name: export the function again with this definition of {cls},
or deserialize it where {cls} is defined as it was exported."""

_MSG_ORDER: Final = """\
{cls} was exported with its dynamic fields in the order {saved}; the class here declares
them in the order {ours}. An exported function takes and gives a treeclass's arrays in the
exported order, and jax.export has no way to pass them by name, so each would reach another
field. Export the function again with this definition of {cls}, or declare its fields in
the exported order."""

_MSG_FORMAT: Final = """\
{cls}: the exported function's record of this class ({found}) was not written by this
version of treeclass. Export the function again with this version."""

_CONTAINERS: Final = (tuple, list, set, frozenset, dict)
_MISSING: Final = object()  # what `decode_static` gives for a value it cannot rebuild
FLAX: Final = "flax.serialization"

# How many classes each `module.qualname` has registered in this process (they all stay alive:
# JAX's pytree registry holds every registered class).
_names: dict[str, int] = {}
_pending: weakref.WeakSet[type] = weakref.WeakSet()  # created before flax was imported


def _lookup(name: str) -> Any:
    """The object `module.qualname` names, from a module already imported (none is imported)."""
    parts = ["builtins", *name.split(".")] if "." not in name else name.split(".")
    for i in range(len(parts) - 1, 0, -1):
        module = sys.modules.get(".".join(parts[:i]))
        if module is not None:
            try:
                return functools.reduce(getattr, parts[i:], module)
            except AttributeError:
                return _MISSING
    return _MISSING


def decode_static(encoded: Any) -> Any:
    """The value `encode_static` wrote `encoded` for, calling only containers; else `_MISSING`."""
    if isinstance(encoded, list):
        encoded = {"tuple": encoded}
    if not isinstance(encoded, dict):
        return encoded
    if len(encoded) != 1:
        return _MISSING
    [(tag, inner)] = encoded.items()
    if tag == "float":
        return float(inner)
    if tag == "repr" and isinstance(inner, str) and inner.startswith("dtype("):
        try:  # `dtype('float32')`, `dtype(bfloat16)`; a structured one is not carried
            return np.dtype(inner[6:-1].strip("'"))
        except (TypeError, ValueError):
            return _MISSING
    if tag == "repr":
        return _lookup(inner) if isinstance(inner, str) else _MISSING
    cls = _lookup(tag)  # `list` is `builtins.list`
    if not isinstance(cls, type) or not isinstance(inner, dict | list):
        return _MISSING
    values = [decode_static(v) for v in (inner.values() if isinstance(inner, dict) else inner)]
    if any(v is _MISSING for v in values):
        return _MISSING
    if isinstance(inner, dict) and dataclasses.is_dataclass(cls):
        layout = layout_of(cls)
        names = [f.name for f in dataclasses.fields(cls)]
        if sorted(inner) != sorted(names if layout is None else layout.dynamic + layout.static):
            return _MISSING  # the class changed since
        if layout is not None:  # a treeclass: built by its unflatten, as JAX builds it
            fields = dict(zip(inner, values, strict=True))
            aux = tuple(fields[name] for name in layout.static)
            return layout.unflatten(aux, [fields[name] for name in layout.dynamic])
        # Built as unflatten builds a treeclass: no __init__ or __post_init__ runs.
        value = object.__new__(cls)
        for name, field in zip(inner, values, strict=True):
            object.__setattr__(value, name, field)
        return value
    make = getattr(cls, "_make", None) if issubclass(cls, tuple) and cls is not tuple else cls
    if not isinstance(inner, list) or make is None or not issubclass(cls, _CONTAINERS):
        return _MISSING
    try:
        return make(values)
    except Exception:  # noqa: BLE001 (a NamedTuple whose fields changed since)
        return _MISSING


def _serialize(layout: Layout, aux: tuple[Any, ...]) -> bytes:
    """The class's record in an exported function: its fields by name, statics encoded."""
    static = {}
    for name, value in zip(layout.static, aux, strict=True):
        static[name] = encode_static(value)
        # Carried only if read back as itself (a value whose == raises is not carried either).
        back = decode_static(static[name])
        if type(back) is not type(value) or not equal(back, value):
            cls = layout.cls.__qualname__
            raise ValueError(_MSG_STATIC.format(cls=cls, name=name, value=short_repr(value)))
    return canonical({"dynamic": list(layout.dynamic), "static": static}).encode()


def _field_error(layout: Layout, field: str, problem: str) -> ValueError:
    cls, dynamic, static = layout.cls.__qualname__, list(layout.dynamic), list(layout.static)
    msg = _MSG_FIELD.format(cls=cls, field=field, problem=problem, dynamic=dynamic, static=static)
    return ValueError(msg)


def _check_fields(layout: Layout, dynamic: list[str], static: list[str]) -> None:
    """Raises naming the first field the export and the class here do not share, or the
    dynamic fields' order where only that differs."""
    saved = {**dict.fromkeys(dynamic, "dynamic"), **dict.fromkeys(static, "static")}
    ours = {**dict.fromkeys(layout.dynamic, "dynamic"), **dict.fromkeys(layout.static, "static")}
    for field, kind in saved.items():
        if field not in ours:
            raise _field_error(layout, field, f"exported as a {kind} field, which is missing here")
        if ours[field] != kind:
            raise _field_error(layout, field, f"exported as a {kind} field, {ours[field]} here")
    for field, kind in ours.items():
        if field not in saved:
            problem = f"a {kind} field here, which the exported function does not have"
            raise _field_error(layout, field, problem)
    # Statics are found by name, but arrays cannot be: the exported function takes them as one
    # flat list in the exported order, and the class here flattens in its own:
    #
    #     class Pair(tc.TreeClass): a, b   # exported: f(p) = p.a * 2 + p.b, [1, 3, 5]
    #     class Pair(tc.TreeClass): b, a   # here: f gets [b, a] as [a, b], [2, 3, 4]
    #
    # No node jax.export builds can reorder leaves, so a reordered class is refused.
    if dynamic != list(layout.dynamic):
        cls = layout.cls.__qualname__
        raise ValueError(_MSG_ORDER.format(cls=cls, saved=dynamic, ours=list(layout.dynamic)))


def _deserialize(layout: Layout, data: bytes) -> tuple[Any, ...]:
    """The class's static values (its aux data) from `_serialize`'s record, fields by name."""
    record = json.loads(data)
    if not (
        isinstance(record, dict)
        and sorted(record) == ["dynamic", "static"]
        and isinstance(record["dynamic"], list)
        and all(isinstance(name, str) for name in record["dynamic"])
        and isinstance(record["static"], dict)
    ):
        found = short_repr(record)
        raise ValueError(_MSG_FORMAT.format(cls=layout.cls.__qualname__, found=found))
    encoded: dict[str, Any] = record["static"]
    _check_fields(layout, record["dynamic"], list(encoded))
    values = tuple(decode_static(encoded[field]) for field in layout.static)
    for field, value in zip(layout.static, values, strict=True):
        if value is _MISSING:
            msg = (
                f"{layout.cls.__qualname__}.{field}: the exported static value {encoded[field]}"
                " names nothing in the modules imported here; import the module that defines"
                " it first."
            )
            raise ValueError(msg)
    return values


def _next_name(cls: type) -> str:
    """The name jax.export is to write for the new class `cls` (counted here): its
    `module.qualname`, and for the k-th live class of one `module.qualname` in this process (a
    factory; a notebook cell run twice) `module.qualname#k`. jax.export refuses a name twice and
    has no call that replaces one, and a name shared by two classes would deserialize into
    either."""
    name = f"{cls.__module__}.{cls.__qualname__}"
    count = _names.get(name, 0) + 1
    _names[name] = count
    return name if count == 1 else f"{name}#{count}"


def register(cls: type) -> None:
    layout = layout_of(cls)
    assert layout is not None  # called with new treeclasses only
    # No `from_children`: jax.export then builds the class with its registered unflatten,
    # which runs no user code; `_deserialize` has checked the fields, so their order is ours.
    jax.export.register_pytree_node_serialization(
        cls,
        serialized_name=_next_name(cls),
        serialize_auxdata=functools.partial(_serialize, layout),
        deserialize_auxdata=functools.partial(_deserialize, layout),
    )


def _to_state_dict(x: Any) -> dict[str, Any]:
    return {k: sys.modules[FLAX].to_state_dict(c) for _, k, c in keyed(x, lambda: "") or ()}


def _from_state_dict(x: Any, state: Any) -> Any:
    """Each field restored by flax, rebuilt by unflatten (no user code)."""
    flax, pairs = sys.modules[FLAX], keyed(x, lambda: "") or []
    differ: str | None = f"a state dict expected, got a {type(state).__name__}"
    if isinstance(state, Mapping):
        differ = differences([k for _, k, _ in pairs], state, "state dict")
    if differ is not None:
        msg = f"{type(x).__name__} at {flax.current_path()}: {differ}"
        raise CheckpointError(msg)
    values = [flax.from_state_dict(child, state[k], name=k) for _, k, child in pairs]
    return jax.tree.unflatten(node_def(x), values)


def _register_pending() -> None:
    """Registers with flax (public `register_serialization_state`) each class waiting for it."""
    flax = sys.modules[FLAX]
    for cls in list(_pending):
        flax.register_serialization_state(cls, _to_state_dict, _from_state_dict, override=True)
    _pending.clear()


class _RegisterAfter(importlib.abc.Loader):
    """flax.serialization's own loader, then `_register_pending()`. Once the module runs, it
    holds its own loader again (`__loader__`, `__spec__.loader`): nothing of ours stays."""

    def __init__(self, loader: importlib.abc.Loader) -> None:
        self.loader = loader

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType | None:
        return self.loader.create_module(spec)

    def exec_module(self, module: ModuleType) -> None:
        module.__loader__ = self.loader
        if module.__spec__ is not None:
            module.__spec__.loader = self.loader
        self.loader.exec_module(module)
        _register_pending()


class _OnImport(importlib.abc.MetaPathFinder):
    """Finds flax.serialization through the other finders, once, and wraps its loader in
    `_RegisterAfter` (the import system's public route, as `importlib.util.LazyLoader`'s
    documented use). flax offers no hook of its own: it finds serializers by exact type."""

    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        if fullname != FLAX:
            return None
        sys.meta_path.remove(self)
        spec = importlib.util.find_spec(fullname)
        if spec is not None and spec.loader is not None:
            spec.loader = _RegisterAfter(spec.loader)
        return spec


def _on_class(cls: type) -> None:
    _pending.add(cls)
    if FLAX in sys.modules:  # also those pending, if the import escaped `_OnImport`
        _register_pending()


ON_CLASS.extend((register, _on_class))
if FLAX not in sys.modules:
    sys.meta_path.insert(0, _OnImport())
