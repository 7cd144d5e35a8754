"""`python -m treeclass.migrate PATH...`: rewrites hand-written pytree classes into
treeclasses, and refuses, with the reason, whatever it cannot rewrite without changing
behaviour (docs/migration.md). The rewriting needs libcst (the `migrate`
extra); `check()`, which verifies a migration on a user's own objects, needs only jax.

How the pieces fit (each module one job):

- `_names.py`: what a module's imports make of a name (`jtu.register_pytree_node_class`
  -> `jax.tree_util.register_pytree_node_class`).
- `_text.py`: a module's source split once (the code of a node in linear time).
- `_families/`: every family of pytree classes, one module each (hand-written flatten,
  `register_pytree_node`, `register_dataclass`, flax.struct, jax_dataclasses, chex,
  NamedTuple, the equinox Modules it reports), listed in one registry (`RULES`); a
  family is a `_rule.Rule`: how its classes are found, what is particular in planning
  one. A new family is one module there and one line in `RULES`.
- `_find.py`: the pytree classes of a module (`_found.Found`) and the family of each,
  by the registry (project dataclass wrappers, loops and helpers included).
- `_resolve.py`: the files of a run as one program: module names, imports, relative
  imports, aliases and re-exports; which bases hold no state (kept as mixins).
- `_types.py`, `_facts.py`, `_tuples.py`: what the code around a class does to it, in
  one walk over each module. `_facts._Scanner` walks (a `NodeVisitor`) and records
  calls of `tree_flatten`, attributes assigned or mutated after construction,
  unhashable values given to statics; it extends `_types.Typing`, which holds the scope
  (enclosing class and function, what each name is bound to, all set in its `__init__`)
  and says what an expression is; it hands the nodes that matter to NamedTuples to
  `_tuples.TupleScan`, its part for the uses a treeclass cannot keep
  (`isinstance(x, tuple)`, `==` against a tuple, `+`, hashing), typed or through values
  the run cannot type, counted against the classes that can flow there.
- `_checks.py`: what a class body and the run forbid, for every family.
- `_flatten_code.py`, `_init_code.py`: read a hand-written `tree_flatten`,
  `tree_unflatten` and `__init__` into fields, or a refusal.
- `_handwritten.py`, `_dataclasses.py`: one `Plan` (or a refusal) per class, for the
  hand-written families and (with each family's hooks) the dataclass families.
- `_namedtuple.py`: the tuple protocol (`__iter__`, `__getitem__`, `__len__`,
  `_replace`, ...) written into a converted NamedTuple.
- `_rewrite.py`, `_imports.py`: apply the plans to the concrete syntax tree (libcst);
  `_skeleton.py` hands libcst only the statements the plans touch.
- `_engine.py`: a run over files: read (PEP 263), parse, resolve, plan base-first,
  settle inheritance, rewrite, report (every reason of a refusal, what changes with a
  conversion).
- `_cli.py`: the command line: diff, `--write`, `--check`, `--json`.
- `_messages.py`: every refusal reason, with what to do by hand.
- `_check.py`: `check(old, new)`.
"""

from treeclass.migrate._check import check as check

__all__ = ["check"]
