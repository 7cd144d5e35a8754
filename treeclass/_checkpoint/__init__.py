"""Checkpoints: state dicts (`tc.to_state_dict` / `tc.from_state_dict`), the `.npz` file format and its manifest (`tc.save` / `tc.load`), treeclasses in flax.serialization and in jax.export."""

from treeclass._checkpoint import interop as interop  # registers each class in jax.export and flax
