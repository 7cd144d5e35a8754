"""NamedTuple states, converted only with --namedtuples (the migration corpus,
tests/test_migrate_corpus.py)."""

from typing import NamedTuple

import jax
import jax.numpy as jnp


class LoopState(NamedTuple):
    x: jax.Array
    i: jax.Array
    done: jax.Array = jnp.array(False)


def body(s):
    return LoopState(s.x * 2, s.i + 1, s.i + 1 >= 3)
