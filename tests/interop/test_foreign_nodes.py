"""Nodes of other libraries held in treeclass fields (docs/with-other-libraries.md).

Pinned here: `where=` in `tc.replace_at`, `tc.partition`, `tc.grad` and `tc.value_and_grad`
reaches into every node JAX flattens with key paths (equinox Modules, flax.struct and chex
dataclasses, `register_dataclass` classes), which is rebuilt by JAX's unflatten; a wrong
path names the path and the closest child; errors advise only what the caller takes; and a
function inside such a node (`eqx.nn.MLP`'s activation) is carried as static by `tc.jit`,
`tc.grad`, `tc.partition` and `tc.apply_updates`, while a function in a treeclass's own
dynamic field is still an error naming `Class.field`, with advice that works.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import pytest

import treeclass as tc

eqx = pytest.importorskip("equinox")
flax_struct = pytest.importorskip("flax.struct")
optax = pytest.importorskip("optax")

# optax and equinox's layers are written for JAX's default promotion rules.
pytestmark = pytest.mark.usefixtures("jax_defaults")


class EqxEncoder(eqx.Module):
    w: jax.Array
    b: jax.Array
    width: int = eqx.field(static=True, default=2)


@flax_struct.dataclass
class FlaxEncoder:
    w: jax.Array
    b: jax.Array
    width: int = flax_struct.field(pytree_node=False, default=2)


try:  # not installed for every Python: its case is left out there
    import chex

    @chex.dataclass(frozen=True)
    class ChexEncoder:
        w: jax.Array
        b: jax.Array

except ImportError:
    chex = None


@jax.tree_util.register_dataclass
@dataclasses.dataclass(frozen=True)
class RegisteredEncoder:
    w: jax.Array
    b: jax.Array


_ENCODERS: dict[str, Callable[[jax.Array, jax.Array], Any]] = {
    "equinox Module": EqxEncoder,
    "flax.struct": FlaxEncoder,
    "register_dataclass": RegisteredEncoder,
}
if chex is not None:
    _ENCODERS["chex dataclass"] = lambda w, b: ChexEncoder(w=w, b=b)


class Net(tc.TreeClass):
    enc: Any
    head: jax.Array


def net(kind: str) -> Net:
    return Net(_ENCODERS[kind](jnp.ones(2), jnp.zeros(2)), jnp.ones(3))


def loss(n: Net) -> jax.Array:
    return jnp.sum(n.enc.w * 2.0) + jnp.sum(n.enc.b) + jnp.sum(n.head)


@pytest.mark.parametrize("kind", list(_ENCODERS))
def test_replace_at_reaches_into_the_node_and_rebuilds_it_by_unflatten(kind: str) -> None:
    # Regression: refused with "`where` reaches into treeclasses...".
    n = net(kind)
    got = tc.replace_at(n, lambda n: n.enc.w, jnp.full(2, 5.0))
    assert type(got.enc) is type(n.enc)
    assert got.enc.w.tolist() == [5.0, 5.0]
    assert got.enc.b is n.enc.b  # the other child shared
    assert got.head is n.head
    assert jax.tree.structure(got) == jax.tree.structure(n)
    assert n.enc.w.tolist() == [1.0, 1.0]  # the input is unchanged
    both = tc.replace_at(n, lambda n: (n.enc.w, n.enc.b), fn=lambda x: x + 1.0)
    assert both.enc.b.tolist() == [1.0, 1.0]


@pytest.mark.parametrize("kind", list(_ENCODERS))
def test_where_selects_inside_the_node_in_partition_and_grad(kind: str) -> None:
    n = net(kind)
    params, rest = tc.partition(n, lambda n: n.enc.w)
    assert params.enc.w is n.enc.w
    assert params.enc.b is None
    assert params.head is None
    assert rest.enc.w is None
    grads = tc.grad(loss, where=lambda n: n.enc.w)(n)
    assert grads.enc.w.tolist() == [2.0, 2.0]
    assert grads.enc.b is None
    assert grads.head is None
    value, grads = tc.value_and_grad(loss, where=lambda n: (n.enc.b, n.head))(n)
    assert float(value) == 7.0
    assert grads.enc.w is None
    assert grads.enc.b.tolist() == [1.0, 1.0]


@pytest.mark.parametrize("kind", ["equinox Module", "flax.struct"])
def test_a_wrong_path_names_the_path_and_the_closest_child(kind: str) -> None:
    n = net(kind)
    match = (
        r"^Net\.enc\.ww: no such child, did you mean 'w'\? \w+'s children, as JAX flattens it: w, b"
    )
    with pytest.raises(AttributeError, match=match):
        tc.replace_at(n, lambda n: n.enc.ww, 0.0)
    with pytest.raises(AttributeError, match=match):
        tc.partition(n, lambda n: n.enc.ww)
    # A static field of the node is no child: JAX does not flatten it.
    with pytest.raises(
        AttributeError, match=r"^Net\.enc\.width: no such child.*static fields are not children"
    ):
        tc.grad(loss, where=lambda n: n.enc.width)(n)


def test_errors_advise_only_what_the_caller_takes() -> None:
    # Regression: partition and grad were told to "pass fn=", which only
    # replace_at takes.
    n = net("equinox Module")
    for where in (lambda n: n.enc.w.T, lambda n: n.head.T):
        with pytest.raises(TypeError, match=r"and no further: replace it whole, pass fn=lambda x"):
            tc.replace_at(n, where, 0.0)
        for call in (lambda w=where: tc.partition(n, w), lambda w=where: tc.grad(loss, where=w)(n)):
            with pytest.raises(
                TypeError, match=r"and no further: select Net\.(enc\.w|head) itself"
            ) as info:
                call()
            assert "fn=" not in str(info.value)
    # A `where` that computes: replace_at's error shows fn=, partition's does not.
    with pytest.raises(TypeError, match=r"(?s)did more than read it.*fn=lambda w: w \* 2"):
        tc.replace_at(n, lambda n: n.head * 2, 0.0)
    with pytest.raises(TypeError, match=r"^Net\.head: `where` did more than read it") as info:
        tc.partition(n, lambda n: n.head * 2)
    assert "fn=" not in str(info.value)


class Custom:
    """Flattened by `register_pytree_node`, without key paths: selected or replaced whole."""

    def __init__(self, a: Any) -> None:
        self.a = a


jax.tree_util.register_pytree_node(Custom, lambda c: ((c.a,), None), lambda _, a: Custom(*a))


def test_a_node_without_key_paths_is_taken_whole() -> None:
    n = Net(Custom(jnp.ones(2)), jnp.ones(3))
    with pytest.raises(
        TypeError,
        match=r"^Net\.enc\.a: Net\.enc holds a Custom, which JAX flattens without key paths.*select Net\.enc itself",
    ):
        tc.partition(n, lambda n: n.enc.a)
    assert tc.partition(n, lambda n: n.enc)[0].head is None
    assert tc.replace_at(n, lambda n: n.enc, fn=lambda c: Custom(c.a + 1)).enc.a.tolist() == [
        2.0,
        2.0,
    ]


# ---------------------------------------------------------------------------------------
# Functions inside other libraries' nodes: carried as static.


class Model(tc.TreeClass):
    mlp: Any
    scale: jax.Array

    def __call__(self, x: jax.Array) -> jax.Array:
        return self.scale * self.mlp(x)


def model() -> Model:
    return Model(eqx.nn.MLP(2, 1, 8, 1, key=jax.random.key(0)), jnp.ones(1))


def mse(m: Model, x: jax.Array, y: jax.Array) -> jax.Array:
    return jnp.mean((jax.vmap(m)(x) - y) ** 2)


def test_an_equinox_mlp_in_a_field_trains_under_jit_grad_optax_and_apply_updates() -> None:
    # Regression: "The problematic value is of type custom_jvp ... at path m.mlp.activation".
    m = model()
    opt = optax.adam(1e-2)
    state = opt.init(tc.partition(m)[0])
    x = jax.random.normal(jax.random.key(1), (16, 2))
    y = jnp.sum(x, axis=1, keepdims=True)

    @tc.jit
    def step(m: Model, state: Any) -> tuple[Model, Any, jax.Array]:
        value, grads = tc.value_and_grad(mse)(m, x, y)
        updates, state = opt.update(grads, state, tc.partition(m)[0])
        return tc.apply_updates(m, updates), state, value

    first = None
    for _ in range(30):
        m, state, value = step(m, state)
        first = value if first is None else first
    assert float(value) < float(first)
    assert step.trace_log.count == 1  # one compile: the functions are in the treedef
    assert m.mlp.activation is jax.nn.relu  # the very function, not a copy or a wrapper
    assert type(m.mlp) is eqx.nn.MLP
    # Eagerly too: the gradient has None at the functions.
    grads = tc.grad(mse)(m, x, y)
    assert grads.mlp.activation is None
    assert grads.mlp.layers[0].weight.shape == (8, 2)


def test_a_function_in_a_foreign_node_matches_equinoxs_own_filtered_transforms() -> None:
    m = model()
    x = jnp.ones((4, 2))
    y = jnp.zeros((4, 1))
    ours = tc.jit(tc.grad(mse))(m, x, y)
    theirs = eqx.filter_jit(eqx.filter_grad(lambda m: mse(m, x, y)))(m)
    for a, b in zip(
        jax.tree.leaves(ours), jax.tree.leaves(eqx.filter(theirs, eqx.is_array)), strict=True
    ):
        assert bool(jnp.allclose(a, b))


def test_a_function_returned_from_tc_jit_inside_a_node_comes_back() -> None:
    @tc.jit
    def build(scale: jax.Array) -> Model:
        return Model(eqx.nn.MLP(2, 1, 4, 1, key=jax.random.key(0)), scale)

    built = build(jnp.ones(1))
    assert built.mlp.activation is jax.nn.relu
    assert built(jnp.ones(2)).shape == (1,)


@jax.tree_util.register_dataclass
@dataclasses.dataclass(frozen=True)
class Config:  # a foreign node holding a function, hashable: fit to pass as static
    fn: Callable[..., Any]
    n: int = dataclasses.field(default=2, metadata={"static": True})


def test_a_static_argument_holding_a_function_in_a_node_is_passed_as_it_is() -> None:
    # The carried functions of the traced arguments were also wrapped in a static one,
    # which JAX passes unflattened: the body got the wrapper ("not callable").
    runs: list[int] = []

    @tc.jit(static_argnames="config")
    def apply(m: Model, x: jax.Array, config: Config) -> jax.Array:
        runs.append(1)
        return config.fn(m(x)) * config.n

    for _ in range(3):
        assert apply(model(), jnp.ones(2), config=Config(jnp.tanh)).shape == (1,)
    assert apply.trace_log.count == len(runs) == 1


def test_the_body_runs_once_when_jax_refuses_its_result_beside_a_static_function() -> None:
    # A static argument's function started the retry after the body had run: twice.
    runs: list[int] = []

    @tc.jit(static_argnames="config")
    def bad(x: jax.Array, config: Config) -> Any:
        runs.append(1)
        return "not an array"

    with pytest.raises(TypeError):  # JAX's error about the result, unchanged
        bad(jnp.ones(2), config=Config(jnp.tanh))
    assert len(runs) == 1


def test_lower_trace_and_eval_shape_carry_the_functions_in_a_node_as_a_call_does() -> None:
    # They were jax.jit's own: JAX's "Error interpreting argument" for an eqx.nn.MLP.
    apply = tc.jit(lambda m, x: m(x))
    m, x = model(), jnp.ones(2)
    assert apply.eval_shape(m, x).shape == (1,)
    assert apply.lower(m, x).compile() is not None
    assert apply.trace(m, x).out_info.shape == (1,)


def test_partition_never_selects_a_function_in_a_foreign_node() -> None:
    m = model()
    everything, rest = tc.partition(m, only_trainable=False)
    assert everything.mlp.activation is None
    assert rest.mlp.activation is jax.nn.relu
    assert tc.combine(everything, rest).mlp.activation is jax.nn.relu
    assert jax.tree.leaves(jax.tree.map(jnp.zeros_like, everything))  # as optax's init does


class Conv(tc.TreeClass):
    w: jax.Array

    def __call__(self, x: jax.Array) -> jax.Array:
        return x @ self.w


class CNN(tc.TreeClass):
    layers: tuple[Any, ...]

    def __call__(self, x: jax.Array) -> jax.Array:
        for layer in self.layers:
            x = layer(x)
        return x


def cnn(act: Any) -> CNN:
    return CNN((Conv(jnp.ones((2, 3))), act, Conv(-jnp.ones((3, 1)))))


def test_a_function_among_layers_is_advised_a_partial_that_works() -> None:
    # Regression: the advice `layers: tc.Static[tuple[Any, ...]]` made every
    # weight a compile-time constant, and tc.value_and_grad then found nothing to train.
    apply = tc.jit(lambda m, x: m(x))
    match = (
        r"(?s)^CNN\.layers is a dynamic field holding a custom_jvp .* at CNN\.layers\[1\], "
        r"which JAX cannot trace.*Hold just the function as static.*"
        r"jax\.tree_util\.Partial\(relu\)   # in place of relu"
    )
    with pytest.raises(TypeError, match=match) as info:
        apply(cnn(jax.nn.relu), jnp.ones(2))
    assert "tc.Static[tuple" not in str(info.value)
    with pytest.raises(TypeError, match=match):
        tc.grad(lambda m: m(jnp.ones(2)).sum())(cnn(jax.nn.relu))
    # The advice works: one compile for new weights, and the weights are trained.
    fixed = cnn(jax.tree_util.Partial(jax.nn.relu))
    assert apply(fixed, jnp.ones(2)).tolist() == [-6.0]
    assert apply(
        tc.replace_at(fixed, lambda m: m.layers[0].w, jnp.zeros((2, 3))), jnp.ones(2)
    ).tolist() == [0.0]
    assert apply.trace_log.count == 1
    grads = tc.jit(tc.grad(lambda m: m(jnp.ones(2)).sum()))(fixed)
    assert grads.layers[0].w.tolist() == [[-1.0] * 3] * 2


class Activated(tc.TreeClass):
    w: jax.Array
    act: Callable[..., Any]


def test_a_function_in_a_treeclass_field_is_still_an_error_naming_the_field() -> None:
    a = Activated(jnp.ones(2), jax.nn.relu)
    match = (
        r"(?s)^Activated\.act is a dynamic field holding a custom_jvp.*act: tc\.Static\[Callable"
    )
    with pytest.raises(TypeError, match=match):
        tc.jit(lambda a: a.act(a.w))(a)
    with pytest.raises(TypeError, match=match):
        tc.grad(lambda a: a.act(a.w).sum())(a)
    # Beside an equinox layer (whose function is carried), the treeclass's own still errs.
    with pytest.raises(TypeError, match=r"^Activated\.act is a dynamic field"):
        tc.jit(lambda m, a: m(a.act(a.w)))(model(), a)
