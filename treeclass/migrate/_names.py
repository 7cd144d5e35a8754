"""What a module's imports make of a name: `jtu.register_pytree_node_class` ->
`jax.tree_util.register_pytree_node_class`, so the finder recognises a registration
however it is spelled (`from jax import tree_util`, `import jax.tree_util as jtu`, an
alias of the function itself)."""

from __future__ import annotations

import ast
from typing import Final

__all__ = [
    "ALLOWED_MIXINS",
    "CHEX_DATACLASS",
    "DATACLASS",
    "FLAX_BASE",
    "FLAX_DATACLASS",
    "GENERIC",
    "JDC_DATACLASS",
    "JDC_STATIC",
    "NAMEDTUPLE",
    "NAMEDTUPLE_FACTORY",
    "REGISTER_CLASS",
    "REGISTER_DATACLASS",
    "REGISTER_FUNCTION",
    "aliases",
    "dotted",
]

# Bases that hold no state: a converted class keeps them as plain mixins.
ALLOWED_MIXINS: Final = frozenset(
    {
        "object",
        "abc.ABC",
        "typing.Generic",
        "typing_extensions.Generic",
        "numpy.lib.mixins.NDArrayOperatorsMixin",
        "numpy.lib.NDArrayOperatorsMixin",
    }
)
REGISTER_CLASS: Final = {
    "jax.tree_util.register_pytree_node_class": "register_pytree_node_class",
    "jax.tree_util.register_pytree_with_keys_class": "register_pytree_with_keys_class",
}
REGISTER_FUNCTION: Final = {
    "jax.tree_util.register_pytree_node": "register_pytree_node",
    "jax.tree_util.register_pytree_with_keys": "register_pytree_with_keys",
}
REGISTER_DATACLASS: Final = {"jax.tree_util.register_dataclass"}
FLAX_DATACLASS: Final = {"flax.struct.dataclass"}
FLAX_BASE: Final = {"flax.struct.PyTreeNode"}
JDC_DATACLASS: Final = {
    "jax_dataclasses.pytree_dataclass",
    "jax_dataclasses._dataclasses.pytree_dataclass",
}
JDC_STATIC: Final = {"jax_dataclasses.Static", "jax_dataclasses._dataclasses.Static"}
CHEX_DATACLASS: Final = {"chex.dataclass", "chex._src.dataclass.dataclass"}
NAMEDTUPLE: Final = {"typing.NamedTuple", "typing_extensions.NamedTuple"}
# Calls that make a NamedTuple class without a class statement (`P = namedtuple("P", "x y")`).
NAMEDTUPLE_FACTORY: Final = {"collections.namedtuple", *NAMEDTUPLE}
DATACLASS: Final = {"dataclasses.dataclass"}
GENERIC: Final = {
    "typing.Generic",
    "typing_extensions.Generic",
    "typing.Protocol",
    "typing_extensions.Protocol",
}


def _imports(body: list[ast.stmt]) -> list[ast.Import | ast.ImportFrom]:
    """The module-level imports, those under `if` (`if TYPE_CHECKING: ... else: ...`)
    and `try` included, in order."""
    out: list[ast.Import | ast.ImportFrom] = []
    for node in body:
        if isinstance(node, ast.Import | ast.ImportFrom):
            out.append(node)
        elif isinstance(node, ast.If) and (dotted(node.test, {}) or "").endswith("TYPE_CHECKING"):
            out += _imports(
                [*node.orelse, *node.body]
            )  # what runs first, then what type checkers see
        elif isinstance(node, ast.If | ast.Try | ast.TryStar):
            inner = [*node.body, *node.orelse, *getattr(node, "finalbody", [])]
            inner += [s for h in getattr(node, "handlers", []) for s in h.body]
            out += _imports(inner)
    return out


def aliases(tree: ast.Module) -> dict[str, str]:
    """Local name -> the qualified name its module-level import binds (a name bound
    twice keeps the one that runs: `try: import chex` before an `except` fallback, the
    `else:` of `if TYPE_CHECKING:`)."""
    found: dict[str, str] = {}
    for node in reversed(_imports(tree.body)):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.asname:
                    found[alias.asname] = alias.name
                else:  # `import jax.tree_util` binds `jax`
                    top = alias.name.split(".")[0]
                    found[top] = top
        else:  # ast.ImportFrom: `from . import x` -> ".x", `from .m import x` -> ".m.x"
            module = "." * node.level + (f"{node.module}." if node.module else "")
            for alias in node.names:
                if alias.name != "*":
                    found[alias.asname or alias.name] = module + alias.name
    return found


def dotted(node: ast.expr, names: dict[str, str]) -> str | None:
    """The qualified name of a name, an attribute chain, or a call of one (a
    decorator with arguments); None for anything else."""
    if isinstance(node, ast.Call):
        return dotted(node.func, names)
    if isinstance(node, ast.Name):
        return names.get(node.id, node.id)
    if isinstance(node, ast.Attribute):
        base = dotted(node.value, names)
        return None if base is None else f"{base}.{node.attr}"
    if isinstance(node, ast.Subscript):  # Generic[T]
        return dotted(node.value, names)
    return None
