"""Semi-mechanical hand-written pytree classes: flatten and unflatten code that does a
little more than list attributes (children as a list, aux data as a dict or a single
value, `cls(*children, **aux)`, an unflatten through `cls.__new__`, a keys flatten), in
the styles of jax-cosmo, ott-jax, jaxlie, tjax, efax and jax-galsim. Each maps to
fields with the same leaves, order and static values, or is refused with its reason.

The migration corpus (tests/test_migrate_corpus.py): written for these tests. Each
class says what the tool must do with it.
"""

import abc
from typing import Any

import jax.numpy as jnp
from jax.tree_util import register_pytree_node_class
import treeclass as tc


# converted (jax-cosmo's spline): aux data a dict of hashables spread into the call.
class Interpolant(tc.TreeClass, eq=False):
    _x: Any
    _y: Any
    _endpoints: tc.Static[Any]
    k: tc.Static[Any]

    def __init__(self, x, y, k=3, endpoints="not-a-knot"):
        object.__setattr__(self, "_x", x)
        object.__setattr__(self, "_y", y)
        object.__setattr__(self, "k", k)
        object.__setattr__(self, "_endpoints", endpoints)

    def __call__(self, t):
        return jnp.interp(t, self._x, self._y) * self.k


class TICost(abc.ABC):
    """A stateless abstract base (ott-jax's translation-invariant costs)."""

    @abc.abstractmethod
    def h(self, z):
        """The cost of a difference."""

    def __call__(self, x, y):
        return self.h(x - y)


# converted (ott-jax's costs): the aux data a tuple given back positionally before the
# children, over a stateless abstract base and `super().__init__()` of it.
class SqPNorm(tc.TreeClass, TICost, eq=False):
    shift: Any
    p: tc.Static[float]

    def __init__(self, p: float, shift=0.0):
        super().__init__()
        object.__setattr__(self, "p", p)
        object.__setattr__(self, "shift", shift)

    def h(self, z):
        return 0.5 * jnp.sum(jnp.abs(z + self.shift) ** self.p)


# converted (ott-jax's geometries): children as a list, aux data a dict of keywords.
class PointCloud(tc.TreeClass, eq=False):
    x: Any
    y: Any
    epsilon: tc.Static[Any] = None
    scale_cost: tc.Static[Any] = 1.0

    def cost(self):
        return jnp.sum((self.x[:, None] - self.y[None, :]) ** 2) / self.scale_cost


# converted (jaxlie's groups): unflatten through `cls.__new__` + `object.__setattr__`.
class SO2(tc.TreeClass, eq=False):
    unit_complex: Any

    def log(self):
        return jnp.arctan2(self.unit_complex[..., 1], self.unit_complex[..., 0])


# converted (efax's parametrizations): the aux data a single value, given by keyword.
class NormalNP(tc.TreeClass, eq=False):
    mean_times_precision: Any
    negative_half_precision: Any
    dimensions: tc.Static[Any] = 1

    def mean(self):
        return -0.5 * self.mean_times_precision / self.negative_half_precision


# converted (tjax's keys variant): a keys flatten whose keys are the attribute names.
class Interval(tc.TreeClass, eq=False):
    lower: Any
    upper: Any

    def width(self):
        return jnp.sum(self.upper - self.lower)


# converted (jax-galsim's positions): an __init__ that only stores arguments with
# defaults, aux data a tuple spread positionally after the children.
class Position(tc.TreeClass, eq=False):
    x: Any = 0.0
    y: Any = 0.0
    unit: tc.Static[Any] = "arcsec"

    def norm(self):
        return jnp.sqrt(self.x**2 + self.y**2)


# converted: aux keys named after the parameters, not the attributes they set.
class Kernel(tc.TreeClass, eq=False):
    bandwidth: Any
    k: tc.Static[Any]

    def __init__(self, bandwidth, order=2):
        object.__setattr__(self, "bandwidth", bandwidth)
        object.__setattr__(self, "k", order)

    def __call__(self, r):
        return jnp.exp(-(r**self.k) / self.bandwidth)


# converted: unflatten builds with `object.__new__` and assigns by tuple unpacking.
class Moments(tc.TreeClass, eq=False):
    mean: Any
    var: Any

    def second(self):
        return jnp.sum(self.var + self.mean**2)


# converted: a staticmethod unflatten that names the class, which no class extends
# (then it is the same as `cls(...)`).
class Bounds(tc.TreeClass, eq=False):
    lo: Any
    hi: Any

    def span(self):
        return jnp.sum(self.hi - self.lo)


# refused: the same, extended: a subclass unflattens as its base today (a bug the
# conversion would silently change), and a treeclass subclass rebuilds itself.
@register_pytree_node_class
class Range:
    def __init__(self, lo, hi):
        self.lo = lo
        self.hi = hi

    def tree_flatten(self):
        return (self.lo, self.hi), None

    @staticmethod
    def tree_unflatten(aux, children):
        return Range(*children)


@register_pytree_node_class
class OpenRange(Range):
    pass


# refused: unflatten writes `__dict__` directly (no one-to-one rebuild the tool reads).
@register_pytree_node_class
class Stats:
    def __init__(self, count, total):
        self.count = count
        self.total = total

    def tree_flatten(self):
        return (self.count, self.total), None

    @classmethod
    def tree_unflatten(cls, aux, children):
        obj = cls.__new__(cls)
        obj.__dict__.update(count=children[0], total=children[1])
        return obj


# refused: a static value that is a list (unhashable aux data: jit cannot key on it).
@register_pytree_node_class
class Grid:
    def __init__(self, values, shape):
        self.values = values
        self.shape = shape

    def tree_flatten(self):
        return (self.values,), {"shape": self.shape}

    @classmethod
    def tree_unflatten(cls, aux_data, children):
        return cls(*children, **aux_data)


def make_grid():
    return Grid(jnp.zeros(4), [2, 2])
