"""NamedTuple states, converted only with --namedtuples (the migration corpus,
tests/migrate/test_migrate_corpus.py)."""

from typing import NamedTuple

import jax
import jax.numpy as jnp


# converted: every field a child, in order.
class LoopState(NamedTuple):
    x: jax.Array
    i: jax.Array
    scale: float = 2.0


def body(s):
    return LoopState(s.x * s.scale, s.i + 1)


# refused: an array default (a dataclass refuses it; one shared array today).
class Flags(NamedTuple):
    done: jax.Array = jnp.array(False)
