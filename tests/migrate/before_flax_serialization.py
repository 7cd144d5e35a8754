"""flax.struct classes in code that uses flax.serialization: refused (a treeclass is
not registered with it). The migration corpus, tests/test_migrate_corpus.py."""

import jax
from flax import serialization, struct


@struct.dataclass
class Checkpointed:
    w: jax.Array


def save(model):
    return serialization.to_bytes(model)
