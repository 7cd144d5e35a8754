"""treeclasses in `flax.serialization` (`to_state_dict`, `from_state_dict`, `to_bytes`,
`from_bytes`), as flax.struct classes are, when flax is installed; treeclass never
imports flax, whose import is slow.

flax looks serializers up by exact type, so each treeclass is registered: when it is
created, if flax.serialization is imported (`_core.decorator.ON_CLASS`), else when
flax.serialization is imported (an import hook on `sys.meta_path` that runs once).
"""

from __future__ import annotations

import importlib.util
import sys
import weakref
from collections.abc import Mapping, Sequence
from types import ModuleType
from typing import Any, Final

import jax

from treeclass._checkpoint.state_dict import CheckpointError, differences, keyed
from treeclass._core.decorator import ON_CLASS
from treeclass._core.walk import node_def

FLAX: Final = "flax.serialization"
_pending: weakref.WeakSet[type] = weakref.WeakSet()  # created before flax was imported


def _to_state_dict(x: Any) -> dict[str, Any]:
    to_state_dict = sys.modules[FLAX].to_state_dict
    return {k: to_state_dict(child) for _, k, child in keyed(x, lambda: type(x).__name__) or ()}


def _from_state_dict(x: Any, state: Any) -> Any:
    """`x` with its dynamic fields restored from `state` by flax, field by field, and
    rebuilt the way JAX rebuilds pytrees (as `tc.from_state_dict`: no user code)."""
    flax = sys.modules[FLAX]
    pairs = keyed(x, lambda: type(x).__name__) or []
    where = f"{type(x).__name__} at {flax.current_path()}"
    if not isinstance(state, Mapping):
        raise CheckpointError(f"{where}: a state dict expected, got a {type(state).__name__}")
    differ = differences([k for _, k, _ in pairs], state, "state dict")
    if differ is not None:
        raise CheckpointError(f"{where}: {differ}")
    values = [flax.from_state_dict(child, state[k], name=k) for _, k, child in pairs]
    return jax.tree.unflatten(node_def(x), values)


def _register(cls: type) -> None:
    sys.modules[FLAX].register_serialization_state(cls, _to_state_dict, _from_state_dict, override=True)


def _on_class(cls: type) -> None:
    if FLAX in sys.modules:
        _register(cls)
    else:
        _pending.add(cls)


class _OnImport:
    """A meta path finder that finds nothing itself: when flax.serialization is first
    imported, it has the other finders find it and registers the pending classes once
    the module has run."""

    def find_spec(self, name: str, path: Sequence[str] | None, target: ModuleType | None = None) -> Any:
        if name != FLAX:
            return None
        sys.meta_path.remove(self)
        spec = importlib.util.find_spec(name)
        if spec is not None and spec.loader is not None:
            run = spec.loader.exec_module

            def exec_module(module: ModuleType) -> None:
                run(module)
                for cls in list(_pending):
                    _register(cls)
                _pending.clear()

            spec.loader.exec_module = exec_module  # type: ignore[method-assign]
        return spec


ON_CLASS.append(_on_class)
if FLAX not in sys.modules:
    sys.meta_path.insert(0, _OnImport())
