"""The code-generation seam: one namespace and one linecache entry per class,
sentinels that read well in signatures."""

import inspect
import linecache

import jax
import jax.numpy as jnp

import treeclass as tc
from treeclass._core import codegen


@tc.treeclass
class Neuron:
    v: jax.Array
    w: jax.Array = tc.field(default_factory=lambda: jnp.zeros(1))
    tau: float = tc.static(20.0)


def test_sentinels_have_readable_reprs():
    assert repr(codegen.FACTORY) == "<factory>"
    assert repr(codegen.UNCHANGED) == "<unchanged>"


def test_one_namespace_per_class():
    init_globals = Neuron.__init__.__globals__
    assert Neuron.replace.__globals__ is init_globals  # type: ignore[attr-defined]
    assert init_globals["_tc_cls"] is Neuron
    assert init_globals["_tc_unflatten"].__globals__ is init_globals

    @tc.treeclass
    class Other:
        v: jax.Array

    assert Other.__init__.__globals__ is not init_globals
    assert Other.__init__.__globals__["_tc_cls"] is Other


def test_generated_functions_carry_the_class_qualname_and_source():
    assert Neuron.__init__.__qualname__ == "Neuron.__init__"
    assert Neuron.replace.__qualname__ == "Neuron.replace"  # type: ignore[attr-defined]
    filename = Neuron.__init__.__code__.co_filename
    assert filename == "<treeclass test_codegen.Neuron>"
    source = "".join(linecache.getlines(filename))
    for name in ("def __init__(", "def replace(", "def _tc_unflatten("):
        assert name in source
    assert "def _tc_finalize(" not in source  # only a hand-written __init__ needs it
    assert inspect.getsource(Neuron.replace).startswith("def replace(_tc_self, /, *,")  # type: ignore[attr-defined]


def test_same_qualname_gets_a_numbered_filename():
    def make():
        @tc.treeclass
        class Twice:
            x: jax.Array

        return Twice

    first, second = make(), make()
    name = first.__init__.__code__.co_filename
    assert second.__init__.__code__.co_filename == name[:-1] + "-2>"
    assert linecache.getlines(name)
