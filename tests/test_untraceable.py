"""`treeclass._untraceable`: the error naming `Class.field` for a leaf JAX cannot
trace, shared by `tc.jit` (tests/test_jit.py pins it end to end) and `tc.grad`."""

import jax
import jax.numpy as jnp
import pytest

import treeclass as tc
from treeclass._untraceable import static_args, untraceable_field_error

_JIT_ERROR = TypeError("Error interpreting argument to <function f> as an abstract array.")
_GRAD_ERROR = TypeError("Argument 'x' of type <class 'str'> is not a valid JAX type")


@tc.treeclass
class Config:
    w: jax.Array
    name: str


def f(x, cfg, *rest, scale=1.0):
    return x


def test_names_the_field_the_value_the_path_and_the_fixes():
    found = untraceable_field_error(_JIT_ERROR, f, (jnp.ones(1), Config(jnp.ones(1), "a")), {})
    assert isinstance(found, TypeError)
    assert str(found) == (
        "Config.name is a dynamic field holding a str ('a'), which JAX cannot trace "
        "(argument path: cfg.name).\n\n"
        "Dynamic fields are traced as arrays. If the value is configuration, make it static:\n\n"
        "    name: str = tc.static(...)\n\n"
        "or pass an array (jnp.asarray(...)) if it is data."
    )


@pytest.mark.parametrize("error", [_JIT_ERROR, _GRAD_ERROR])
def test_both_jax_wordings_are_recognised(error):
    found = untraceable_field_error(error, f, (1.0, Config(jnp.ones(1), "a")), {})
    assert found is not None


@pytest.mark.parametrize(
    "error", [TypeError("unsupported operand type(s) for +"), ValueError("Error interpreting argument")]
)
def test_any_other_error_is_left_alone(error):
    assert untraceable_field_error(error, f, (1.0, Config(jnp.ones(1), "a")), {}) is None


@pytest.mark.parametrize("static", [("cfg",), (1,)])
def test_static_arguments_are_never_blamed(static):
    args = (1.0, Config(jnp.ones(1), "a"))
    assert untraceable_field_error(_JIT_ERROR, f, args, {}, static) is None
    assert untraceable_field_error(_JIT_ERROR, f, (1.0,), {"cfg": args[1]}, static) is None


def test_extra_positional_and_keyword_arguments_are_labelled():
    bad = Config(jnp.ones(1), "a")
    found = untraceable_field_error(_JIT_ERROR, f, (1.0, None, bad), {})
    assert "argument path: args[2].name" in str(found)
    found = untraceable_field_error(_JIT_ERROR, f, (1.0, None), {"scale": bad})
    assert "argument path: scale.name" in str(found)


def test_a_bad_leaf_outside_any_treeclass_is_jaxs_to_report():
    assert untraceable_field_error(_JIT_ERROR, f, (["a"], None), {}) is None


def test_static_args_reads_both_jit_options():
    assert static_args({"static_argnames": "n", "static_argnums": (0, 2)}) == {"n", 0, 2}
    assert static_args({"static_argnames": ("a", "b"), "static_argnums": 1}) == {"a", "b", 1}
    assert static_args({}) == frozenset()
