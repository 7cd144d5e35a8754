"""The PLN tutorial's own containers (its "levels" 2-4), computing the same corrected math
as the treeclass model in examples/pln.py, which compares all four side by side.

What it shows: the plumbing each container needs for one compiled `lax.scan` fit,

- level 2, dicts: `optim_params` / `other_params` dicts in the scan carry; n and p are
  dict leaves, hence traced;
- level 3, a `NamedTuple`: every field is a leaf (n, p, d traced too), updates go
  through `_replace`, the ELBO still takes dicts built field by field;
- level 4, a hand-written `register_pytree_node_class`: `tree_flatten` and
  `tree_unflatten` written out, every field listed twice more;

and the tutorial's defects, fixed here (docs/examples/pln.md):

- the trace term is trace((M'M + diag(sum S**2)) @ Omega); the tutorial's
  `trace(M.T @ M + diag(...) @ Omega)` applies Omega to the diagonal part only;
- log det Omega comes from `slogdet`: `log(det(Omega))` overflows to inf in float32;
- the sum of log Y! is data-only and arrives precomputed (`log_y_factorial`), not
  recomputed inside the compiled ELBO (jax 0.10.2 miscompiles that sum on CPU);
- level 4's `tree_unflatten` keeps Sigma and Omega (the tutorial's dropped them and
  re-ran `__init__`), the data are children rather than aux data (arrays in aux data
  are baked in as constants, and a second instance fails JAX's metadata equality
  check), and `update_Sigma` / `update_Omega` assign to `self`, not to a global `pln`.

Every fit runs the tutorial's optimizer (`make_optimizer`, shared with pln.py so the
four versions do the same work) and returns (fitted state, loss per iteration).

    python examples/pln_containers.py --quick     # pln.py's comparison, these three only
"""

# ruff: noqa: N802, N803, N806, E741 - the PLN literature's names: Y, O, X, B, M, S, Sigma, Omega

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
from jax.tree_util import register_pytree_node_class

try:
    import optax
except ImportError:  # the [examples] extra
    msg = "examples/pln_containers.py needs optax: pip install '.[examples]'"
    raise SystemExit(msg) from None


def make_optimizer(learning_rate: float = 1.0) -> optax.GradientTransformation:
    """The tutorial's chain: RAdam's direction, a step of -learning_rate, then each
    coordinate's step clipped to [-0.1, 0.1].

    The tutorial writes `optax.scale(-1.0)`; its `lr = 1e-4` is passed around but never
    used, so the default here is 1.0, which reproduces it.
    """
    return optax.chain(optax.scale_by_radam(), optax.scale(-learning_rate), optax.clip(0.1))


def get_ELBO(optim_params: dict[str, Any], other_params: dict[str, Any]) -> jax.Array:
    """The tutorial's `get_ELBO` (it returns the NEGATIVE ELBO), corrected."""
    B, M, S = optim_params["B"], optim_params["M"], optim_params["S"]
    X, O, Y = other_params["X"], other_params["O"], other_params["Y"]
    n, p, Omega = other_params["n"], other_params["p"], other_params["Omega"]
    S2 = jnp.square(S)
    XB = X @ B
    A = jnp.exp(O + M + XB + S2 / 2)
    elbo = n / 2 * jnp.linalg.slogdet(Omega)[1]  # fixed: was log(det(Omega))
    elbo += jnp.sum(-A + Y * (O + M + XB) + 0.5 * jnp.log(S2))
    # fixed: was trace(M.T @ M + diag(...) @ Omega), Omega applied to the diagonal only
    elbo -= 0.5 * jnp.trace((M.T @ M + jnp.diag(jnp.sum(S2, axis=0))) @ Omega)
    elbo += 0.5 * n * p - other_params["log_y_factorial"]  # fixed: computed outside jit
    return -elbo


def get_Sigma(n: Any, M: jax.Array, S: jax.Array) -> jax.Array:
    return (M.T @ M + jnp.diag(jnp.sum(S**2, axis=0))) / n


def starting_point(Y: Any, O: Any, X: Any, log_y_factorial: float) -> dict[str, Any]:
    """The tutorial's `init_params`: B = 0, M = 0, S = 1, Sigma = Omega = I, plus the data
    and the precomputed sum of log Y!."""
    (n, p), d = jnp.shape(Y), jnp.shape(X)[1]
    return {
        "Y": jnp.asarray(Y, jnp.float32),
        "O": jnp.asarray(O, jnp.float32),
        "X": jnp.asarray(X, jnp.float32),
        "n": n,
        "p": p,
        "d": d,
        "log_y_factorial": jnp.asarray(log_y_factorial, jnp.float32),
        "B": jnp.zeros((d, p)),
        "M": jnp.zeros((n, p)),
        "S": jnp.ones((n, p)),
        "Sigma": jnp.eye(p),
        "Omega": jnp.eye(p),
    }


_OTHER = ("X", "O", "n", "Omega", "Y", "p", "Sigma", "log_y_factorial")


# --- level 2: dicts in the scan carry ---------------------------------------------------


def dict_init(start: dict[str, Any]) -> dict[str, Any]:
    optim = {k: start[k] for k in ("B", "M", "S")}
    return {"optim_params": optim, "other_params": {k: start[k] for k in _OTHER}}


def dict_fit(state: dict[str, Any], steps: int, learning_rate: float = 1.0) -> Any:
    optimizer = make_optimizer(learning_rate)

    def scan_fun(carry: dict[str, Any], _: None) -> tuple[dict[str, Any], jax.Array]:
        optim_params, other_params = carry["optim_params"], carry["other_params"]
        loss_value, grads = jax.value_and_grad(get_ELBO)(optim_params, other_params)
        updates, opt_state = optimizer.update(grads, carry["opt_state"])
        optim_params = optax.apply_updates(optim_params, updates)
        Sigma = get_Sigma(other_params["n"], optim_params["M"], optim_params["S"])
        other_params = {**other_params, "Sigma": Sigma, "Omega": jnp.linalg.inv(Sigma)}
        new = {"optim_params": optim_params, "other_params": other_params, "opt_state": opt_state}
        return new, loss_value

    init = {**state, "opt_state": optimizer.init(state["optim_params"])}
    carry, losses = jax.lax.scan(scan_fun, init, length=steps)
    del carry["opt_state"]
    return carry, losses


# --- level 3: a NamedTuple --------------------------------------------------------------


class PLNTuple(NamedTuple):
    Y: Any
    O: Any
    X: Any
    n: int
    p: int
    d: int
    log_y_factorial: Any
    M: Any
    S: Any
    B: Any
    Sigma: Any
    Omega: Any


def tuple_init(start: dict[str, Any]) -> PLNTuple:
    return PLNTuple(**start)


def tuple_fit(pln: PLNTuple, steps: int, learning_rate: float = 1.0) -> Any:
    optimizer = make_optimizer(learning_rate)

    def scan_fun(carry: dict[str, Any], _: None) -> tuple[dict[str, Any], jax.Array]:
        pln = carry["PLN"]
        optim = {"B": pln.B, "M": pln.M, "S": pln.S}
        other = {k: getattr(pln, k) for k in _OTHER}
        loss_value, grads = jax.value_and_grad(get_ELBO)(optim, other)
        updates, opt_state = optimizer.update(grads, carry["opt_state"])
        pln = pln._replace(**optax.apply_updates(optim, updates))
        pln = pln._replace(Sigma=get_Sigma(pln.n, pln.M, pln.S))
        pln = pln._replace(Omega=jnp.linalg.inv(pln.Sigma))
        return {"PLN": pln, "opt_state": opt_state}, loss_value

    opt_state = optimizer.init({"B": pln.B, "M": pln.M, "S": pln.S})
    carry, losses = jax.lax.scan(scan_fun, {"PLN": pln, "opt_state": opt_state}, length=steps)
    return carry["PLN"], losses


# --- level 4: a hand-written pytree class -----------------------------------------------


@register_pytree_node_class
class PLNClass:
    Y: jax.Array
    O: jax.Array
    X: jax.Array
    log_y_factorial: jax.Array
    B: jax.Array
    M: jax.Array
    S: jax.Array
    Sigma: jax.Array
    Omega: jax.Array
    n: int
    p: int
    d: int

    # The arrays, in flatten order. The tutorial put Y, O, X in the aux data (the static
    # part): fine for one instance under one trace, but JAX compares aux data with ==
    # on the next call, and arrays answer == elementwise:
    #     ValueError: Exception raised while checking equality of metadata fields of pytree.
    _children = ("Y", "O", "X", "log_y_factorial", "B", "M", "S", "Sigma", "Omega")

    def __init__(self, start: dict[str, Any]) -> None:
        vars(self).update({k: start[k] for k in (*self._children, "n", "p", "d")})

    def get_optim_params(self) -> dict[str, Any]:
        return {"B": self.B, "M": self.M, "S": self.S}

    def set_optim_params(self, op: dict[str, Any]) -> None:
        # Mutation, as in the tutorial: safe only because it happens to the copy that
        # JAX unflattened inside the scan body, which is flattened again on return.
        vars(self).update(op)

    def get_other_params(self) -> dict[str, Any]:
        return {k: getattr(self, k) for k in _OTHER}

    def update_Sigma(self) -> None:
        self.Sigma = get_Sigma(self.n, self.M, self.S)  # fixed: was `pln.Sigma = ...`

    def update_Omega(self) -> None:
        self.Omega = jnp.linalg.inv(self.Sigma)  # fixed: was `pln.Omega = ...`

    def tree_flatten(self) -> tuple[tuple[Any, ...], tuple[int, int, int]]:
        return tuple(getattr(self, k) for k in self._children), (self.n, self.p, self.d)

    @classmethod
    def tree_unflatten(cls, aux_data: tuple[int, int, int], children: Sequence[Any]) -> PLNClass:
        # Fixed: the tutorial called cls(Y, O, X), which rebuilt M, S, B, Sigma, Omega
        # from scratch, then restored B, M, S only: Sigma and Omega were reset to the
        # identity at every unflatten (and user code ran inside every trace).
        obj = object.__new__(cls)
        vars(obj).update(zip(cls._children, children, strict=True))
        obj.n, obj.p, obj.d = aux_data
        return obj


def class_fit(pln: PLNClass, steps: int, learning_rate: float = 1.0) -> Any:
    optimizer = make_optimizer(learning_rate)

    def scan_fun(carry: dict[str, Any], _: None) -> tuple[dict[str, Any], jax.Array]:
        pln = carry["PLN"]
        loss_value, grads = jax.value_and_grad(get_ELBO)(
            pln.get_optim_params(), pln.get_other_params()
        )
        updates, opt_state = optimizer.update(grads, carry["opt_state"])
        pln.set_optim_params(optax.apply_updates(pln.get_optim_params(), updates))
        pln.update_Sigma()
        pln.update_Omega()
        return {"PLN": pln, "opt_state": opt_state}, loss_value

    opt_state = optimizer.init(pln.get_optim_params())
    carry, losses = jax.lax.scan(scan_fun, {"PLN": pln, "opt_state": opt_state}, length=steps)
    return carry["PLN"], losses


def main(argv: list[str] | None = None) -> int:
    # The data, the timing and the printing live in pln.py, which imports this module:
    # importing it here (lazily: run as a script, this file is `__main__`) avoids a cycle.
    import pln

    args = sys.argv[1:] if argv is None else argv
    if "-h" in args or "--help" in args:
        print(
            "usage: pln_containers.py [pln.py options]: runs examples/pln.py's comparison "
            "with --versions namedtuple,dict,pytree_class\n"
        )
    return pln.main([*args, "--versions", "namedtuple,dict,pytree_class"])


if __name__ == "__main__":
    sys.exit(main())
