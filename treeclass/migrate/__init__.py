"""`python -m treeclass.migrate PATH...`: rewrites hand-written pytree classes into
treeclasses, and refuses, with the reason, whatever it cannot rewrite without changing
behaviour (SPEC §12; docs/migration.md). The rewriting needs libcst (the `migrate`
extra); `check()`, which verifies a migration on a user's own objects, needs only jax.

How the pieces fit (each module one job):

- `_names.py`: what a module's imports make of a name (`jtu.register_pytree_node_class`
  -> `jax.tree_util.register_pytree_node_class`).
- `_find.py`: the pytree classes of a module and how each is registered.
- `_facts.py`: what the code around a class does to it: calls of `tree_flatten`,
  attributes assigned or mutated after construction.
- `_flatten_code.py`, `_init_code.py`: read a hand-written `tree_flatten`,
  `tree_unflatten` and `__init__` into fields, or a refusal.
- `_handwritten.py`, `_dataclasses.py`: one `Plan` (or a refusal) per class, for the
  hand-written and the dataclass families.
- `_rewrite.py`: applies the plans to the concrete syntax tree (libcst).
- `_engine.py`: a run over files: parse, plan, rewrite, report.
- `_cli.py`: the command line: diff, `--write`, `--check`, `--json`.
- `_messages.py`: every refusal reason, with what to do by hand.
- `_check.py`: `check(old, new)`.
"""

from treeclass.migrate._check import check as check

__all__ = ["check"]
