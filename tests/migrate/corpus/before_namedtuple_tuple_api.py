"""NamedTuples used as tuples (the migration corpus, tests/migrate/test_migrate_corpus.py): the
converted class keeps the tuple protocol (`_replace`, unpacking, indexing), so Carry
converts; what a treeclass cannot keep (`isinstance(x, tuple)`) refuses Pair."""

from typing import NamedTuple

import jax


class Carry(NamedTuple):
    h: jax.Array
    c: jax.Array


def step(carry, x):
    h, c = carry
    return carry._replace(h=h + x + c * carry[1])


class Pair(NamedTuple):
    a: jax.Array
    b: jax.Array


def is_tuple(p: Pair) -> bool:
    return isinstance(p, tuple)
