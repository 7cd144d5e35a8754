"""BrainPy's JIT-tutorial models (LogisticRegression, Linear, LinearNet, RandomState) as
treeclasses: class objects under `jax.jit` without `dyn_vars`.

In BrainPy (`brainpy.math.jit` on a `bp.Base` object), every array that changes must
be a `bm.Variable` updated in place, and either BrainPy finds it or you list it in
`dyn_vars`. Forget one and it is compiled in as a constant: the tutorial's
`bm.jit(l.update, dyn_vars=[l.w])` keeps returning the old result after `l.b[:] = 2.`,
and a jitted `bm.random.normal` returns the same numbers at every call unless the
global `RandomState` is in `dyn_vars`.

Here each model is a `tc.TreeClass`: its arrays are dynamic fields, so passing the
model to a jitted function traces all of them, always; nothing is declared and nothing
is baked in. Training is `jax.value_and_grad` of a `loss` method (the gradient is a
model) and plain SGD (`jax.tree.map`) inside one `lax.scan`, as in the tutorial's
`bm.optimizers.SGD` loop:

- `LogisticRegression`: the tutorial's update `w <- w - X^T ((sigmoid(Y X w) - 1) Y)`
  is one gradient step (learning rate 1) on the summed loss `sum log(1 + e^{-Y X w})`;
  `jax.grad` of that loss reproduces it, and we train on the mean loss;
- `Linear`: `x @ w + b`; replacing `b` changes the jitted result (no `dyn_vars`);
- `LinearNet`: `(x @ w + b) @ r`, mean squared error, SGD with the tutorial's learning
  rate 1e-6 for 30 steps (the tutorial printed losses from 103.74 down to 10.04; from
  its initialisation, uniform [0, 1) weights and data, we measure about 6e6 at step 0,
  which SGD brings to about 15 in those 30 steps);
- `RandomState`: the key is a field, and sampling returns the next state with the
  sample, so a jitted draw differs at every call (the tutorial's `f1() == f1()`).

    python examples/brainpy_models.py
    python examples/brainpy_models.py --quick       # used by the tests
    python examples/brainpy_models.py --plot losses.png
"""

from __future__ import annotations

import argparse
import functools
import sys
from typing import Any, Self, TypeVar

import jax
import jax.numpy as jnp

import treeclass as tc

_Model = TypeVar("_Model")


class LogisticRegression(tc.TreeClass):
    """Labels `Y` in {-1, 1}; `p(Y | X) = sigmoid(Y X w)`. The tutorial initialises
    `w = 2 * ones(dimension) - 1.3`."""

    w: jax.Array

    @classmethod
    def create(cls, dimension: int) -> Self:
        return cls(w=2.0 * jnp.ones(dimension) - 1.3)

    def tutorial_update(self, X: jax.Array, Y: jax.Array) -> Self:  # noqa: N803
        """The tutorial's `__call__`, returning the new model instead of `self.w[:] = ...`."""
        u = jnp.dot(((1.0 / (1.0 + jnp.exp(-Y * jnp.dot(X, self.w))) - 1.0) * Y), X)
        return self.replace(w=self.w - u)

    def summed_loss(self, X: jax.Array, Y: jax.Array) -> jax.Array:  # noqa: N803
        """`sum log(1 + exp(-Y X w))`: `tutorial_update` is one gradient step on it."""
        return jnp.sum(jax.nn.softplus(-Y * (X @ self.w)))

    def loss(self, X: jax.Array, Y: jax.Array) -> jax.Array:  # noqa: N803
        return self.summed_loss(X, Y) / Y.shape[0]

    def accuracy(self, X: jax.Array, Y: jax.Array) -> jax.Array:  # noqa: N803
        return jnp.mean(jnp.sign(X @ self.w) == Y)


class Linear(tc.TreeClass):
    """`x @ w + b`: the tutorial's `Linear`, whose `b` had to be in `dyn_vars`."""

    w: jax.Array
    b: jax.Array

    @classmethod
    def create(cls, key: jax.Array, n_in: int, n_out: int) -> Self:
        return cls(w=jax.random.uniform(key, (n_in, n_out)), b=jnp.zeros(n_out))

    @tc.jit
    def update(self, x: jax.Array) -> jax.Array:
        return x @ self.w + self.b


class LinearNet(tc.TreeClass):
    """`(x @ w + b) @ r` with a mean squared error: the tutorial's `LinearNet`."""

    w: jax.Array
    b: jax.Array
    r: jax.Array

    @classmethod
    def create(cls, key: jax.Array, n_in: int, n_out: int) -> Self:
        kw, kr = jax.random.split(key)
        return cls(
            w=jax.random.uniform(kw, (n_in, n_out)),
            b=jnp.zeros(n_out),
            r=jax.random.uniform(kr, (n_out, 1)),
        )

    def update(self, x: jax.Array) -> jax.Array:
        h = x @ self.w + self.b  # x: f32[batch, n_in]
        return h @ self.r

    def loss(self, x: jax.Array, y: jax.Array) -> jax.Array:
        return jnp.mean((self.update(x) - y) ** 2)


class RandomState(tc.TreeClass):
    """A random number generator whose state is a key field (BrainPy's `RandomState`
    is a `Variable` that has to be listed in `dyn_vars`)."""

    key: jax.Array

    def normal(self, shape: tuple[int, ...]) -> tuple[Self, jax.Array]:
        """A standard normal sample and the state to draw the next one from."""
        key, sub = jax.random.split(self.key)
        return self.replace(key=key), jax.random.normal(sub, shape)


draw_normal = jax.jit(RandomState.normal, static_argnames="shape")


@functools.partial(jax.jit, static_argnames="steps")
def train(model: _Model, x: jax.Array, y: jax.Array, lr: jax.Array | float, *, steps: int
          ) -> tuple[_Model, jax.Array]:
    """`steps` steps of plain SGD on `model.loss(x, y)` in one `lax.scan`.

    `model` is any treeclass with a `loss` method: `jax.value_and_grad` of the unbound
    method differentiates with respect to `self`, so the gradient is a model too. The
    learning rate is traced: a new one does not recompile. Returns the trained model and
    the loss before each step.
    """
    grad_loss = jax.value_and_grad(type(model).loss)

    def step(m: _Model, _: None) -> tuple[_Model, jax.Array]:
        loss, grads = grad_loss(m, x, y)
        return jax.tree.map(lambda p, g: p - lr * g, m, grads), loss

    return jax.lax.scan(step, model, length=steps)


@functools.partial(jax.jit, static_argnames=("n", "dimension"))
def logistic_data(key: jax.Array, n: int, dimension: int = 10) -> tuple[jax.Array, jax.Array]:
    """The tutorial's uniform points, labelled in {-1, 1} by a fixed linear rule (the
    tutorial's labels are uniform noise, which nothing can fit)."""
    X = jax.random.uniform(key, (n, dimension))  # noqa: N806
    rule = jnp.linspace(-1.0, 1.0, dimension)
    return X, jnp.sign(X @ rule + 1e-3)


@jax.jit
def tutorial_vs_grad(model: LogisticRegression, X: jax.Array, Y: jax.Array  # noqa: N803
                     ) -> tuple[jax.Array, jax.Array]:
    """`w` after the tutorial's update, and after one gradient step (rate 1) on the
    summed loss: the same up to rounding."""
    by_hand = model.tutorial_update(X, Y).w
    by_grad = model.w - jax.grad(LogisticRegression.summed_loss)(model, X, Y).w
    return by_hand, by_grad


def _curve(losses: Any, per_line: int = 10) -> str:
    values = [f"{float(v):.4g}" for v in losses]
    lines = [" ".join(values[i : i + per_line]) for i in range(0, len(values), per_line)]
    return "\n           ".join(lines)


def plot(curves: dict[str, Any], path: str) -> None:
    import matplotlib  # optional: only --plot needs it

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(curves), figsize=(4 * len(curves), 3))
    for ax, (name, losses) in zip(axes, curves.items(), strict=True):
        ax.plot(jax.device_get(losses))
        ax.set(xlabel="step", ylabel="loss", title=name, yscale="log")
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description="BrainPy's JIT-tutorial models as treeclasses, trained with jax.grad."
    )
    parser.add_argument("--points", type=int, default=None, help="logistic data (200000)")
    parser.add_argument("--quick", action="store_true", help="a small run for tests: 2000 points")
    parser.add_argument("--plot", metavar="PATH", help="save the loss curves (needs matplotlib)")
    args = parser.parse_args(argv)
    if args.points is None:
        args.points = 2000 if args.quick else 200_000
    if args.points < 1:
        parser.error("--points must be positive")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    k_data, k_lin, k_net, k_x, k_y = jax.random.split(jax.random.key(0), 5)

    # LogisticRegression: the tutorial's update is a gradient step; then SGD on the mean.
    X, Y = logistic_data(k_data, args.points)  # noqa: N806
    logistic = LogisticRegression.create(10)
    by_hand, by_grad = tutorial_vs_grad(logistic, X, Y)
    same = bool(jnp.allclose(by_hand, by_grad, rtol=1e-4, atol=1e-3 * args.points))
    fitted, logistic_losses = train(logistic, X, Y, 1.0, steps=200)
    print(f"logistic:  tutorial update == one jax.grad step: {same}")
    print(f"logistic:  {args.points} points, 200 SGD steps: loss "
          f"{float(logistic_losses[0]):.3f} -> {float(logistic_losses[-1]):.3f}, "
          f"accuracy {float(fitted.accuracy(X, Y)):.3f}")

    # Linear: a changed field changes the jitted result, no dyn_vars.
    linear = Linear.create(k_lin, 10, 3)
    x = jnp.zeros(10)
    outs = [linear.update(x), linear.replace(b=jnp.ones(3)).update(x),
            linear.replace(b=jnp.full(3, 2.0, jnp.float32)).update(x)]
    print(f"linear:    update(0) with b = 0, 1, 2: {[o.tolist() for o in outs]} "
          f"({Linear.update.trace_log.count} compile)")

    # LinearNet: the tutorial's training run.
    net = LinearNet.create(k_net, 100, 200)
    xs = jax.random.uniform(k_x, (1000, 100))
    ys = jax.random.uniform(k_y, (1000, 1))
    net, net_losses = train(net, xs, ys, 1e-6, steps=30)
    print(f"linearnet: 30 SGD steps, lr 1e-6, loss per step:\n           {_curve(net_losses)}")

    # RandomState: the key advances, so two jitted draws differ.
    rng = RandomState(key=jax.random.key(1234))
    rng, first = draw_normal(rng, shape=(10,))
    rng, second = draw_normal(rng, shape=(10,))
    print(f"random:    two jitted draws equal: {bool(jnp.all(first == second))} "
          f"(BrainPy without dyn_vars: True)")
    if args.plot:
        plot({"LogisticRegression": logistic_losses, "LinearNet": net_losses}, args.plot)
        print(f"plot:      {args.plot}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
