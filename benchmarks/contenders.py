"""What the per-call measurements time: one class written every way we compare, and a
100-node tree.

The class has 8 small float32 arrays and 2 statics (an int and a str). Raw containers
cannot hold statics in their treedef (an `int` or `str` child would be a leaf, and jit
refuses a `str` leaf), so the tuple, NamedTuple and dict carry the 8 arrays only; the
statics live outside them, as they would in hand-rolled code. The tuple's `make()`
still takes the two statics (and drops them) so its construction binds the same 10
keyword arguments as the classes.

Each `Contender` says how to build it (`new(**kwargs)`) and how to change field `a3`
(`replace`, a statement over `obj` and `x`), so `core.py` times every contender with
the same statement shapes. The peer libraries' versions are in `peers.py`.

The 100-node tree is a root holding a tuple of 99 layers of two small arrays each:

    Net(layers=(Layer(w, b), Layer(w, b), ...))     # 1 + 99 class nodes, 198 leaves
    ((( w, b), (w, b), ...),)                      # the same shape as nested tuples

Its layers have no statics, so the tuples have its exact structure (statics: above).
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
    """A way of writing what is measured."""

    name: str
    new: Callable[..., Any]
    """The constructor, called as `new(**kwargs)`."""
    kwargs: dict[str, Any] = dataclasses.field(default_factory=dict)
    replace: str = ""
    """A statement returning `obj` with field `a3` set to `x` (the 8-field class only),
    which may call the functions in `REPLACE_NAMESPACE`."""
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


# A dataclass's one-field change (equinox and jax_dataclasses use it too: the latter's
# `jdc.replace` is this very function).
DC_REPLACE = "dataclasses_replace(obj, a3=x)"
REPLACE_NAMESPACE = {"replace_tuple": replace_tuple, "dataclasses_replace": dataclasses.replace}


Named = NamedTuple("Named", [(name, jax.Array) for name in ARRAYS])  # a0 ... a7


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

    def __init__(self, a0, a1, a2, a3, a4, a5, a6, a7, n, name) -> None:
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
class WithPostInit(Plain):
    def __post_init__(self) -> None:
        # A typical cheap validation of a static field.
        if self.n < 0:
            msg = f"n must be >= 0, got {self.n}"
            raise ValueError(msg)


@tc.treeclass(frozen=False)  # frozen=False: for the type checkers (assignments in __init__)
class HandInit(Plain):
    """`Plain`'s fields, set by a hand-written `__init__` (equinox's style)."""

    def __init__(self, a0, a1, a2, a3, a4, a5, a6, a7, n, name) -> None:
        self.a0, self.a1, self.a2, self.a3 = a0, a1, a2, a3
        self.a4, self.a5, self.a6, self.a7 = a4, a5, a6, a7
        self.n, self.name = n, name


class BasePlain(Plain, tc.TreeClass):
    """`Plain`'s fields, in the base-class form: the same generated code as the
    decorator's, so its rows should match the decorator's."""


# --- the rejected designs (see rejected.py) ---------------------------------------

DataclassNode = rejected.dataclass_node("DataclassNode", ARRAYS, STATICS)
CallbackNode = rejected.callback_node("CallbackNode", ARRAYS, STATICS)


def contenders() -> list[Contender]:
    """The floor, treeclass and the rejected designs; the tuple comes first (the baseline)."""
    kw, arrays = all_kwargs(), array_kwargs()
    arrays_only = "8 arrays only: statics kept outside"
    with_replace_method = (  # (name, class, note)
        ("register_pytree_node_class", HandWritten, "JAX docs idiom; unflatten calls cls(...)"),
        ("treeclass", Plain, ""),
        ("treeclass: TreeClass base", BasePlain, "Plain's fields, base-class form: same code"),
        ("treeclass + __post_init__", WithPostInit, ""),
        ("treeclass: hand-written __init__", HandInit, "self.a0 = a0, ... in __init__"),
        ("(a) C++ dataclass node", DataclassNode, "unflatten = cls(**kw)"),
        ("(b) Python callbacks", CallbackNode, "no cached flat tuple"),
    )
    return [
        Contender("tuple", make_tuple, kw, "replace_tuple(obj, x)", arrays_only),
        Contender("NamedTuple", Named, arrays, "obj._replace(a3=x)", arrays_only),
        Contender("dict", dict, arrays, "{**obj, 'a3': x}", arrays_only),
        Contender(
            "register_dataclass", FrozenDataclass, kw, DC_REPLACE, "frozen dataclass, C++ node"
        ),
        *(
            Contender(name, cls, kw, "obj.replace(a3=x)", note)
            for name, cls, note in with_replace_method
        ),
    ]


# --- the 100-node tree ------------------------------------------------------------

LAYERS = 99


@tc.treeclass
class Layer:
    w: jax.Array
    b: jax.Array


@tc.treeclass
class Net:
    layers: tuple[Layer, ...]


LayerA = rejected.dataclass_node("LayerA", ("w", "b"))
NetA = rejected.dataclass_node("NetA", ("layers",))
LayerB = rejected.callback_node("LayerB", ("w", "b"))
NetB = rejected.callback_node("NetB", ("layers",))


def trees() -> list[Contender]:
    """The nested tuples (the baseline, first), treeclass and the two rejected designs."""
    params = [
        (jnp.full((4,), float(i), jnp.float32), jnp.full((4,), -float(i), jnp.float32))
        for i in range(LAYERS)
    ]
    made = {
        "nested tuples": (tuple((w, b) for w, b in params),),
        "treeclass": Net(tuple(Layer(w, b) for w, b in params)),
        "(a) C++ dataclass node": NetA(tuple(LayerA(w, b) for w, b in params)),
        "(b) Python callbacks": NetB(tuple(LayerB(w, b) for w, b in params)),
    }
    return [Contender(name, lambda tree: tree, {"tree": tree}) for name, tree in made.items()]
