"""The classes of a module, and how each is registered as a pytree.

Every top-level class is listed (a subclass or a base of a pytree class matters even
when it is not registered itself); `family` says how a pytree class is registered:

    @register_pytree_node_class / @register_pytree_with_keys_class   (decorator or call)
    register_pytree_node(Cls, flatten, unflatten) / register_pytree_with_keys(...)
    register_dataclass(Cls, ...) or @register_dataclass on a dataclass
    @flax.struct.dataclass, class Cls(flax.struct.PyTreeNode)
    @chex.dataclass
    class Cls(NamedTuple)   (only with --namedtuples: callers may use it as a tuple)

Classes defined inside functions or under `if` are not found: the tool rewrites
module-level code only.
"""

from __future__ import annotations

import ast
import dataclasses

from treeclass.migrate import _names
from treeclass.migrate._plan import Family

__all__ = ["Found", "find"]


@dataclasses.dataclass
class Found:
    """A top-level class of a module."""

    name: str
    node: ast.ClassDef
    family: Family | None  # None: not registered itself
    bases: list[str | None]  # qualified names of the positional bases
    decorator: int | None = None  # index of the registering decorator
    registration: ast.Call | None = None  # a module-level register_*(Cls, ...) call
    registered_twice: bool = False


def _decorator_family(qualified: str | None) -> Family | None:
    if qualified in _names.REGISTER_CLASS:
        kind = _names.REGISTER_CLASS[qualified]
        return "register_pytree_with_keys_class" if kind.endswith("keys_class") else "register_pytree_node_class"
    if qualified in _names.REGISTER_DATACLASS:
        return "register_dataclass"
    if qualified in _names.FLAX_DATACLASS:
        return "flax.struct"
    if qualified in _names.CHEX_DATACLASS:
        return "chex.dataclass"
    return None


def _set_family(found: Found, family: Family) -> None:
    if found.family is not None:
        found.registered_twice = True
    found.family = family


def _registration_call(stmt: ast.stmt, names: dict[str, str]) -> tuple[str, Family, ast.Call] | None:
    """`register_pytree_node(Cls, f, g)` (or another registration) as a statement."""
    if not (isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call)):
        return None
    call = stmt.value
    if not call.args or not isinstance(call.args[0], ast.Name):
        return None
    qualified = _names.dotted(call.func, names)
    family: Family | None = None
    if qualified in _names.REGISTER_FUNCTION:
        family = "register_pytree_node"
    elif qualified in _names.REGISTER_DATACLASS:
        family = "register_dataclass"
    elif qualified in _names.REGISTER_CLASS:
        family = _decorator_family(qualified)
    return None if family is None else (call.args[0].id, family, call)


def find(tree: ast.Module, names: dict[str, str], *, namedtuples: bool) -> list[Found]:
    """Every top-level class of `tree`, in order, with its registration."""
    classes: dict[str, Found] = {}
    duplicates: set[str] = set()
    for stmt in tree.body:
        if isinstance(stmt, ast.ClassDef):
            if stmt.name in classes:
                duplicates.add(stmt.name)
            bases = [_names.dotted(b, names) for b in stmt.bases]
            found = Found(stmt.name, stmt, None, bases)
            for i, decorator in enumerate(stmt.decorator_list):
                family = _decorator_family(_names.dotted(decorator, names))
                if family is not None:
                    _set_family(found, family)
                    found.decorator = i
            if any(b in _names.FLAX_BASE for b in bases) and found.family != "flax.struct":
                _set_family(found, "flax.struct")  # decorated too: flax keeps the one dataclass
            if namedtuples and any(b in _names.NAMEDTUPLE for b in bases):
                _set_family(found, "NamedTuple")
            classes[stmt.name] = found
        registered = _registration_call(stmt, names)
        if registered is not None and registered[0] in classes:
            name, family, call = registered
            _set_family(classes[name], family)
            classes[name].registration = call
    for name in duplicates:
        classes[name].registered_twice = True
    return list(classes.values())
