"""Fit a logistic regression with one jitted `lax.scan`, the model being a treeclass.

What it shows:

- the model is a `tc.TreeClass`: its weights are dynamic fields (traced leaves), its
  hyper-parameter `l2` is a static field (part of the treedef, a Python float inside
  the traced code);
- the training configuration (`Fit`: steps, learning rate, optimizer) is a treeclass
  with only static fields, so `jax.jit` keys its cache on those values without
  `static_argnums`;
- `jax.grad` of a loss *method* returns the gradients as an instance of the model,
  which `jax.tree.map` (plain SGD) or optax (`--optimizer adam`) applies;
- the whole fit is one compiled function: fitting a second, differently initialised
  model of the same structure reuses it (the script counts the traces).

The data are embedded: a synthetic two-feature classification problem drawn from a
fixed seed, so every run prints the same numbers on the same JAX version.

    python examples/fit_logistic.py               # 2000 steps of SGD
    python examples/fit_logistic.py --quick       # a few seconds, used by the tests
    python examples/fit_logistic.py --optimizer adam --plot loss.png
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

import jax
import jax.numpy as jnp

import treeclass as tc

# The rule the synthetic labels follow (plus noise): the fit should recover it.
TRUE_W = (2.0, -3.0)
TRUE_B = 0.5


class LogisticRegression(tc.TreeClass):
    """p(y=1 | x) = sigmoid(x @ w + b), with an L2 penalty on `w`."""

    w: jax.Array  # (features,)
    b: jax.Array  # ()
    l2: float = tc.static(default=1e-3)

    def logits(self, x: jax.Array) -> jax.Array:
        return x @ self.w + self.b

    def loss(self, x: jax.Array, y: jax.Array) -> jax.Array:
        """Mean binary cross-entropy plus the L2 penalty; `y` holds 0.0 or 1.0."""
        z = self.logits(x)
        nll = -(y * jax.nn.log_sigmoid(z) + (1.0 - y) * jax.nn.log_sigmoid(-z))
        return jnp.mean(nll) + self.l2 * jnp.sum(self.w**2)

    def accuracy(self, x: jax.Array, y: jax.Array) -> jax.Array:
        return jnp.mean((self.logits(x) > 0) == (y > 0.5))


class Fit(tc.TreeClass):
    """How to fit: every field is static, so each distinct setting compiles once."""

    steps: tc.Static[int]
    learning_rate: tc.Static[float] = 0.5
    optimizer: tc.Static[str] = "sgd"  # "sgd" (no dependency) or "adam" (optax)


def make_data(n: int, seed: int = 0, noise: float = 0.5) -> tuple[jax.Array, jax.Array]:
    """`n` samples: `x` f32[n,2] standard normal, `y` f32[n] in {0., 1.}."""
    kx, kn = jax.random.split(jax.random.key(seed))
    x = jax.random.normal(kx, (n, 2))
    z = x @ jnp.array(TRUE_W) + TRUE_B + noise * jax.random.normal(kn, (n,))
    return x, (z > 0).astype(jnp.float32)


def _optax_adam(learning_rate: float) -> Any:
    try:
        # Optional: only --optimizer adam needs it. optax ships no py.typed marker.
        import optax  # type: ignore[import-untyped]
    except ImportError:
        msg = "--optimizer adam needs optax: pip install '.[examples]' (or use sgd)"
        raise SystemExit(msg) from None
    return optax, optax.adam(learning_rate)


trace_count = 0  # how many times `fit` was traced, i.e. compiled


@jax.jit
def fit(
    model: LogisticRegression, config: Fit, x: jax.Array, y: jax.Array
) -> tuple[LogisticRegression, jax.Array]:
    """Runs `config.steps` optimisation steps in one `lax.scan`.

    Returns the fitted model and the loss before each step (f32[steps]).
    """
    global trace_count  # Python side effects run once per trace: a counter
    trace_count += 1
    grad_loss = jax.value_and_grad(LogisticRegression.loss)  # d/d(self): a model

    if config.optimizer == "sgd":

        def step(model: LogisticRegression, _: None) -> tuple[LogisticRegression, jax.Array]:
            loss, grads = grad_loss(model, x, y)
            model = jax.tree.map(lambda p, g: p - config.learning_rate * g, model, grads)
            return model, loss

        return jax.lax.scan(step, model, length=config.steps)

    if config.optimizer == "adam":
        optax, opt = _optax_adam(config.learning_rate)

        def adam_step(carry: tuple[Any, Any], _: None) -> tuple[tuple[Any, Any], jax.Array]:
            model, state = carry
            loss, grads = grad_loss(model, x, y)
            updates, state = opt.update(grads, state, model)
            return (optax.apply_updates(model, updates), state), loss

        (model, _), losses = jax.lax.scan(adam_step, (model, opt.init(model)), length=config.steps)
        return model, losses

    msg = f"Fit.optimizer must be 'sgd' or 'adam'; got {config.optimizer!r}."
    raise ValueError(msg)


def initial_models(seed: int = 1) -> tuple[LogisticRegression, LogisticRegression]:
    """Two starting points with the same structure: zeros, and small random weights."""
    zeros = LogisticRegression(w=jnp.zeros(2), b=jnp.zeros(()))
    w = 0.1 * jax.random.normal(jax.random.key(seed), (2,))
    return zeros, zeros.replace(w=w)


def plot(losses: jax.Array, path: str) -> None:
    import matplotlib  # optional: only --plot needs it

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(5, 3))
    ax.plot(jax.device_get(losses))
    ax.set(xlabel="step", ylabel="loss", title="logistic regression, lax.scan fit")
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description="Fit a treeclass logistic regression with one jitted lax.scan."
    )
    parser.add_argument("--steps", type=int, default=None, help="optimisation steps (2000)")
    parser.add_argument("--samples", type=int, default=None, help="data set size (1000)")
    parser.add_argument(
        "--quick", action="store_true", help="a small run for tests: 200 steps, 200 samples"
    )
    parser.add_argument("--optimizer", choices=("sgd", "adam"), default="sgd")
    parser.add_argument("--learning-rate", type=float, default=None, help="0.5 (sgd), 0.05 (adam)")
    parser.add_argument("--plot", metavar="PATH", help="save the loss curve (needs matplotlib)")
    args = parser.parse_args(argv)
    if args.steps is None:
        args.steps = 200 if args.quick else 2000
    if args.samples is None:
        args.samples = 200 if args.quick else 1000
    if args.learning_rate is None:
        args.learning_rate = 0.5 if args.optimizer == "sgd" else 0.05
    if args.steps < 1 or args.samples < 1:
        parser.error("--steps and --samples must be positive")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    x, y = make_data(args.samples)
    config = Fit(steps=args.steps, learning_rate=args.learning_rate, optimizer=args.optimizer)
    from_zeros, from_random = initial_models()
    traces_before = trace_count

    model, losses = fit(from_zeros, config, x, y)
    _, losses2 = fit(from_random, config, x, y)  # same structure: no recompile
    compiles = trace_count - traces_before

    print(f"data:     {args.samples} samples, 2 features, labels from w={TRUE_W}, b={TRUE_B}")
    print(f"fit:      {config}")
    print(f"model:    {model}")
    print(f"weights:  w={[round(float(v), 2) for v in model.w]}, b={float(model.b):.2f}")
    print(f"loss:     first {float(losses[0]):.4f}, last {float(losses[-1]):.4f}")
    print(f"accuracy: {float(model.accuracy(x, y)):.3f}")
    print(f"second fit (random init): last loss {float(losses2[-1]):.4f}")
    verdict = "compiled once" if compiles == 1 else f"compiled {compiles} times"
    print(f"jit:      {verdict} for 2 fits")
    if args.plot:
        plot(losses, args.plot)
        print(f"plot:     {args.plot}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
