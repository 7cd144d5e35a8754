"""`register_pytree_node` / `register_pytree_with_keys` with module-level functions or
lambdas (the migration corpus, tests/migrate/test_migrate_corpus.py)."""

import jax
import jax.numpy as jnp
from jax import tree_util as jtu


# converted: standalone flatten and unflatten functions, removed with the registration.
class Point:
    def __init__(self, x, y, frame="world"):
        self.x = x
        self.y = y
        self.frame = frame

    def norm(self):
        return jnp.sqrt(self.x**2 + self.y**2)


def _flatten_point(p):
    return (p.x, p.y), p.frame


def _unflatten_point(frame, children):
    x, y = children
    return Point(x, y, frame)


jtu.register_pytree_node(Point, _flatten_point, _unflatten_point)


# converted: lambdas.
class Gaussian:
    def __init__(self, mu, log_sigma):
        self.mu = mu
        self.log_sigma = log_sigma

    def log_prob(self, x):
        z = (x - self.mu) / jnp.exp(self.log_sigma)
        return -0.5 * z**2 - self.log_sigma - 0.5 * jnp.log(2 * jnp.pi)


jax.tree_util.register_pytree_node(
    Gaussian,
    lambda g: ((g.mu, g.log_sigma), None),
    lambda _, children: Gaussian(*children),
)


# converted: register_pytree_with_keys whose keys are the attribute names (the key
# paths stay `.lo`, `.hi`).
class Box:
    def __init__(self, lo, hi):
        self.lo = lo
        self.hi = hi

    def volume(self):
        return jnp.prod(self.hi - self.lo)


jtu.register_pytree_with_keys(
    Box,
    lambda b: (((jtu.GetAttrKey("lo"), b.lo), (jtu.GetAttrKey("hi"), b.hi)), None),
    lambda _, children: Box(*children),
)


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
