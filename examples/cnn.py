"""Train a small conv net with BatchNorm, then fine-tune a new head with the rest frozen.

What it shows:

- model state beside the parameters: each `BatchNorm` keeps its running mean and
  variance in a field declared `tc.field(trainable=False)`. The forward pass updates
  them in training mode and uses them in evaluation mode; `tc.value_and_grad` never
  differentiates them, optax never sees them (its state is built on
  `tc.partition(model)[0]`, the trainable leaves), so adamw's weight decay cannot
  shrink them, and `tc.apply_updates` would refuse an update there;
- the rest of what a training run carries, as fields of the one model: a
  `jax.random.key` for dropout (each step draws from `fold_in(key, step)`) and an
  `int32` step counter;
- training with optax's `adamw` (weight decay on) in one jitted `lax.scan`, the model
  and the optimizer state as its carry;
- fine-tuning: the 4-class head is replaced by a new 2-class one and trained alone,
  `tc.value_and_grad(..., where=lambda m: m.head)` and an optimizer state built on
  `tc.partition(model, lambda m: m.head)[0]`: the convolutions and the BatchNorm
  layers (parameters and statistics) do not move, bit for bit;
- `tc.save` half-way through training, `tc.load` into a template, and the resumed
  run ends on the same model as the uninterrupted one, bit for bit;
- `tc.summary(model)`: every leaf by path, trainable or not, and the totals.

The data are synthetic (fixed seeds): 16x16 grey images holding a short bar, plus
noise; the bar's direction is the class (horizontal, vertical, diagonal,
anti-diagonal). The fine-tuning task asks a coarser question of the same images:
is the bar axis-aligned or diagonal?

    python examples/cnn.py                       # 400 training steps, 150 fine-tuning
    python examples/cnn.py --quick               # 60 and 30, used by the tests
    python examples/cnn.py --plot cnn.png        # and the loss curves as a PNG
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import math
import pathlib
import sys
import tempfile
from typing import Any, TypedDict

import jax
import jax.numpy as jnp
import optax  # type: ignore[import-untyped]  # pyright: ignore[reportMissingTypeStubs]

import treeclass as tc

SIZE = 16  # images are SIZE x SIZE, one channel
CLASSES = 4  # the bar's direction
NOISE = 0.4  # standard deviation of the pixel noise; the bar is 1.0 bright
CHANNELS = (8, 16)  # of the two convolutions
BATCH = 64
LEARNING_RATE = 1e-2
WEIGHT_DECAY = 1e-2  # adamw's: each step shrinks every parameter it updates by 1e-4
# optax ships no type information, and annotates parameters as nests of arrays, which
# no class is: the optimizers are held as `Any` (docs/faq.md, "Type checkers").
OPTIMIZER: Any = optax.adamw(LEARNING_RATE, weight_decay=WEIGHT_DECAY)
FINE_TUNING: Any = optax.adamw(LEARNING_RATE, weight_decay=WEIGHT_DECAY)


@dataclasses.dataclass(frozen=True)
class Config:
    steps: int  # training steps, each on a batch of its own
    fine_tuning_steps: int
    test_samples: int


FULL = Config(steps=400, fine_tuning_steps=150, test_samples=2000)
QUICK = Config(steps=60, fine_tuning_steps=30, test_samples=500)


class Conv(tc.TreeClass):
    """A 3x3 convolution with 'SAME' padding, on NHWC images."""

    w: jax.Array  # (3, 3, in, out)
    b: jax.Array  # (out,)

    def __call__(self, x: jax.Array) -> jax.Array:
        y = jax.lax.conv_general_dilated(
            x, self.w, (1, 1), "SAME", dimension_numbers=("NHWC", "HWIO", "NHWC")
        )
        return y + self.b


class RunningStats(tc.TreeClass):
    mean: jax.Array  # (channels,)
    var: jax.Array  # (channels,)


class BatchNorm(tc.TreeClass):
    scale: jax.Array  # (channels,)
    bias: jax.Array  # (channels,)
    stats: RunningStats = tc.field(trainable=False)  # state: the forward pass updates it
    momentum: tc.Static[float] = 0.9
    eps: tc.Static[float] = 1e-5

    def __call__(self, x: jax.Array, *, train: bool) -> tuple[jax.Array, BatchNorm]:
        """Normalises each channel over the batch and the image: with this batch's
        mean and variance in training (returning the layer with them folded into its
        running statistics), with the running statistics in evaluation (returning the
        layer unchanged)."""
        if train:
            # E[x^2] - E[x]^2, as flax computes it: both means in one pass over x, where
            # x.var() would take the mean a second time (benchmarks/RESULTS.md, "CNN
            # training step"); clamped at 0 against rounding.
            mean = x.mean(axis=(0, 1, 2))
            var = jnp.maximum(jnp.square(x).mean(axis=(0, 1, 2)) - jnp.square(mean), 0.0)
            m = self.momentum
            stats = RunningStats(m * self.stats.mean + (1 - m) * mean, m * self.stats.var + (1 - m) * var)
            layer = self.replace(stats=stats)
        else:
            mean, var, layer = self.stats.mean, self.stats.var, self
        # The scale joins the per-channel factor first: one multiplication of x, not two.
        return (x - mean) * (jax.lax.rsqrt(var + self.eps) * self.scale) + self.bias, layer


class Linear(tc.TreeClass):
    w: jax.Array  # (inputs, outputs)
    b: jax.Array  # (outputs,)

    def __call__(self, x: jax.Array) -> jax.Array:
        return x @ self.w + self.b


class CNN(tc.TreeClass):
    conv1: Conv
    norm1: BatchNorm
    conv2: Conv
    norm2: BatchNorm
    head: Linear
    key: jax.Array  # a typed PRNG key (jax.random.key): dropout
    step: jax.Array  # int32[]: optimisation steps taken
    dropout: tc.Static[float] = 0.1

    def __call__(self, x: jax.Array, *, train: bool) -> tuple[jax.Array, CNN]:
        """The logits of a batch `x` (N, SIZE, SIZE, 1), and the model: with the
        running statistics this batch updated in training, unchanged in evaluation."""
        h, norm1 = self.norm1(self.conv1(x), train=train)
        h = jax.nn.relu(h)
        h = jax.lax.reduce_window(h, -jnp.inf, jax.lax.max, (1, 2, 2, 1), (1, 2, 2, 1), "VALID")
        h, norm2 = self.norm2(self.conv2(h), train=train)
        h = jax.nn.relu(h).mean(axis=(1, 2))  # global average pooling: (N, channels)
        if train:
            draw = jax.random.fold_in(self.key, self.step)  # a new dropout mask each step
            keep = jax.random.bernoulli(draw, 1.0 - self.dropout, h.shape)
            h = jnp.where(keep, h / (1.0 - self.dropout), 0.0)
        return self.head(h), self.replace(norm1=norm1, norm2=norm2)


def normal(key: jax.Array, shape: tuple[int, ...], std: float) -> jax.Array:
    """Normal draws of standard deviation `std`. Drawn flat, then reshaped: the same
    numbers as `jax.random.normal(key, shape)`, but XLA on CPU takes seconds longer to
    compile a draw of a 4-D shape."""
    return std * jax.random.normal(key, (math.prod(shape),)).reshape(shape)


def batch_norm(channels: int) -> BatchNorm:
    ones, zeros = jnp.ones(channels), jnp.zeros(channels)
    return BatchNorm(ones, zeros, RunningStats(mean=zeros, var=ones))


def linear(key: jax.Array, inputs: int, outputs: int) -> Linear:
    return Linear(normal(key, (inputs, outputs), inputs**-0.5), jnp.zeros(outputs))


@jax.jit  # one compile, rather than one per operation of the first eager call
def init_model(key: jax.Array) -> CNN:
    k1, k2, k3, k_dropout = jax.random.split(key, 4)
    c1, c2 = CHANNELS
    return CNN(
        conv1=Conv(normal(k1, (3, 3, 1, c1), 9**-0.5), jnp.zeros(c1)),  # std 1 / sqrt(fan-in)
        norm1=batch_norm(c1),
        conv2=Conv(normal(k2, (3, 3, c1, c2), (9 * c1) ** -0.5), jnp.zeros(c2)),
        norm2=batch_norm(c2),
        head=linear(k3, c2, CLASSES),
        key=k_dropout,
        step=jnp.array(0, jnp.int32),
    )


@functools.partial(jax.jit, static_argnums=1)
def make_data(key: jax.Array, samples: int) -> tuple[jax.Array, jax.Array]:
    """`x` f32[samples, SIZE, SIZE, 1], `y` i32[samples]: a bar 7 pixels long at a
    random place, whose direction is the label (0 horizontal, 1 vertical, 2 diagonal,
    3 anti-diagonal), plus noise."""
    k_label, k_centre, k_noise = jax.random.split(key, 3)
    y = jax.random.randint(k_label, (samples,), 0, CLASSES)
    centre = jax.random.randint(k_centre, (samples, 2), 3, SIZE - 3)
    dy = jnp.arange(SIZE)[None, :, None] - centre[:, 0, None, None]  # (samples, SIZE, 1)
    dx = jnp.arange(SIZE)[None, None, :] - centre[:, 1, None, None]  # (samples, 1, SIZE)
    label = y[:, None, None]
    on_line = jnp.select([label == 0, label == 1, label == 2], [dy == 0, dx == 0, dx == dy], dx == -dy)
    image = (on_line & (jnp.maximum(abs(dx), abs(dy)) <= 3)).astype(jnp.float32)
    x = image + normal(k_noise, image.shape, NOISE)
    return x[..., None], y


def axis_aligned_or_diagonal(y: jax.Array) -> jax.Array:
    """The fine-tuning labels: 0 for a horizontal or vertical bar, 1 for a diagonal."""
    return y // 2


def cross_entropy(logits: jax.Array, y: jax.Array) -> jax.Array:
    return -jnp.mean(jnp.take_along_axis(jax.nn.log_softmax(logits), y[:, None], axis=1))


def loss(model: CNN, x: jax.Array, y: jax.Array) -> tuple[jax.Array, CNN]:
    """The loss in training mode (batch statistics, dropout on), and the model with
    its running statistics updated by this batch."""
    logits, model = model(x, train=True)
    return cross_entropy(logits, y), model


def eval_loss(model: CNN, x: jax.Array, y: jax.Array) -> jax.Array:
    """The loss in evaluation mode: running statistics, no dropout."""
    logits, _ = model(x, train=False)
    return cross_entropy(logits, y)


@jax.jit
def accuracy(model: CNN, x: jax.Array, y: jax.Array) -> jax.Array:
    logits, _ = model(x, train=False)
    return jnp.mean(jnp.argmax(logits, axis=1) == y)


def train_step(
    model: CNN, opt_state: optax.OptState, x: jax.Array, y: jax.Array
) -> tuple[CNN, optax.OptState, jax.Array]:
    """One adamw step on the trainable leaves; the statistics come from the forward
    pass, the optimizer never sees them."""
    (value, updated), grads = tc.value_and_grad(loss, has_aux=True)(model, x, y)
    updates, opt_state = OPTIMIZER.update(grads, opt_state, tc.partition(model)[0])
    model = tc.apply_updates(updated, updates)
    return model.replace(step=model.step + 1), opt_state, value


def head_step(
    model: CNN, opt_state: optax.OptState, x: jax.Array, y: jax.Array
) -> tuple[CNN, optax.OptState, jax.Array]:
    """One fine-tuning step: the head alone is differentiated and updated; the rest
    runs in evaluation mode, so its statistics stay as they are too."""
    value, grads = tc.value_and_grad(eval_loss, where=lambda m: m.head)(model, x, y)
    head_params = tc.partition(model, lambda m: m.head)[0]
    updates, opt_state = FINE_TUNING.update(grads, opt_state, head_params)
    model = tc.apply_updates(model, updates)
    return model.replace(step=model.step + 1), opt_state, value


Batch = tuple[jax.Array, jax.Array]


@jax.jit
def train(
    model: CNN, opt_state: optax.OptState, xs: jax.Array, ys: jax.Array
) -> tuple[CNN, optax.OptState, jax.Array]:
    """One `train_step` per batch of `xs` (steps, BATCH, SIZE, SIZE, 1), in one
    `lax.scan`; returns the model, the optimizer state and the losses."""

    def step(carry: tuple[CNN, optax.OptState], batch: Batch) -> Any:
        model, opt_state, value = train_step(*carry, *batch)
        return (model, opt_state), value

    (model, opt_state), losses = jax.lax.scan(step, (model, opt_state), (xs, ys))
    return model, opt_state, losses


@jax.jit
def fine_tune(
    model: CNN, opt_state: optax.OptState, xs: jax.Array, ys: jax.Array
) -> tuple[CNN, optax.OptState, jax.Array]:
    """One `head_step` per batch, in one `lax.scan`."""

    def step(carry: tuple[CNN, optax.OptState], batch: Batch) -> Any:
        model, opt_state, value = head_step(*carry, *batch)
        return (model, opt_state), value

    (model, opt_state), losses = jax.lax.scan(step, (model, opt_state), (xs, ys))
    return model, opt_state, losses


def new_head(model: CNN, key: jax.Array, classes: int) -> CNN:
    """The model with a freshly initialised head of `classes` outputs."""
    return model.replace(head=linear(key, model.head.w.shape[0], classes))


class Results(TypedDict):
    initial: CNN
    model: CNN  # trained in one go
    resumed: CNN  # trained in two halves, through a checkpoint
    start: CNN  # `model` with a new 2-class head
    tuned: CNN  # `start` fine-tuned
    losses: jax.Array
    resumed_losses: jax.Array
    tuning_losses: jax.Array
    same_bits: bool
    moments: int  # elements in adamw's first moment: one per trainable parameter
    accuracy: float  # `model`, 4 classes, evaluation mode, test set
    tuned_accuracy: float  # `tuned`, 2 classes
    untuned_accuracy: float  # the new head before fine-tuning
    frozen_unchanged: bool  # everything but the head, bit for bit


def run(config: Config, checkpoint: pathlib.Path) -> Results:
    """Trains `config.steps` steps in one go, and again in two halves through a
    checkpoint; fine-tunes a new head; returns what `main` prints."""
    k_model, k_data, k_head = jax.random.split(jax.random.key(0), 3)
    model = init_model(k_model)
    # One draw of data (one compile): the training batches, then the test images.
    n = config.steps * BATCH
    x, y = make_data(k_data, n + config.test_samples)
    xs, ys = x[:n].reshape(config.steps, BATCH, SIZE, SIZE, 1), y[:n].reshape(config.steps, BATCH)
    x_test, y_test = x[n:], y[n:]
    opt_state = OPTIMIZER.init(tc.partition(model)[0])

    trained, trained_state, losses = train(model, opt_state, xs, ys)

    half = config.steps // 2
    first, state, losses_a = train(model, opt_state, xs[:half], ys[:half])
    tc.save(checkpoint, (first, state))
    # The template gives the structure, dtypes and statics; the file gives the values.
    restored, state = tc.load(checkpoint, (model, opt_state))
    resumed, _, losses_b = train(restored, state, xs[half:], ys[half:])
    resumed_losses = jnp.concatenate([losses_a, losses_b])

    # Fine-tuning asks the new question of the first training images.
    start = new_head(trained, k_head, 2)
    head_state = FINE_TUNING.init(tc.partition(start, lambda m: m.head)[0])
    tune = config.fine_tuning_steps
    tuned, _, tuning_losses = fine_tune(start, head_state, xs[:tune], axis_aligned_or_diagonal(ys[:tune]))
    frozen = bool(tc.tree_equal(tuned.replace(head=start.head, step=start.step), start))

    y_coarse = axis_aligned_or_diagonal(y_test)
    return {
        "initial": model,
        "model": trained,
        "resumed": resumed,
        "start": start,
        "tuned": tuned,
        "losses": losses,
        "resumed_losses": resumed_losses,
        "tuning_losses": tuning_losses,
        "same_bits": bool(jnp.array_equal(losses, resumed_losses)) and trained == resumed,
        "moments": sum(m.size for m in jax.tree.leaves(optax.tree_utils.tree_get(trained_state, "mu"))),
        "accuracy": float(accuracy(trained, x_test, y_test)),
        "tuned_accuracy": float(accuracy(tuned, x_test, y_coarse)),
        "untuned_accuracy": float(accuracy(start, x_test, y_coarse)),
        "frozen_unchanged": frozen and not bool(tc.tree_equal(tuned.head, start.head)),
    }


def plot(out: Results, path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    losses, tuning = jax.device_get(out["losses"]), jax.device_get(out["tuning_losses"])
    fig, ax = plt.subplots(figsize=(6, 3))
    ax.plot(range(len(losses)), losses, label="training, 4 classes (dropout on)")
    steps = range(len(losses), len(losses) + len(tuning))
    ax.plot(steps, tuning, label="fine-tuning the new head, 2 classes")
    ax.axvline(len(losses) // 2, color="grey", linestyle=":", label="checkpoint, resumed")
    ax.set(xlabel="step", ylabel="cross-entropy", yscale="log", title="CNN with BatchNorm, adamw")
    ax.legend(loc="lower left")
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description="Train a small conv net with BatchNorm (running statistics as "
        "trainable=False state), dropout from a key field and a step counter, with optax "
        "adamw in one jitted lax.scan; checkpoint half-way and resume bit for bit; then "
        "fine-tune a new head with the rest frozen (where=lambda m: m.head).",
    )
    parser.add_argument(
        "--quick",
        action="store_true",
        help=f"a small run for tests: {QUICK.steps} + {QUICK.fine_tuning_steps} steps",
    )
    parser.add_argument("--steps", type=int, help=f"training steps ({FULL.steps})")
    parser.add_argument("--plot", metavar="PATH", help="save the loss curves as a PNG")
    parser.add_argument(
        "--checkpoint",
        metavar="PATH",
        help="where to write the half-way checkpoint (default: a temporary directory)",
    )
    args = parser.parse_args(argv)
    if args.steps is not None and args.steps < 2:
        parser.error("--steps must be at least 2 (the checkpoint is taken half-way)")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    config = QUICK if args.quick else FULL
    if args.steps is not None:  # fine-tuning reuses the first training batches
        tune = min(config.fine_tuning_steps, args.steps)
        config = dataclasses.replace(config, steps=args.steps, fine_tuning_steps=tune)
    with tempfile.TemporaryDirectory() as tmp:
        checkpoint = pathlib.Path(args.checkpoint or pathlib.Path(tmp) / "cnn.npz")
        out = run(config, checkpoint)
    print(tc.summary(out["model"]))
    losses = out["losses"]
    print(f"data:        {SIZE}x{SIZE} images, {CLASSES} classes (the bar's direction): "
          f"{config.steps} batches of {BATCH} to train on, {config.test_samples} to test")
    print(f"training:    {config.steps} adamw steps (weight decay {WEIGHT_DECAY}) in one "
          f"lax.scan, dropout {CNN.dropout}; loss first {float(losses[0]):.3f}, "
          f"last {float(losses[-1]):.3f}")
    print(f"optimizer:   adamw's moments cover {out['moments']:,} elements, the trainable "
          f"leaves; none for the BatchNorm statistics")
    print(f"evaluation:  accuracy {out['accuracy']:.3f} on {config.test_samples} test images "
          f"(running statistics, no dropout; chance 0.25)")
    print(f"resumed:     checkpoint at step {config.steps // 2}; "
          f"{'bit for bit the same' if out['same_bits'] else 'DIFFERENT'} as without")
    print(f"fine-tuning: a new 2-class head (axis-aligned or diagonal), "
          f"{config.fine_tuning_steps} steps; accuracy {out['untuned_accuracy']:.3f} -> "
          f"{out['tuned_accuracy']:.3f}")
    print(f"frozen:      everything but the head "
          f"{'unchanged, bit for bit' if out['frozen_unchanged'] else 'MOVED'}")
    if args.plot:
        plot(out, args.plot)
        print(f"plot:        {args.plot}")
    return 0 if out["same_bits"] and out["frozen_unchanged"] else 1


if __name__ == "__main__":
    sys.exit(main())
