"""The 100-node tree: a root holding a tuple of 99 layers, each layer two small arrays.

    Net(layers=(Layer(w, b), Layer(w, b), ...))     # 1 + 99 class nodes, 198 leaves
    ((( w, b), (w, b), ...),)                      # the same shape as nested tuples

Layers have no static fields so that the tuple tree has exactly the same structure;
the statics' cost is measured on the 8-field class.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import jax
import jax.numpy as jnp

import treeclass as tc
from benchmarks import rejected

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


@dataclasses.dataclass(frozen=True)
class Tree:
    name: str
    group: str
    tree: Any


def trees() -> list[Tree]:
    """The nested tuple (the baseline, first), treeclass and the two rejected designs."""
    params = [
        (jnp.full((4,), float(i), jnp.float32), jnp.full((4,), -float(i), jnp.float32))
        for i in range(LAYERS)
    ]
    return [
        Tree("nested tuples", "floor", (tuple((w, b) for w, b in params),)),
        Tree("treeclass", "treeclass", Net(tuple(Layer(w, b) for w, b in params))),
        Tree("(a) C++ dataclass node", "rejected", NetA(tuple(LayerA(w, b) for w, b in params))),
        Tree("(b) Python callbacks", "rejected", NetB(tuple(LayerB(w, b) for w, b in params))),
    ]
