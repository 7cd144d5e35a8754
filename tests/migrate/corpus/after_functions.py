"""`register_pytree_node` / `register_pytree_with_keys` with module-level functions or
lambdas (the migration corpus, tests/migrate/test_migrate_corpus.py)."""

from typing import Any

import jax.numpy as jnp
from jax import tree_util as jtu
import treeclass as tc


# converted: standalone flatten and unflatten functions, removed with the registration.
class Point(tc.TreeClass, eq=False):
    x: Any
    y: Any
    frame: tc.Static[Any] = "world"

    def norm(self):
        return jnp.sqrt(self.x**2 + self.y**2)


# converted: lambdas.
class Gaussian(tc.TreeClass, eq=False):
    mu: Any
    log_sigma: Any

    def log_prob(self, x):
        z = (x - self.mu) / jnp.exp(self.log_sigma)
        return -0.5 * z**2 - self.log_sigma - 0.5 * jnp.log(2 * jnp.pi)


# converted: register_pytree_with_keys whose keys are the attribute names (the key
# paths stay `.lo`, `.hi`).
class Box(tc.TreeClass, eq=False):
    lo: Any
    hi: Any

    def volume(self):
        return jnp.prod(self.hi - self.lo)


# refused: the flatten function is used elsewhere too.
class Segment:
    def __init__(self, a, b):
        self.a = a
        self.b = b


def _flatten_segment(s):
    return (s.a, s.b), None


def _unflatten_segment(_, children):
    return Segment(*children)


jtu.register_pytree_node(Segment, _flatten_segment, _unflatten_segment)


def endpoints(s):
    children, _ = _flatten_segment(s)
    return children


# refused: keys that are not the attribute names (checkpoints keyed "['mean']" would
# break).
class Moments:
    def __init__(self, mean, var):
        self.mean = mean
        self.var = var


jtu.register_pytree_with_keys(
    Moments,
    lambda m: (((jtu.DictKey("mean"), m.mean), (jtu.DictKey("var"), m.var)), None),
    lambda _, children: Moments(*children),
)
