"""Library code that calls `tree_flatten` itself: the tool cannot tell which class
`bounds` is, so every class here that defines the method is refused, with the call
named (the migration corpus, tests/migrate/test_migrate_corpus.py)."""

from jax.tree_util import register_pytree_node_class


# refused (library code calls its tree_flatten itself).
@register_pytree_node_class
class Bounds:
    def __init__(self, lo, hi):
        self.lo = lo
        self.hi = hi

    def tree_flatten(self):
        return (self.lo, self.hi), None

    @classmethod
    def tree_unflatten(cls, aux, children):
        return cls(*children)


def width(bounds):
    (lo, hi), _ = bounds.tree_flatten()
    return hi - lo


# refused too: `bounds.tree_flatten()` above could be an instance of this class.
@register_pytree_node_class
class Interval:
    def __init__(self, start, stop):
        self.start = start
        self.stop = stop

    def tree_flatten(self):
        return (self.start, self.stop), None

    @classmethod
    def tree_unflatten(cls, aux, children):
        return cls(*children)
