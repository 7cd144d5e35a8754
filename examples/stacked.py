"""Stacked layers scanned over, and an ensemble of 8 models trained at once with vmap.

What it shows:

- `jax.vmap(init_block)(keys)` builds 4 residual `Block`s as one `Block` whose leaves
  carry a leading axis of 4 (`w: f32[4,16,16]`): no treeclass code is needed for that;
- `Model.__call__` applies them in turn with `jax.lax.scan` (scan-over-layers: the block
  is traced and compiled once, whatever the depth), and gives what a Python loop over
  `tc.unstack(model.blocks)` gives;
- `jax.vmap(init_model)(keys)` builds an ensemble of 8 models as one `Model`, the same
  as `tc.stack` of 8 models built one by one;
- the ensemble trains with optax's adamw, `jax.vmap` of one training step inside one
  jitted `lax.scan`; a member trained on its own follows the loss curve it follows in
  the ensemble (up to float rounding);
- `tc.summary(model, depth=1)`: one row per field of the model, the stacked blocks as
  one row with their subtotals.

The data are synthetic (a fixed seed): a smooth function of 8 features plus noise.

    python examples/stacked.py               # 400 steps, 512 samples
    python examples/stacked.py --quick       # 60 steps, used by the tests
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import sys
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import optax  # type: ignore[import-untyped]  # optax ships no py.typed marker

import treeclass as tc

FEATURES = 8
WIDTH = 16
DEPTH = 4
MEMBERS = 8
OPTIMIZER: Any = optax.adamw(3e-3, weight_decay=1e-4)


@dataclasses.dataclass(frozen=True)
class Config:
    steps: int
    samples: int


FULL = Config(steps=400, samples=512)
QUICK = Config(steps=60, samples=128)


class Block(tc.TreeClass):
    """A residual layer: `h + tanh(h @ w + b)`."""

    w: jax.Array  # (WIDTH, WIDTH)
    b: jax.Array  # (WIDTH,)

    def __call__(self, h: jax.Array) -> jax.Array:
        return h + jnp.tanh(h @ self.w + self.b)


class Model(tc.TreeClass):
    embed: jax.Array  # (FEATURES, WIDTH)
    blocks: Block  # DEPTH blocks, stacked: every leaf has a leading axis of DEPTH
    head: jax.Array  # (WIDTH,)

    def __call__(self, x: jax.Array) -> jax.Array:
        def layer(h: jax.Array, block: Block) -> tuple[jax.Array, None]:
            return block(h), None  # `block` is one Block: the scan slices every leaf

        h, _ = jax.lax.scan(layer, x @ self.embed, self.blocks)
        return h @ self.head

    def loop(self, x: jax.Array) -> jax.Array:
        """The same as `__call__`, as a Python loop over the blocks one by one."""
        h = x @ self.embed
        for block in tc.unstack(self.blocks):
            h = block(h)
        return h @ self.head


def init_block(key: jax.Array) -> Block:
    return Block(0.3 * jax.random.normal(key, (WIDTH, WIDTH)) / WIDTH**0.5, jnp.zeros(WIDTH))


def init_model(key: jax.Array) -> Model:
    k_embed, k_blocks, k_head = jax.random.split(key, 3)
    return Model(
        embed=jax.random.normal(k_embed, (FEATURES, WIDTH)) / FEATURES**0.5,
        blocks=jax.vmap(init_block)(jax.random.split(k_blocks, DEPTH)),
        head=jax.random.normal(k_head, (WIDTH,)) / WIDTH,
    )


def make_data(key: jax.Array, samples: int) -> tuple[jax.Array, jax.Array]:
    kx, kw, kn = jax.random.split(key, 3)
    x = jax.random.normal(kx, (samples, FEATURES))
    w = jax.random.normal(kw, (FEATURES,)) / FEATURES**0.5
    return x, jnp.sin(2.0 * x @ w) + 0.05 * jax.random.normal(kn, (samples,))


def loss(model: Model, x: jax.Array, y: jax.Array) -> jax.Array:
    return jnp.mean((model(x) - y) ** 2)


def step(model: Model, opt_state: Any, x: jax.Array, y: jax.Array) -> tuple[Model, Any, jax.Array]:
    """One adamw step of one model."""
    value, grads = tc.value_and_grad(loss)(model, x, y)
    updates, opt_state = OPTIMIZER.update(grads, opt_state, tc.partition(model)[0])
    return tc.apply_updates(model, updates), opt_state, value


@functools.partial(jax.jit, static_argnames=("steps", "ensemble"))
def train(
    model: Model, x: jax.Array, y: jax.Array, steps: int, ensemble: bool
) -> tuple[Model, jax.Array]:
    """`steps` adamw steps in one `lax.scan`: of one model, or (`ensemble=True`) of every
    member of a stacked model at once, through `jax.vmap`. Returns the trained model and
    the losses, `(steps,)` or `(steps, members)`."""
    init, one_step = OPTIMIZER.init, step
    if ensemble:
        init, one_step = jax.vmap(init), jax.vmap(step, in_axes=(0, 0, None, None))
    opt_state = init(tc.partition(model)[0])

    def body(carry: tuple[Model, Any], _: None) -> tuple[tuple[Model, Any], jax.Array]:
        model, opt_state, value = one_step(*carry, x, y)
        return (model, opt_state), value

    (model, _), losses = jax.lax.scan(body, (model, opt_state), length=steps)
    return model, losses


def close(a: Any, b: Any, tol: float = 1e-5) -> bool:
    """Every leaf of `a` within `tol` of `b`'s (relative and absolute)."""
    pairs = zip(jax.tree.leaves(a), jax.tree.leaves(b), strict=True)
    return jax.tree.structure(a) == jax.tree.structure(b) and all(
        np.allclose(u, v, rtol=tol, atol=tol) for u, v in pairs
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description="Stacked layers (jax.vmap(init) + jax.lax.scan) and an ensemble of "
        f"{MEMBERS} models trained with vmap and optax adamw in one jitted lax.scan.",
    )
    parser.add_argument(
        "--quick", action="store_true", help=f"a small run for tests: {QUICK.steps} steps"
    )
    parser.add_argument("--steps", type=int, help=f"optimisation steps ({FULL.steps})")
    args = parser.parse_args(argv)
    config = QUICK if args.quick else FULL
    if args.steps is not None:
        config = dataclasses.replace(config, steps=args.steps)

    x, y = make_data(jax.random.key(0), config.samples)
    model = init_model(jax.random.key(1))
    same_as_loop = close(model(x), model.loop(x))
    print(f"model:    {model}")
    print(
        f"layers:   {DEPTH} blocks from jax.vmap(init_block), applied with jax.lax.scan; "
        f"the same as a loop over tc.unstack(blocks): {same_as_loop}"
    )

    keys = jax.random.split(jax.random.key(2), MEMBERS)
    ensemble = jax.vmap(init_model)(keys)
    same_as_stack = close(ensemble, tc.stack([init_model(k) for k in keys]))
    print(f"ensemble: {ensemble}")
    print(
        f"          {MEMBERS} members from jax.vmap(init_model); "
        f"the same as tc.stack of {MEMBERS} inits: {same_as_stack}"
    )

    trained, losses = train(ensemble, x, y, config.steps, ensemble=True)
    first, last = losses[0], losses[-1]
    print(f"training: {MEMBERS} members x {config.steps} adamw steps, vmapped, in one lax.scan")
    print(
        f"losses:   first {float(first.mean()):.4f} (mean), last "
        f"{float(last.min()):.4f} to {float(last.max()):.4f}"
    )
    mean_prediction = jax.vmap(Model.__call__, in_axes=(0, None))(trained, x).mean(0)
    print(
        f"mean of the {MEMBERS} predictions: loss {float(jnp.mean((mean_prediction - y) ** 2)):.4f}"
    )

    # Member 3 alone, unstacked from the ensemble and trained without vmap. Not bit for
    # bit: vmap batches the matrix products, which rounds differently, and 400 adamw
    # steps carry that rounding along (measured: 2e-3 of the first loss at most).
    _, alone_losses = train(tc.unstack(ensemble)[3], x, y, config.steps, ensemble=False)
    gap = float(jnp.max(jnp.abs(alone_losses - losses[:, 3])) / losses[0, 3])
    same_member = gap < 1e-2
    print(
        f"member 3: trained alone, final loss {float(alone_losses[-1]):.4f} "
        f"({float(losses[-1, 3]):.4f} in the ensemble); the loss curves agree to "
        f"{gap:.0e} of the first loss: {same_member}"
    )

    print(tc.summary(tc.unstack(trained)[0], depth=1))  # depth=: the train branch, one row
    return 0 if same_as_loop and same_as_stack and same_member else 1


if __name__ == "__main__":
    sys.exit(main())
