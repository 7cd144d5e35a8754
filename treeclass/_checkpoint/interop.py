"""Treeclasses in `jax.export` and `flax.serialization`, each class registered when created
(`ON_CLASS`). In jax.export a class travels as `module.qualname`, its statics as checkpoints
encode them (`manifest.encode_static`), read back without running code: functions, classes, enum
members and dataclasses are looked up by name in modules already imported; only containers are
called. flax, which finds serializers by exact type, is never imported (slow): classes created
before it are registered when it is (`_OnImport`)."""

from __future__ import annotations

import dataclasses
import functools
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
from treeclass._checkpoint.state_dict import CheckpointError, differences, keyed
from treeclass._core.decorator import ON_CLASS
from treeclass._core.layout import Layout, layout_of
from treeclass._core.show import short_repr
from treeclass._core.walk import node_def

_jax_export: ModuleType | None
try:  # used only where a class is defined again under a name already registered (below)
    from jax._src.export import _export as _jax_export
except ImportError:  # pragma: no cover - a jax that moved it; redefined classes go unregistered
    _jax_export = None

_MSG_STATIC: Final = """\
{cls}.{name} holds {value}, which jax.export cannot carry: a static value travels as
checkpoints write it (numbers, strings, None, tuples, NamedTuples, lists, sets, dicts,
dataclasses of those, NumPy dtypes, and enum members, functions or classes defined at a
module's top level, found by name).
Make it one of those, e.g. a string naming the choice that a method maps to the object."""

_MSG_CHANGED: Final = """\
{cls} was exported with {saved}; the class here has {ours}. Export the function again
with this definition of {cls}, or deserialize it where the class is defined as it was."""

_CONTAINERS: Final = (tuple, list, set, frozenset, dict)

_layouts: dict[str, Layout] = {}  # of the latest class of each serialized name: it is built
_MISSING: Final = object()  # what `decode_static` gives for a value it cannot rebuild
FLAX: Final = "flax.serialization"
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
        if sorted(inner) != sorted(f.name for f in dataclasses.fields(cls)):
            return _MISSING  # the class changed since
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


def _same(a: Any, b: Any) -> bool:
    try:
        return type(a) is type(b) and bool(a == b)
    except Exception:  # noqa: BLE001 (a value whose == raises is not carried either)
        return False


def _serialize(layout: Layout, aux: tuple[Any, ...]) -> bytes:
    encoded = {}
    for name, value in zip(layout.static, aux, strict=True):
        encoded[name] = encode_static(value)
        if not _same(decode_static(encoded[name]), value):
            cls = layout.cls.__name__
            raise ValueError(_MSG_STATIC.format(cls=cls, name=name, value=short_repr(value)))
    return canonical(encoded).encode()


def _deserialize(name: str, data: bytes) -> tuple[Any, ...]:
    layout = _layouts[name]
    encoded = json.loads(data)
    if sorted(encoded) != sorted(layout.static):
        saved, ours = f"static fields {sorted(encoded)}", f"static fields {sorted(layout.static)}"
        raise ValueError(_MSG_CHANGED.format(cls=name, saved=saved, ours=ours))
    values = tuple(decode_static(encoded[field]) for field in layout.static)
    for field, value in zip(layout.static, values, strict=True):
        if value is _MISSING:
            msg = f"{name}.{field}: the exported static value {encoded[field]} names nothing"
            msg += " in the modules imported here; import the module that defines it first."
            raise ValueError(msg)
    return values


def _build(name: str, aux_data: tuple[Any, ...], children: Sequence[Any]) -> Any:
    """An instance of the latest class of that name, built by its unflatten (no user code)."""
    layout = _layouts[name]
    kids = tuple(children)
    if len(kids) != len(layout.dynamic):
        saved, ours = f"{len(kids)} dynamic fields", f"dynamic fields {list(layout.dynamic)}"
        raise ValueError(_MSG_CHANGED.format(cls=name, saved=saved, ours=ours))
    return layout.unflatten(aux_data, kids)


def register(cls: type) -> None:
    layout = layout_of(cls)
    assert layout is not None  # called with new treeclasses only
    name = f"{cls.__module__}.{cls.__qualname__}"
    serialize = functools.partial(_serialize, layout)
    if name not in _layouts:
        jax.export.register_pytree_node_serialization(
            cls,
            serialized_name=name,
            serialize_auxdata=serialize,
            deserialize_auxdata=functools.partial(_deserialize, name),
            from_children=functools.partial(_build, name),
        )
    elif _jax_export is not None:
        # A class defined again (a notebook cell run twice): jax refuses a second registration
        # of a name, so the new class goes into its table as the public call would put it.
        _jax_export.serialization_registry[cls] = (name, serialize)
    _layouts[name] = layout  # the latest class of a name wins


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
    flax = sys.modules[FLAX]
    for cls in list(_pending):
        flax.register_serialization_state(cls, _to_state_dict, _from_state_dict, override=True)
    _pending.clear()


class _OnImport:
    """Finds flax.serialization through the other finders, once; registers `_pending` after."""

    def find_spec(self, name: str, path: Sequence[str] | None, target: Any = None) -> Any:
        if name != FLAX:
            return None
        sys.meta_path.remove(self)
        spec = importlib.util.find_spec(name)
        if spec is not None and spec.loader is not None:
            run = spec.loader.exec_module

            def exec_module(module: ModuleType) -> None:
                run(module)
                _register_pending()

            spec.loader.exec_module = exec_module  # type: ignore[method-assign]
        return spec


def _on_class(cls: type) -> None:
    _pending.add(cls)
    if FLAX in sys.modules:  # also those pending, if the import escaped `_OnImport`
        _register_pending()


ON_CLASS.extend((register, _on_class))
if FLAX not in sys.modules:
    sys.meta_path.insert(0, _OnImport())
