"""flax.struct classes in code that uses flax.serialization: converted (treeclass
registers its classes with flax.serialization when flax is installed), the reason
says so. The migration corpus, tests/migrate/test_migrate_corpus.py."""

import jax
from flax import serialization, struct


@struct.dataclass
class Checkpointed:
    w: jax.Array


def save(model):
    return serialization.to_bytes(model)
