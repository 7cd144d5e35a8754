"""A NamedTuple whose tuple API is used: refused even with --namedtuples (the
migration corpus, tests/migrate/test_migrate_corpus.py)."""

from typing import NamedTuple

import jax


class Carry(NamedTuple):
    h: jax.Array
    c: jax.Array


def step(carry, x):
    return carry._replace(h=carry.h + x)
