"""Checkpoints: state dicts (`tc.to_state_dict` / `tc.from_state_dict`), the `.npz` file format and its manifest (`tc.save` / `tc.load`), treeclasses in flax.serialization and in jax.export."""

from treeclass._checkpoint import export as export  # registers each class with jax.export
from treeclass._checkpoint import flax_state as flax_state  # registers with flax, lazily
