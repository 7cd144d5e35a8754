"""Semi-mechanical hand-written pytree classes: flatten and unflatten code that does a
little more than list attributes (children as a list, aux data as a dict or a single
value, `cls(*children, **aux)`, an unflatten through `cls.__new__`, a keys flatten), in
the styles of jax-cosmo, ott-jax, jaxlie, tjax, efax and jax-galsim. Each maps to
fields with the same leaves, order and static values, or is refused with its reason.

The migration corpus (tests/test_migrate_corpus.py): written for these tests. Each
class says what the tool must do with it.
"""

import abc

import jax.numpy as jnp
from jax.tree_util import GetAttrKey, register_pytree_node_class, register_pytree_with_keys_class


# converted (jax-cosmo's spline): aux data a dict of hashables spread into the call.
@register_pytree_node_class
class Interpolant:
    def __init__(self, x, y, k=3, endpoints="not-a-knot"):
        self._x = x
        self._y = y
        self.k = k
        self._endpoints = endpoints

    def tree_flatten(self):
        children = (self._x, self._y)
        aux_data = {"endpoints": self._endpoints, "k": self.k}
        return (children, aux_data)

    @classmethod
    def tree_unflatten(cls, aux_data, children):
        x, y = children
        return cls(x, y, **aux_data)

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
@register_pytree_node_class
class SqPNorm(TICost):
    def __init__(self, p: float, shift=0.0):
        super().__init__()
        self.p = p
        self.shift = shift

    def tree_flatten(self):
        return (self.shift,), (self.p,)

    @classmethod
    def tree_unflatten(cls, aux_data, children):
        return cls(*aux_data, *children)

    def h(self, z):
        return 0.5 * jnp.sum(jnp.abs(z + self.shift) ** self.p)


# converted (ott-jax's geometries): children as a list, aux data a dict of keywords.
@register_pytree_node_class
class PointCloud:
    def __init__(self, x, y, epsilon=None, scale_cost=1.0):
        self.x = x
        self.y = y
        self.epsilon = epsilon
        self.scale_cost = scale_cost

    def tree_flatten(self):
        return [self.x, self.y], {"epsilon": self.epsilon, "scale_cost": self.scale_cost}

    @classmethod
    def tree_unflatten(cls, aux_data, children):
        return cls(*children, **aux_data)

    def cost(self):
        return jnp.sum((self.x[:, None] - self.y[None, :]) ** 2) / self.scale_cost


# converted (jaxlie's groups): unflatten through `cls.__new__` + `object.__setattr__`.
@register_pytree_node_class
class SO2:
    def __init__(self, unit_complex):
        self.unit_complex = unit_complex

    def tree_flatten(self):
        return (self.unit_complex,), None

    @classmethod
    def tree_unflatten(cls, aux, children):
        out = cls.__new__(cls)
        object.__setattr__(out, "unit_complex", children[0])
        return out

    def log(self):
        return jnp.arctan2(self.unit_complex[..., 1], self.unit_complex[..., 0])


# converted (efax's parametrizations): the aux data a single value, given by keyword.
@register_pytree_node_class
class NormalNP:
    def __init__(self, mean_times_precision, negative_half_precision, dimensions=1):
        self.mean_times_precision = mean_times_precision
        self.negative_half_precision = negative_half_precision
        self.dimensions = dimensions

    def tree_flatten(self):
        return (self.mean_times_precision, self.negative_half_precision), self.dimensions

    @classmethod
    def tree_unflatten(cls, dimensions, children):
        mean_times_precision, negative_half_precision = children
        return cls(mean_times_precision, negative_half_precision, dimensions=dimensions)

    def mean(self):
        return -0.5 * self.mean_times_precision / self.negative_half_precision


# converted (tjax's keys variant): a keys flatten whose keys are the attribute names.
@register_pytree_with_keys_class
class Interval:
    def __init__(self, lower, upper):
        self.lower = lower
        self.upper = upper

    def tree_flatten_with_keys(self):
        return ((GetAttrKey("lower"), self.lower), (GetAttrKey("upper"), self.upper)), None

    @classmethod
    def tree_unflatten(cls, aux, children):
        return cls(*children)

    def width(self):
        return jnp.sum(self.upper - self.lower)


# converted (jax-galsim's positions): an __init__ that only stores arguments with
# defaults, aux data a tuple spread positionally after the children.
@register_pytree_node_class
class Position:
    def __init__(self, x=0.0, y=0.0, unit="arcsec"):
        self.x = x
        self.y = y
        self.unit = unit

    def tree_flatten(self):
        return (self.x, self.y), (self.unit,)

    @classmethod
    def tree_unflatten(cls, aux, children):
        return cls(*children, *aux)

    def norm(self):
        return jnp.sqrt(self.x**2 + self.y**2)


# converted: aux keys named after the parameters, not the attributes they set.
@register_pytree_node_class
class Kernel:
    def __init__(self, bandwidth, order=2):
        self.bandwidth = bandwidth
        self.k = order

    def tree_flatten(self):
        return (self.bandwidth,), {"order": self.k}

    @classmethod
    def tree_unflatten(cls, aux_data, children):
        return cls(*children, **aux_data)

    def __call__(self, r):
        return jnp.exp(-(r**self.k) / self.bandwidth)


# converted: unflatten builds with `object.__new__` and assigns by tuple unpacking.
@register_pytree_node_class
class Moments:
    def __init__(self, mean, var):
        self.mean = mean
        self.var = var

    def tree_flatten(self):
        return (self.mean, self.var), None

    @classmethod
    def tree_unflatten(cls, aux, children):
        obj = object.__new__(cls)
        obj.mean, obj.var = children
        return obj

    def second(self):
        return jnp.sum(self.var + self.mean**2)


# converted: a staticmethod unflatten that names the class, which no class extends
# (then it is the same as `cls(...)`).
@register_pytree_node_class
class Bounds:
    def __init__(self, lo, hi):
        self.lo = lo
        self.hi = hi

    def tree_flatten(self):
        return (self.lo, self.hi), None

    @staticmethod
    def tree_unflatten(aux, children):
        return Bounds(*children)

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
