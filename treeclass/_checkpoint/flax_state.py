"""treeclasses in `flax.serialization`, as flax.struct classes, without importing flax (slow).
flax finds serializers by exact type, so each class is registered when it is created if
flax.serialization is imported (`ON_CLASS`), else when that is imported (`_OnImport`)."""

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
    return {k: to_state_dict(child) for _, k, child in keyed(x, lambda: "") or ()}


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


ON_CLASS.append(_on_class)
if FLAX not in sys.modules:
    sys.meta_path.insert(0, _OnImport())
