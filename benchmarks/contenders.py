"""One class, 8 small float32 arrays and 2 statics (an int and a str), written every way
we compare: raw containers (the floor), treeclass, and the designs treeclass rejected.

Raw containers cannot hold statics in their treedef (an `int` or `str` child would be a
leaf, and jit refuses a `str` leaf), so the tuple, NamedTuple and dict carry the 8
arrays only; the statics live outside them, as they would in hand-rolled code. The
tuple's `make()` still takes the two statics (and drops them) so its construction
binds the same 10 keyword arguments as the classes.

Each `Contender` says how to build it (`new(**kwargs)`) and how to change field `a3`
(`replace`, a statement over `obj` and `x`), so `core.py` can time every contender
with the same statement shapes.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp

import treeclass as tc
from benchmarks import rejected

ARRAYS = tuple(f"a{i}" for i in range(8))
STATICS = ("n", "name")


@dataclasses.dataclass(frozen=True)
class Contender:
    """A way of writing the benchmark class."""

    name: str
    group: str
    """"floor", "treeclass", "rejected" or "peer"."""
    new: Callable[..., Any]
    """The constructor, called as `new(**kwargs)`."""
    kwargs: dict[str, Any]
    replace: str
    """A statement returning `obj` with field `a3` set to `x`."""
    namespace: dict[str, Any] = dataclasses.field(default_factory=dict)
    """Names `replace` uses besides `obj` and `x`."""
    note: str = ""

    def instance(self) -> Any:
        return self.new(**self.kwargs)


def array_kwargs() -> dict[str, jax.Array]:
    return {name: jnp.full((4,), float(i), jnp.float32) for i, name in enumerate(ARRAYS)}


def all_kwargs() -> dict[str, Any]:
    return {**array_kwargs(), "n": 3, "name": "dense"}


# --- the floor --------------------------------------------------------------------


def make_tuple(
    a0: Any, a1: Any, a2: Any, a3: Any, a4: Any, a5: Any, a6: Any, a7: Any, n: int, name: str
) -> tuple[Any, ...]:
    """The tuple's "constructor": binds the same 10 arguments, keeps the 8 arrays."""
    return (a0, a1, a2, a3, a4, a5, a6, a7)


def replace_tuple(t: tuple[Any, ...], a3: Any) -> tuple[Any, ...]:
    """The tuple's "replace": a new tuple with element 3 changed."""
    return (t[0], t[1], t[2], a3, t[4], t[5], t[6], t[7])


class Named(NamedTuple):
    a0: jax.Array
    a1: jax.Array
    a2: jax.Array
    a3: jax.Array
    a4: jax.Array
    a5: jax.Array
    a6: jax.Array
    a7: jax.Array


@functools.partial(jax.tree_util.register_dataclass, data_fields=ARRAYS, meta_fields=STATICS)
@dataclasses.dataclass(frozen=True)
class FrozenDataclass:
    a0: jax.Array
    a1: jax.Array
    a2: jax.Array
    a3: jax.Array
    a4: jax.Array
    a5: jax.Array
    a6: jax.Array
    a7: jax.Array
    n: int
    name: str


@jax.tree_util.register_pytree_node_class
class HandWritten:
    """The `register_pytree_node_class` idiom from the JAX documentation."""

    def __init__(
        self,
        a0: Any,
        a1: Any,
        a2: Any,
        a3: Any,
        a4: Any,
        a5: Any,
        a6: Any,
        a7: Any,
        n: int,
        name: str,
    ) -> None:
        self.a0, self.a1, self.a2, self.a3 = a0, a1, a2, a3
        self.a4, self.a5, self.a6, self.a7 = a4, a5, a6, a7
        self.n, self.name = n, name

    def tree_flatten(self) -> tuple[tuple[Any, ...], tuple[Any, ...]]:
        children = (self.a0, self.a1, self.a2, self.a3, self.a4, self.a5, self.a6, self.a7)
        return children, (self.n, self.name)

    @classmethod
    def tree_unflatten(cls, aux: tuple[Any, ...], children: Any) -> HandWritten:
        return cls(*children, *aux)

    def replace(self, **changes: Any) -> HandWritten:
        return HandWritten(**{**self.__dict__, **changes})


# --- treeclass --------------------------------------------------------------------


@tc.treeclass
class Plain:
    a0: jax.Array
    a1: jax.Array
    a2: jax.Array
    a3: jax.Array
    a4: jax.Array
    a5: jax.Array
    a6: jax.Array
    a7: jax.Array
    n: int = tc.static()
    name: str = tc.static()


@tc.treeclass
class WithPostInit:
    a0: jax.Array
    a1: jax.Array
    a2: jax.Array
    a3: jax.Array
    a4: jax.Array
    a5: jax.Array
    a6: jax.Array
    a7: jax.Array
    n: int = tc.static()
    name: str = tc.static()

    def __post_init__(self) -> None:
        # A typical cheap validation of a static field.
        if self.n < 0:
            msg = f"n must be >= 0, got {self.n}"
            raise ValueError(msg)


def base_class() -> type | None:
    """`Plain` in the base-class form, `class Plain(tc.TreeClass)`, where this treeclass
    has it (None otherwise): the same generated code as the decorator, so the row
    should match the decorator's."""
    if not hasattr(tc, "TreeClass"):
        return None

    class BasePlain(tc.TreeClass):
        a0: jax.Array
        a1: jax.Array
        a2: jax.Array
        a3: jax.Array
        a4: jax.Array
        a5: jax.Array
        a6: jax.Array
        a7: jax.Array
        n: int = tc.static()
        name: str = tc.static()

    return BasePlain


# --- the rejected designs (see rejected.py) ---------------------------------------

DataclassNode = rejected.dataclass_node("DataclassNode", ARRAYS, STATICS)
CallbackNode = rejected.callback_node("CallbackNode", ARRAYS, STATICS)


def contenders() -> list[Contender]:
    """The floor, treeclass and the rejected designs; the tuple comes first (the baseline)."""
    kw, arrays = all_kwargs(), array_kwargs()
    method = "obj.replace(a3=x)"
    dc_replace = "dataclasses_replace(obj, a3=x)"
    dc_ns = {"dataclasses_replace": dataclasses.replace}
    arrays_only = "8 arrays only: statics kept outside"
    return [
        Contender(
            "tuple",
            "floor",
            make_tuple,
            kw,
            "replace_tuple(obj, x)",
            {"replace_tuple": replace_tuple},
            note=arrays_only,
        ),
        Contender("NamedTuple", "floor", Named, arrays, "obj._replace(a3=x)", note=arrays_only),
        Contender("dict", "floor", dict, arrays, "{**obj, 'a3': x}", note=arrays_only),
        Contender(
            "register_dataclass",
            "floor",
            FrozenDataclass,
            kw,
            dc_replace,
            dc_ns,
            note="frozen dataclass, C++ node",
        ),
        Contender(
            "register_pytree_node_class",
            "floor",
            HandWritten,
            kw,
            method,
            note="JAX docs idiom; unflatten calls cls(...)",
        ),
        Contender("treeclass", "treeclass", Plain, kw, method),
        *(
            [Contender("treeclass: TreeClass base", "treeclass", base, kw, method,
                       note="class Plain(tc.TreeClass): same generated code")]
            if (base := base_class()) is not None
            else []
        ),
        Contender("treeclass + __post_init__", "treeclass", WithPostInit, kw, method),
        Contender(
            "(a) C++ dataclass node",
            "rejected",
            DataclassNode,
            kw,
            method,
            note="unflatten = cls(**kw)",
        ),
        Contender(
            "(b) Python callbacks",
            "rejected",
            CallbackNode,
            kw,
            method,
            note="no cached flat tuple",
        ),
    ]
