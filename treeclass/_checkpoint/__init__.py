"""Checkpoints: state dicts (`tc.to_state_dict` / `tc.from_state_dict`), the `.npz` file
and its manifest (`tc.save` / `tc.load`), treeclasses in flax.serialization and in jax.export.

Its modules call downward only (treeclass/README.md draws them): npz.py (`save`, `load`) and
interop.py above state_dict.py (`restore()`, the one walk that fills a template), above
sources.py (the saved side: a state dict or a file), archive.py (the file as it is read),
manifest.py (the format), and template.py (keys, leaves, the errors) at the bottom."""

from treeclass._checkpoint import interop as interop  # registers each class in jax.export and flax
