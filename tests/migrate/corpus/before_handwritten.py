"""Hand-written pytree classes registered with `register_pytree_node_class`: the
families that convert, and the traps that must be refused.

The migration corpus (tests/migrate/test_migrate_corpus.py): written for these tests, in the
styles found in public JAX code. Each class says what the tool must do with it.
"""

import jax
import jax.numpy as jnp
from jax.tree_util import register_pytree_node_class


# converted: children and aux 1:1 with attributes, a plain __init__ and unflatten.
@register_pytree_node_class
class Linear:
    def __init__(self, w, b, act="relu"):
        self.w = w
        self.b = b
        self.act = act

    def tree_flatten(self):
        return (self.w, self.b), self.act  # children, aux data

    @classmethod
    def tree_unflatten(cls, act, children):
        return cls(*children, act=act)

    def __call__(self, x):
        y = x @ self.w + self.b
        return jnp.tanh(y) if self.act == "tanh" else jax.nn.relu(y)


# converted: annotated parameters and an aux tuple; the generated __init__ keeps the
# signature, defaults included.
@register_pytree_node_class
class Neuron:
    """A leaky integrator."""

    def __init__(self, v: jax.Array, tau: float = 20.0, dt: float = 0.1):
        self.v = v
        self.tau = tau
        self.dt = dt

    def tree_flatten(self):
        children = (self.v,)
        aux = (self.tau, self.dt)
        return children, aux

    @classmethod
    def tree_unflatten(cls, aux, children):
        (v,) = children
        tau, dt = aux
        return cls(v, tau, dt)

    def step(self, current):
        return Neuron(self.v + self.dt / self.tau * (current - self.v), self.tau, self.dt)


# converted, __init__ kept: it computes and validates, so unflatten bypasses it.
@register_pytree_node_class
class Spline:
    def __init__(self, x, y):
        if x.shape != y.shape:
            raise ValueError("x and y differ in shape")
        self.x = x
        self.slopes = jnp.diff(y) / jnp.diff(x)
        self.y0 = y[0]

    def tree_flatten(self):
        return (self.x, self.slopes, self.y0), None

    @classmethod
    def tree_unflatten(cls, aux, children):
        obj = object.__new__(cls)
        obj.x, obj.slopes, obj.y0 = children
        return obj

    def __call__(self, t):
        i = jnp.clip(jnp.searchsorted(self.x, t) - 1, 0, self.x.shape[0] - 2)
        ys = self.y0 + jnp.concatenate([jnp.zeros(1), jnp.cumsum(self.slopes * jnp.diff(self.x))])
        return ys[i] + self.slopes[i] * (t - self.x[i])


# converted, __init__ kept: it converts its argument with jnp.asarray (unchanged by a
# second call, so skipping it at unflatten changes nothing) and validates.
@register_pytree_node_class
class Standardizer:
    def __init__(self, mean, scale, eps=1e-6):
        self.mean = jnp.asarray(mean)
        self.scale = jnp.asarray(scale)
        self.eps = eps
        if eps <= 0:
            raise ValueError("eps must be positive")

    def tree_flatten(self):
        return (self.mean, self.scale), (self.eps,)

    @classmethod
    def tree_unflatten(cls, aux, children):
        return cls(*children, *aux)

    def __call__(self, x):
        return (x - self.mean) / (self.scale + self.eps)


# converted: private attributes behind read-only properties (question 1: the fields
# keep the attribute names), and an optional child that is always flattened (None
# has no leaves; question 3).
@register_pytree_node_class
class Cosmology:
    def __init__(self, Omega_c, Omega_b, h, n_s, sigma8, Omega_k, w0, wa, gamma=None):
        # primary parameters
        self._Omega_c = Omega_c
        self._Omega_b = Omega_b
        self._h = h
        self._n_s = n_s
        self._sigma8 = sigma8
        self._Omega_k = Omega_k
        self._w0 = w0
        self._wa = wa
        self._gamma = gamma  # optional: None unless set

    @property
    def Omega_c(self):
        return self._Omega_c

    @property
    def Omega_m(self):
        return self._Omega_c + self._Omega_b

    @property
    def h(self):
        return self._h

    @property
    def gamma(self):
        return self._gamma

    def tree_flatten(self):
        params = (
            self._Omega_c,
            self._Omega_b,
            self._h,
            self._n_s,
            self._sigma8,
            self._Omega_k,
            self._w0,
            self._wa,
            self._gamma,
        )
        return params, None

    @classmethod
    def tree_unflatten(cls, aux_data, children):
        return cls(*children)


def growth(cosmo, a):
    """A differentiable function of the parameters (a toy growth factor)."""
    omega = cosmo.Omega_m / (cosmo.Omega_m + (1 - cosmo.Omega_m) * a**3)
    gamma = 0.55 if cosmo.gamma is None else cosmo.gamma
    return a * omega**gamma * cosmo.h


# refused (structure that depends on values): jax-cosmo's pattern, children appended
# only when set, aux computed from them (questions 2 and 3).
@register_pytree_node_class
class FlaggedCosmology:
    def __init__(self, Omega_c, h, gamma=None):
        self._Omega_c = Omega_c
        self._h = h
        self._gamma = gamma
        self._flags = {"gamma_growth": gamma is not None}

    def tree_flatten(self):
        params = (self._Omega_c, self._h)
        if self._flags["gamma_growth"]:
            params += (self._gamma,)
        return params, self._flags

    @classmethod
    def tree_unflatten(cls, aux_data, children):
        gamma = children[2] if aux_data["gamma_growth"] else None
        return cls(children[0], children[1], gamma)


# refused (aux data computed, not an attribute): question 2.
@register_pytree_node_class
class GrowthModel:
    def __init__(self, omega, gamma=None):
        self.omega = omega
        self.gamma = gamma

    def tree_flatten(self):
        return (self.omega, self.gamma), {"gamma_growth": self.gamma is not None}

    @classmethod
    def tree_unflatten(cls, aux, children):
        return cls(*children)


# refused (a cache set in __init__ that is not flattened): question 4.
@register_pytree_node_class
class CachedPower:
    def __init__(self, amplitude):
        self.amplitude = amplitude
        self._workspace = {}

    def tree_flatten(self):
        return (self.amplitude,), None

    @classmethod
    def tree_unflatten(cls, aux, children):
        return cls(*children)


def power(model, k):
    if "norm" not in model._workspace:
        model._workspace["norm"] = jnp.sum(model.amplitude)
    return model.amplitude * k / model._workspace["norm"]


# refused (a mutable dict child written in place): question 4, the silent gradient.
@register_pytree_node_class
class Memo:
    def __init__(self, scale, memo):
        self.scale = scale
        self.memo = memo

    def tree_flatten(self):
        return (self.scale, self.memo), None

    @classmethod
    def tree_unflatten(cls, aux, children):
        return cls(*children)


def remember(m, key, value):
    m.memo[key] = value
    return m


# refused (static when a Python int, dynamic when traced): structure that depends on
# values.
@register_pytree_node_class
class Steps:
    def __init__(self, x, n):
        self.x = x
        self.n = n

    def tree_flatten(self):
        if isinstance(self.n, int):
            return (self.x,), self.n
        return (self.x, self.n), None

    @classmethod
    def tree_unflatten(cls, aux, children):
        if aux is None:
            return cls(*children)
        return cls(children[0], aux)


# refused (attributes set after construction).
@register_pytree_node_class
class Accumulator:
    def __init__(self, total, count=0):
        self.total = total
        self.count = count

    def add(self, x):
        self.total = self.total + x
        self.count += 1

    def tree_flatten(self):
        return (self.total,), self.count

    @classmethod
    def tree_unflatten(cls, count, children):
        return cls(children[0], count)


# refused (a variable number of children: jax-cosmo's container).
@register_pytree_node_class
class Params:
    def __init__(self, *args, **kwargs):
        self.params = args
        self.config = kwargs

    def tree_flatten(self):
        return self.params, self.config

    @classmethod
    def tree_unflatten(cls, aux_data, children):
        return cls(*children, **aux_data)


# refused (aux data unhashable: a dict built in __init__).
@register_pytree_node_class
class Solver:
    def __init__(self, x0, tol=1e-6, maxiter=100):
        self.x0 = x0
        self.options = dict(tol=tol, maxiter=maxiter)

    def tree_flatten(self):
        return (self.x0,), self.options

    @classmethod
    def tree_unflatten(cls, options, children):
        return cls(children[0], **options)


# refused (unflatten runs __init__, which recomputes a child from its argument).
@register_pytree_node_class
class Scaled:
    def __init__(self, w, scale=2.0):
        self.w = w * scale
        self.scale = scale

    def tree_flatten(self):
        return (self.w,), self.scale

    @classmethod
    def tree_unflatten(cls, scale, children):
        return cls(children[0], scale)


# refused (an attribute derived in __init__ that is neither child nor aux).
@register_pytree_node_class
class Embedding:
    def __init__(self, table):
        self.table = table
        self.vocab_size = table.shape[0]

    def tree_flatten(self):
        return (self.table,), None

    @classmethod
    def tree_unflatten(cls, aux, children):
        return cls(*children)
