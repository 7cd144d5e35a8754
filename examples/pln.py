"""Fit a Poisson log-normal (PLN) model with one compiled `lax.scan`, the model being a
treeclass, side by side with the containers of the JAX tutorial it ports.

The PLN model, for n samples of p counts with d covariates and offsets O (log scale):

    Z_i ~ N(X_i B, Sigma)          latent Gaussian, i = 1..n
    Y_ij ~ Poisson(exp(O_ij + Z_ij))

fitted by variational inference: q(Z_i - X_i B) = N(M_i, diag(S_i**2)). Each iteration
takes one optimizer step on (B, M, S) (the negative ELBO's gradient, the tutorial's
optax chain) and then the closed-form updates Sigma = (M'M + diag(sum S**2)) / n,
Omega = Sigma^-1.

What it shows:

- the model is a `tc.TreeClass`: the data (Y, O, X) and the parameters (B, M, S,
  Sigma, Omega) are dynamic fields, traced; the sizes n, p, d are static fields, plain
  Python ints inside the compiled code;
- the negative ELBO is a method, `PLN.loss()`, that can be evaluated on its own at any
  parameters (the tests compare it with a float64 numpy reference);
- `jax.value_and_grad` differentiates only the parameter sub-tree `model.params`
  (B, M, S): the data are not arguments of the differentiated function, so no gradient
  and no optimizer state is ever built for them;
- the whole fit is ONE compiled call (`@tc.jit` method, `lax.scan` over iterations);
- beside it, the same corrected math in the tutorial's own containers (its "levels"
  2-4: dicts, a `NamedTuple`, a hand-written `register_pytree_node_class`), in the
  sibling examples/pln_containers.py; the script prints, per version, the first and
  last loss, the compile time and the run time, and checks that the four loss
  trajectories agree.

Fixed relative to the tutorial (docs/examples/pln.md has the details): the trace term
is trace((M'M + diag(sum S**2)) @ Omega), not M'M + diag(...) @ Omega; log det Omega
comes from `slogdet` (log(det(.)) overflows in float32); the level-4 class keeps Sigma
and Omega through unflatten, keeps arrays out of its static aux data, and assigns to
`self`, not to a global; the data-only sum of log Y! is computed once, outside the
compiled code (see `log_stirling_sum`: jax 0.10.2 miscompiles it on CPU).

After the comparison, the script runs the fit that converges (examples/pln_profiled.py:
B and Sigma in closed form, Rprop on M and S, as pyPLNmodels fits it; one compiled
`lax.while_loop`) on the same data and prints its final ELBO beside the port's.

Data: `--data simulated` (default) draws from the model above with a known B and Sigma
(seeded), so the fit can be checked against the truth; `--data oaks` loads the
tutorial's oaks data set through pyPLNmodels, if installed (it is not shipped here).

    python examples/pln.py                  # n=1000, p=20, d=2, 1000 iterations
    python examples/pln.py --quick          # a few seconds, used by the tests
    python examples/pln.py --large          # the data repeated 100 times, as the tutorial
    python examples/pln.py --plot pln.png   # the four loss curves
    python examples/pln.py --versions treeclass,namedtuple
"""

# ruff: noqa: N803, N806, E741 - the PLN literature's names: Y, O, X, B, M, S, Sigma, Omega

from __future__ import annotations

import argparse
import importlib.util
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from types import ModuleType
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

import treeclass as tc


def _sibling(name: str) -> ModuleType:
    """examples/ is not a package: load `name`.py from this file's folder, once."""
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, Path(__file__).with_name(f"{name}.py"))
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


# The tutorial's containers (levels 2-4) and its optimizer; they need optax.
containers = _sibling("pln_containers")
# The fit that converges: B and Sigma profiled, Rprop on (M, S), as pyPLNmodels does.
profiled = _sibling("pln_profiled")
make_optimizer = containers.make_optimizer
optax = containers.optax


# --- data ------------------------------------------------------------------------------


class Data(NamedTuple):
    """Counts Y (n, p), log offsets O (n, p), covariates X (n, d), all float32; the true
    B (d, p) and Sigma (p, p) when the data were simulated, else None."""

    Y: np.ndarray
    O: np.ndarray
    X: np.ndarray
    B: np.ndarray | None
    Sigma: np.ndarray | None
    label: str


def simulate(n: int, p: int, d: int, seed: int = 0) -> Data:
    """Draws n samples from the PLN model with a known B and Sigma.

    X is an intercept column plus d-1 standard normal covariates; B's intercept row is
    uniform on [1, 2] (mean counts around e**1.5) and its other rows N(0, 0.3**2);
    Sigma = L L' + 0.2 I with L (p, 2) ~ N(0, 0.4**2): variances around 0.5, moderate
    correlations; O is a per-sample log sampling effort, uniform on [-0.5, 0.5]. Then
    Z ~ N(XB, Sigma) and Y ~ Poisson(exp(O + Z)).
    """
    rng = np.random.default_rng(seed)
    X = np.concatenate([np.ones((n, 1)), rng.normal(size=(n, d - 1))], axis=1)
    B = np.concatenate([rng.uniform(1.0, 2.0, (1, p)), rng.normal(0.0, 0.3, (d - 1, p))])
    L = rng.normal(0.0, 0.4, (p, 2))
    Sigma = L @ L.T + 0.2 * np.eye(p)
    O = np.repeat(rng.uniform(-0.5, 0.5, (n, 1)), p, axis=1)
    Z = X @ B + rng.normal(size=(n, p)) @ np.linalg.cholesky(Sigma).T
    Y = rng.poisson(np.exp(O + Z))
    f32 = np.float32
    return Data(Y.astype(f32), O.astype(f32), X.astype(f32), B, Sigma, f"simulated (seed {seed})")


def load_oaks_data() -> Data:
    """The tutorial's oaks powdery-mildew counts (116 leaves x 114 taxa), intercept only
    (d = 1), through pyPLNmodels' `load_oaks()`."""
    try:
        from pyPLNmodels import load_oaks  # optional, and its data are not shipped here
    except ImportError:
        msg = (
            "--data oaks needs pyPLNmodels (pip install pyPLNmodels), which downloads the "
            "oaks data set; treeclass does not ship it. Use --data simulated instead."
        )
        raise SystemExit(msg) from None
    return oaks_data(load_oaks())


def oaks_data(oaks: Any) -> Data:
    """`Data` from what pyPLNmodels' `load_oaks()` returns: a dict whose `endog` holds
    the counts (a DataFrame, samples x taxa) and whose `offsets` are already on the log
    scale (it returns `np.log(offsets)`; the tutorial, written for an older loader that
    had `counts` and raw offsets, took the log itself: doing so again would be wrong)."""
    if "endog" not in oaks:
        msg = (
            f"load_oaks() returned the keys {sorted(oaks)}; this example reads the current "
            "pyPLNmodels layout, counts under 'endog' and log offsets under 'offsets' "
            "(pip install -U pyPLNmodels)"
        )
        raise KeyError(msg)
    Y = np.asarray(oaks["endog"], dtype=np.float32)
    O = np.broadcast_to(np.asarray(oaks["offsets"], dtype=np.float32).reshape(len(Y), -1), Y.shape)
    return Data(Y, np.array(O), np.ones((len(Y), 1), np.float32), None, None, "oaks (pyPLNmodels)")


def repeat(data: Data, times: int) -> Data:
    """The rows repeated `times` times, as the tutorial does "to feel the speed up"."""
    Y, O, X = (np.repeat(a, times, axis=0) for a in (data.Y, data.O, data.X))
    return data._replace(Y=Y, O=O, X=X, label=f"{data.label}, rows repeated {times}x")


def log_stirling_sum(Y: np.ndarray) -> float:
    """Sum over the counts of the tutorial's Stirling approximation of log(Y!), in float64.

    It is data-only (a constant of the loss), so it is computed once, here, in numpy,
    and handed to the compiled code as a scalar. Why not inside the compiled ELBO, as
    the tutorial does: jax 0.10.2 on CPU miscompiles some fused reductions. With 4096
    or more elements,

        jax.jit(lambda y: jnp.sum(jnp.log(y) + jnp.log(2 * y)))(y)

    returns a wrong value (upstream jax-ml/jax#39103), and so does the jitted sum of
    the tutorial's `_log_stirling(Y)`, which adds two logs the same way: for 4096
    Poisson(3) counts it returned 25306.2 where numpy says 9094.9. Outside jit (and in
    numpy) the sum is right. tests/examples/test_pln.py checks both.

    As in pyPLNmodels, a count of 0 is replaced by 1 (log 0! = log 1! = 0; the Stirling
    value at 1 is -0.081, a constant offset of the loss that changes no gradient).
    """
    y = np.asarray(Y, dtype=np.float64)
    y = y + (y == 0)
    return float(np.sum(0.5 * np.log(2 * np.pi * y) + y * np.log(y / np.e)))


# --- the model as a treeclass -----------------------------------------------------------


class Variational(tc.TreeClass):
    """What the optimizer moves: the model's B and the variational M, S."""

    B: jax.Array  # (d, p) regression coefficients
    M: jax.Array = tc.field(axes=("samples", None))  # (n, p) variational means of Z - XB
    S: jax.Array = tc.field(axes=("samples", None))  # (n, p) variational std deviations


class PLN(tc.TreeClass):
    """A Poisson log-normal model and its variational state."""

    # The data: dynamic (traced, never baked in as constants), never differentiated
    # (`fit` differentiates `params` only). The sample axis is named, so
    # `tc.shardings(model, mesh)` splits the samples across devices (examples/sharded.py).
    Y: jax.Array = tc.field(axes=("samples", None))  # (n, p) counts
    O: jax.Array = tc.field(axes=("samples", None))  # (n, p) log offsets
    X: jax.Array = tc.field(axes=("samples", None))  # (n, d) covariates
    log_y_factorial: jax.Array  # () sum of log Y!, computed once outside jit
    params: Variational
    Sigma: jax.Array  # (p, p) latent covariance (closed form)
    Omega: jax.Array  # (p, p) its inverse
    n: tc.Static[int]
    p: tc.Static[int]
    d: tc.Static[int]

    @classmethod
    def from_data(cls, Y: Any, O: Any, X: Any) -> PLN:
        """The tutorial's starting point: B = 0, M = 0, S = 1, Sigma = Omega = I."""
        (n, p), d = np.shape(Y), np.shape(X)[1]
        return cls(
            Y=jnp.asarray(Y, jnp.float32),
            O=jnp.asarray(O, jnp.float32),
            X=jnp.asarray(X, jnp.float32),
            log_y_factorial=jnp.asarray(log_stirling_sum(Y), jnp.float32),
            params=Variational(B=jnp.zeros((d, p)), M=jnp.zeros((n, p)), S=jnp.ones((n, p))),
            Sigma=jnp.eye(p),
            Omega=jnp.eye(p),
            n=n,
            p=p,
            d=d,
        )

    def loss(self, params: Variational | None = None) -> jax.Array:
        """The negative ELBO at `params` (default: `self.params`), with `self.Omega`."""
        v = self.params if params is None else params
        S2 = jnp.square(v.S)
        XB = self.X @ v.B
        A = jnp.exp(self.O + v.M + XB + S2 / 2)
        elbo = self.n / 2 * jnp.linalg.slogdet(self.Omega)[1]
        elbo += jnp.sum(-A + self.Y * (self.O + v.M + XB) + 0.5 * jnp.log(S2))
        elbo -= 0.5 * jnp.trace((v.M.T @ v.M + jnp.diag(jnp.sum(S2, axis=0))) @ self.Omega)
        elbo += 0.5 * self.n * self.p - self.log_y_factorial
        return -elbo

    def update_covariance(self) -> PLN:
        """The closed-form Sigma and Omega for the current M and S."""
        M, S = self.params.M, self.params.S
        Sigma = (M.T @ M + jnp.diag(jnp.sum(jnp.square(S), axis=0))) / self.n
        return self.replace(Sigma=Sigma, Omega=jnp.linalg.inv(Sigma))

    @tc.jit(static_argnames=("steps", "learning_rate"))
    def fit(self, steps: int, learning_rate: float = 1.0) -> tuple[PLN, jax.Array]:
        """`steps` iterations in one compiled `lax.scan`; returns the fitted model and
        the loss before each iteration's update (f32[steps])."""
        optimizer = make_optimizer(learning_rate)

        def step(carry: tuple[PLN, Any], _: None) -> tuple[tuple[PLN, Any], jax.Array]:
            model, opt_state = carry
            # d/d(params) only: the data, Sigma and Omega are closed over, not
            # differentiated. Why not jax.grad(PLN.loss)(model), the whole model: the
            # gradient would also hold d/dOmega (not zero) and d/dY, d/dO, d/dX, which
            # the optimizer would then apply, moving Omega away from its closed form
            # and the data away from the data, unless each were wrapped in
            # jax.lax.stop_gradient; and RAdam would keep two moments of every (n, p)
            # data array.
            loss, grads = jax.value_and_grad(model.loss)(model.params)
            updates, opt_state = optimizer.update(grads, opt_state)
            model = model.replace(params=optax.apply_updates(model.params, updates))
            return (model.update_covariance(), opt_state), loss

        init = (self, optimizer.init(self.params))
        (model, _), losses = jax.lax.scan(step, init, length=steps)
        return model, losses


# --- side by side -----------------------------------------------------------------------

_STATIC = ("steps", "learning_rate")


class Version(NamedTuple):
    """One way of writing the fit: `fit(state, steps=, learning_rate=)` is jitted."""

    name: str
    init: Callable[[Data], Any]
    fit: Any
    estimates: Callable[[Any], tuple[jax.Array, jax.Array]]  # fitted state -> (B, Sigma)


def _start(data: Data) -> dict[str, Any]:
    return containers.starting_point(data.Y, data.O, data.X, log_stirling_sum(data.Y))


VERSIONS = (
    Version(
        "treeclass",
        lambda data: PLN.from_data(data.Y, data.O, data.X),
        PLN.fit,
        lambda m: (m.params.B, m.Sigma),
    ),
    Version(
        "namedtuple",
        lambda data: containers.tuple_init(_start(data)),
        jax.jit(containers.tuple_fit, static_argnames=_STATIC),
        lambda t: (t.B, t.Sigma),
    ),
    Version(
        "dict",
        lambda data: containers.dict_init(_start(data)),
        jax.jit(containers.dict_fit, static_argnames=_STATIC),
        lambda s: (s["optim_params"]["B"], s["other_params"]["Sigma"]),
    ),
    Version(
        "pytree_class",
        lambda data: containers.PLNClass(_start(data)),
        jax.jit(containers.class_fit, static_argnames=_STATIC),
        lambda c: (c.B, c.Sigma),
    ),
)
BASELINE = "namedtuple"  # ratios are to the tutorial's level 3


class Result(NamedTuple):
    name: str
    losses: np.ndarray
    B: np.ndarray
    Sigma: np.ndarray
    compile_s: list[float]  # jit(...).lower(...).compile(), caches cleared, per round
    run_s: list[float]  # one compiled call, block_until_ready, per round

    def ratio_to(self, base: Result) -> float:
        """The median, over rounds, of this run time over `base`'s in the same round:
        the versions run interleaved, so a same-round ratio cancels the machine's drift."""
        return statistics.median(a / b for a, b in zip(self.run_s, base.run_s, strict=True))


def _rotated(count: int, round_: int) -> list[int]:
    """0..count-1, starting at round_ % count: who goes first changes every round."""
    k = round_ % count
    return [*range(k, count), *range(k)]


def compare(
    data: Data,
    steps: int,
    learning_rate: float = 1.0,
    *,
    compile_rounds: int = 1,
    run_rounds: int = 3,
    versions: Sequence[Version] = VERSIONS,
) -> list[Result]:
    """Compiles and runs every version on `data`, interleaved round by round.

    Compile time: `fit.lower(state, ...).compile()` (trace, lower, XLA compile) after
    `jax.clear_caches()`, else JAX would hand back its cached executable. Run time: one
    call of the compiled executable, `block_until_ready` on its outputs.
    """
    states = [v.init(data) for v in versions]
    compile_s: list[list[float]] = [[] for _ in versions]
    compiled: list[Any] = [None] * len(versions)
    # One untimed compile first: the process's one-time costs (first use of the LAPACK
    # kernels, of optax, ...) would otherwise be charged to whichever version goes first.
    versions[0].fit.lower(states[0], steps=steps, learning_rate=learning_rate).compile()
    for r in range(compile_rounds):
        for i in _rotated(len(versions), r):
            jax.clear_caches()
            t0 = time.perf_counter()
            lowered = versions[i].fit.lower(states[i], steps=steps, learning_rate=learning_rate)
            compiled[i] = lowered.compile()
            compile_s[i].append(time.perf_counter() - t0)
    outputs = [jax.block_until_ready(c(s)) for c, s in zip(compiled, states, strict=True)]  # warm
    run_s: list[list[float]] = [[] for _ in versions]
    for r in range(run_rounds):
        for i in _rotated(len(versions), r):
            t0 = time.perf_counter()
            jax.block_until_ready(compiled[i](states[i]))
            run_s[i].append(time.perf_counter() - t0)
    results = []
    for i, v in enumerate(versions):
        final, losses = outputs[i]
        B, Sigma = v.estimates(final)
        results.append(
            Result(
                v.name, np.asarray(losses), np.asarray(B), np.asarray(Sigma), compile_s[i], run_s[i]
            )
        )
    return results


def plot(results: Sequence[Result], path: str) -> None:
    import matplotlib  # optional: only --plot needs it

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 3.5))
    for r, style in zip(results, ("-", "--", ":", "-."), strict=False):
        ax.plot(r.losses, style, label=r.name)
    ax.set_yscale("symlog")
    ax.set(xlabel="iteration", ylabel="negative ELBO", title="PLN fit: the four versions")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description="Fit a Poisson log-normal model: a treeclass vs the tutorial's containers."
    )
    parser.add_argument(
        "--quick",
        action="store_true",
        help="a small run for tests: n=200, p=5, 50 iterations, 1 timing round",
    )
    parser.add_argument("--steps", type=int, help="iterations (1000, as the tutorial)")
    parser.add_argument("--n", type=int, help="simulated samples (1000)")
    parser.add_argument("--p", type=int, help="simulated count variables (20)")
    parser.add_argument("--d", type=int, help="simulated covariates, intercept included (2)")
    parser.add_argument("--seed", type=int, default=0, help="simulation seed (0)")
    parser.add_argument("--data", choices=("simulated", "oaks"), default="simulated")
    parser.add_argument("--large", action="store_true", help="the data rows repeated 100x")
    parser.add_argument(
        "--learning-rate",
        type=float,
        default=1.0,
        help="the step before clipping (1.0: the tutorial's scale(-1.0))",
    )
    parser.add_argument("--rounds", type=int, help="timing rounds (3; 1 with --quick or --large)")
    parser.add_argument(
        "--versions",
        default=",".join(v.name for v in VERSIONS),
        help="comma-separated versions to run (default: all four)",
    )
    parser.add_argument("--plot", metavar="PATH", help="save the loss curves (needs matplotlib)")
    args = parser.parse_args(argv)
    known = {v.name: v for v in VERSIONS}
    names = [name.strip() for name in args.versions.split(",") if name.strip()]
    unknown = [name for name in names if name not in known]
    if unknown or not names:
        parser.error(f"--versions: unknown {unknown}; choose from {', '.join(known)}")
    args.versions = [known[name] for name in names]
    for name, full, small in (("steps", 1000, 50), ("n", 1000, 200), ("p", 20, 5), ("d", 2, 2)):
        if getattr(args, name) is None:
            setattr(args, name, small if args.quick else full)
    if args.rounds is None:
        args.rounds = 1 if args.quick or args.large else 3
    if min(args.steps, args.n, args.p, args.d, args.rounds) < 1:
        parser.error("--steps, --n, --p, --d and --rounds must be positive")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    data = load_oaks_data() if args.data == "oaks" else simulate(args.n, args.p, args.d, args.seed)
    if args.large:
        data = repeat(data, 100)
    (n, p), d = data.Y.shape, data.X.shape[1]
    print(
        f"data:     {data.label}: n={n}, p={p}, d={d}; mean count {data.Y.mean():.2f}, "
        f"{(data.Y == 0).mean():.0%} zeros"
    )
    print(f"log Y!:   {log_stirling_sum(data.Y):.1f} (Stirling, float64 numpy, once, outside jit)")
    print(
        f"fit:      {args.steps} iterations of radam -> scale(-{args.learning_rate:g}) -> "
        "clip(0.1), then closed-form Sigma, Omega"
    )
    print(f"model:    {PLN.from_data(data.Y, data.O, data.X)!r}")

    results = compare(
        data,
        args.steps,
        args.learning_rate,
        compile_rounds=1,
        run_rounds=args.rounds,
        versions=args.versions,
    )
    base = next((r for r in results if r.name == BASELINE), results[0])
    print(
        f"\n{'version':<13} {'first loss':>12} {'last loss':>12} {'compile s':>10} "
        f"{'run s':>9} {'run/' + base.name:>15}"
    )
    for r in results:
        print(
            f"{r.name:<13} {r.losses[0]:>12.2f} {r.losses[-1]:>12.2f} "
            f"{statistics.median(r.compile_s):>10.3f} {statistics.median(r.run_s):>9.4f} "
            f"{r.ratio_to(base):>15.3f}"
        )
    scale = np.abs(base.losses).max()
    spread = max(float(np.abs(r.losses - base.losses).max()) for r in results) / scale
    verdict = "the same" if spread < 1e-4 else "DIFFERENT"
    print("(compile: trace + lower + XLA compile, caches cleared; run: one compiled call)")
    print(
        f"\ntrajectories: {verdict} for all {len(results)} versions "
        f"(max difference {spread:.1e} of the largest loss)"
    )
    if data.B is not None and data.Sigma is not None:
        first = results[0]
        print(
            f"recovery ({first.name}): max |B - B_true| = {np.abs(first.B - data.B).max():.3f}, "
            f"max |Sigma - Sigma_true| = {np.abs(first.Sigma - data.Sigma).max():.3f} "
            f"(max |Sigma_true| = {np.abs(data.Sigma).max():.3f})"
        )
    converged = profiled.fit_and_time(data.Y, data.O, data.X, jnp.float32, 5000, 5e-7)
    m = converged["model"]
    print(
        f"\nconverged: B and Sigma profiled, Rprop on M and S (examples/pln_profiled.py): "
        f"{int(m.iteration)} iterations, final ELBO {float(m.elbo):.2f} (tutorial port, "
        f"{base.name}: {-base.losses[-1]:.2f} after {args.steps}); first call "
        f"{converged['first_s']:.2f} s, compiled call {converged['run_s']:.3f} s"
    )
    if args.plot:
        plot(results, args.plot)
        print(f"plot:     {args.plot}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
