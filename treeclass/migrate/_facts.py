"""What the code of the whole run does to instances, read with `ast`: the traps that
make a conversion change behaviour although the class itself looks mechanical.

- calls of `tree_flatten` / `tree_unflatten` / `tree_flatten_with_keys` other than a
  class's own (`super().tree_flatten()` in a subclass's flatten is the analysis's
  business): the methods go away with the conversion;
- attributes assigned after construction (`obj.x = ...`, `setattr(obj, "x", ...)`,
  `self.x = ...` in any method but `__init__`) and attributes mutated in place
  (`obj.cache[k] = v`, `obj.items.append(v)`): a treeclass is frozen, and a mutable
  container in a field changes its leaves behind JAX's back;
- uses of a NamedTuple's tuple API (`._replace`, `._asdict`, `._fields`) and of
  `flax.serialization`, which the converted classes would no longer support.

Attribution is by name: the tool cannot tell which class `obj` is, so a mutation of
any `.cache` counts against every class with a field `cache`. That refuses too much,
never too little.
"""

from __future__ import annotations

import ast
import dataclasses
from collections import defaultdict

from treeclass.migrate import _names

__all__ = ["FLATTEN_METHODS", "Facts", "Site", "scan"]

FLATTEN_METHODS = ("tree_flatten", "tree_unflatten", "tree_flatten_with_keys")
_MUTATORS = frozenset(
    ["append", "extend", "insert", "pop", "popitem", "remove", "clear", "update", "setdefault", "add", "discard", "sort", "reverse", "__setitem__", "__delitem__"]
)
_TUPLE_API = frozenset({"_replace", "_asdict", "_fields", "_make"})


@dataclasses.dataclass(frozen=True)
class Site:
    """Where something happens: `path:line`, and the code (shortened)."""

    path: str
    line: int
    code: str

    def __str__(self) -> str:
        return f"`{self.code}` at {self.path}:{self.line}"


@dataclasses.dataclass
class Facts:
    # method name -> (receiver: "self:Cls" inside Cls, "name:x" for a name (a class or
    # a variable), "" for any other expression; site)
    flatten_calls: dict[str, list[tuple[str, Site]]] = dataclasses.field(default_factory=lambda: defaultdict(list))
    mutated: dict[str, list[Site]] = dataclasses.field(default_factory=lambda: defaultdict(list))
    # attribute -> sites outside any __init__ (receiver not `self`)
    assigned: dict[str, list[Site]] = dataclasses.field(default_factory=lambda: defaultdict(list))
    # (class name, attribute) -> sites of `self.attr = ...` in a method other than __init__
    self_assigned: dict[tuple[str, str], list[Site]] = dataclasses.field(default_factory=lambda: defaultdict(list))
    tuple_api: list[Site] = dataclasses.field(default_factory=list)
    flax_serialization: list[Site] = dataclasses.field(default_factory=list)


class _Scanner(ast.NodeVisitor):
    def __init__(self, facts: Facts, path: str, source: str, names: dict[str, str]) -> None:
        self.facts, self.path, self.source, self.names = facts, path, source, names
        self.cls: str | None = None  # the enclosing class, for methods
        self.method: str | None = None
        self.self_name: str | None = None
        # Names bound to `X.__new__(...)` in the current function: an unflatten that
        # bypasses __init__ builds its instance with attribute writes.
        self.new_objects: set[str] = set()

    def site(self, node: ast.AST) -> Site:
        code = ast.get_source_segment(self.source, node) or ""
        code = " ".join(code.split())
        return Site(self.path, getattr(node, "lineno", 0), code if len(code) <= 60 else code[:57] + "...")

    def visit_ClassDef(self, node: ast.ClassDef) -> None:
        outer = self.cls, self.method, self.self_name
        self.cls, self.method, self.self_name = node.name, None, None
        self.generic_visit(node)
        self.cls, self.method, self.self_name = outer

    def visit_FunctionDef(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        outer = self.cls, self.method, self.self_name
        outer_new = self.new_objects
        self.new_objects = {
            t.id
            for n in ast.walk(node)
            if isinstance(n, ast.Assign) and isinstance(n.value, ast.Call) and isinstance(n.value.func, ast.Attribute)
            and n.value.func.attr == "__new__"
            for t in n.targets
            if isinstance(t, ast.Name)
        }
        if self.method is None and self.cls is not None:
            args = node.args.posonlyargs + node.args.args
            self.method, self.self_name = node.name, args[0].arg if args else None
        else:  # a nested function: `self` there is not the instance being built
            self.cls, self.method, self.self_name = None, node.name, None
        self.generic_visit(node)
        self.cls, self.method, self.self_name = outer
        self.new_objects = outer_new

    visit_AsyncFunctionDef = visit_FunctionDef  # noqa: N815 - ast's visitor naming

    def _is_self(self, node: ast.expr) -> bool:
        return isinstance(node, ast.Name) and node.id == self.self_name

    def _target(self, target: ast.expr, stmt: ast.AST) -> None:
        if isinstance(target, ast.Tuple | ast.List):
            for element in target.elts:
                self._target(element, stmt)
        elif isinstance(target, ast.Starred):
            self._target(target.value, stmt)
        elif isinstance(target, ast.Subscript):
            if isinstance(target.value, ast.Attribute):
                self.facts.mutated[target.value.attr].append(self.site(stmt))
        elif isinstance(target, ast.Attribute):
            self._assigned(target.value, target.attr, stmt)

    def _assigned(self, receiver: ast.expr, attr: str, stmt: ast.AST) -> None:
        if isinstance(receiver, ast.Name) and receiver.id in self.new_objects:
            return  # building an instance, not changing one
        if self._is_self(receiver) and self.cls is not None:
            if self.method != "__init__":
                self.facts.self_assigned[(self.cls, attr)].append(self.site(stmt))
        else:
            self.facts.assigned[attr].append(self.site(stmt))

    def visit_Assign(self, node: ast.Assign) -> None:
        for target in node.targets:
            self._target(target, node)
        self.generic_visit(node)

    def visit_AugAssign(self, node: ast.AugAssign) -> None:
        self._target(node.target, node)
        self.generic_visit(node)

    def visit_AnnAssign(self, node: ast.AnnAssign) -> None:
        if node.value is not None:
            self._target(node.target, node)
        self.generic_visit(node)

    def visit_Delete(self, node: ast.Delete) -> None:
        for target in node.targets:
            self._target(target, node)
        self.generic_visit(node)

    def visit_Call(self, node: ast.Call) -> None:
        func = node.func
        if isinstance(func, ast.Attribute):
            if func.attr in FLATTEN_METHODS:
                self._flatten_call(func, node)
            elif func.attr in _MUTATORS and isinstance(func.value, ast.Attribute):
                self.facts.mutated[func.value.attr].append(self.site(node))
        qualified = _names.dotted(func, self.names)
        if qualified in {"setattr", "object.__setattr__", "delattr", "object.__delattr__"} and len(node.args) >= 2:
            name = node.args[1]
            building = self.method == "__init__" and self._is_self(node.args[0])
            if isinstance(name, ast.Constant) and isinstance(name.value, str) and not building:
                self._assigned(node.args[0], name.value, node)
        if qualified is not None and qualified.startswith("flax.serialization"):
            self.facts.flax_serialization.append(self.site(node))
        self.generic_visit(node)

    def _flatten_call(self, func: ast.Attribute, node: ast.Call) -> None:
        receiver = func.value
        if isinstance(receiver, ast.Call) and _names.dotted(receiver.func, self.names) == "super":
            return  # a subclass extending its base's flatten: the analysis reads it
        qualified = _names.dotted(receiver, self.names) or ""
        if qualified == "jax" or qualified.startswith("jax."):
            return  # `jax.tree_util.tree_flatten(x)`: a module's function, not a method
        if isinstance(receiver, ast.Name) and (receiver.id == self.self_name or receiver.id == "cls") and self.cls:
            if self.method in FLATTEN_METHODS:
                return  # tree_flatten_with_keys reusing tree_flatten: the analysis reads it
            owner = f"self:{self.cls}"
        elif isinstance(receiver, ast.Name):
            owner = f"name:{receiver.id}"
        else:
            owner = ""
        self.facts.flatten_calls[func.attr].append((owner, self.site(node)))

    def visit_Attribute(self, node: ast.Attribute) -> None:
        if node.attr in _TUPLE_API:
            self.facts.tuple_api.append(self.site(node))
        self.generic_visit(node)


def scan(facts: Facts, tree: ast.Module, path: str, source: str, names: dict[str, str]) -> None:
    """Adds what `tree` (the module at `path`) does to `facts`."""
    for stmt in tree.body:
        if isinstance(stmt, ast.Import | ast.ImportFrom):
            for alias in stmt.names:
                full = (getattr(stmt, "module", None) or "") + "." + alias.name
                if "flax.serialization" in full or alias.name == "flax.serialization":
                    facts.flax_serialization.append(Site(path, stmt.lineno, f"import {alias.name}"))
    _Scanner(facts, path, source, names).visit(tree)
