"""NamedTuples used as tuples, read by _facts' scanner (a mixin of it): an instance
unpacked, indexed, iterated, star-unpacked, given to `len` / `sum` / NumPy, compared
with a tuple or tested with `isinstance(p, tuple)` stops working once converted.

A use on a value the run can type (annotated, constructed, returned by a function
annotated to return the class) counts against that class. A use on a value it cannot
type (`def first(p): a, b = p`) counts against the NamedTuples that could be there:
those whose instances reach code that cannot type them (`passed`: given to a call,
returned by a function not annotated with the class, put in a container or an
attribute, bound at module level), and whose number of fields fits the use (an
unpacking into two names: two fields). A function annotated to return the class and
given as a callback (`lax.cond(p, make, other)`) takes its instances there too. A
public function (no leading `_`) annotated to return the class declares it in the
package's API: code outside the run, its users and tests, may use it as a tuple
(jaxlie's `SO3.as_rpy_radians() -> RollPitchYaw`, star-unpacked by its tests):
`returned_out`. (An unannotated one, a loop body, is not read as API: a gap.)
"""

from __future__ import annotations

import ast
import builtins
from collections.abc import Callable
from typing import Any

from treeclass.migrate import _names
from treeclass.migrate._types import OTHER, Typing, annotation_name

__all__ = ["ANY", "TupleUses", "call_returns", "namedtuple_fields"]

_TUPLE_CALLS = frozenset({"len", "tuple", "list", "iter", "enumerate", "zip", "sorted", "reversed"})
_ITERATING = frozenset(
    {"sum", "max", "min", "any", "all", "map", "filter", "set", "frozenset", "dict", "hash"}
)
# Calls that read a NamedTuple as a pytree or an object, never as a tuple: giving them
# one does not take it where it is not typed.
_OPAQUE = frozenset(
    {"isinstance", "type", "print", "repr", "str", "id", "hasattr", "getattr", "jax.jit"}
)
ANY = (0, 1 << 30)  # (fewest, most) fields of the NamedTuples a use can be about


def _tuple_like(node: ast.expr, names: dict[str, str]) -> bool:
    """A tuple or list literal, or a `tuple(...)` / `list(...)` call."""
    return isinstance(node, ast.Tuple | ast.List) or (
        isinstance(node, ast.Call) and _names.dotted(node.func, names) in ("tuple", "list")
    )


def _makes_tuples(node: ast.expr, names: dict[str, str]) -> bool:
    """`enumerate(...)`, `zip(...)`, `d.items()`: their items are plain tuples."""
    func = node.func if isinstance(node, ast.Call) else None
    return (
        _names.dotted(func, names) in ("enumerate", "zip")
        if isinstance(func, ast.Name)
        else isinstance(func, ast.Attribute) and func.attr == "items"
    )


def _index_fields(index: ast.expr) -> tuple[int, int] | None:
    """The NamedTuples an index of an untyped value can be about: `[1]` those with 2
    fields or more, `[-1]` 1 or more, a constant slice any."""
    if (
        isinstance(index, ast.UnaryOp)
        and isinstance(index.op, ast.USub)
        and isinstance(index.operand, ast.Constant)
    ):
        return (index.operand.value, ANY[1]) if isinstance(index.operand.value, int) else None
    if isinstance(index, ast.Constant):
        return (
            (index.value + 1, ANY[1])
            if isinstance(index.value, int) and not isinstance(index.value, bool)
            else None
        )
    if isinstance(index, ast.Slice):  # `p[1:]`; `x[: n]` is an array's
        return (
            ANY
            if all(
                b is None or isinstance(b, ast.Constant | ast.UnaryOp)
                for b in (index.lower, index.upper, index.step)
            )
            else None
        )
    return None  # `x[i]`, `x[order]`, `x[:, 0]`, `x["k"]`: an array's or a mapping's (a NamedTuple's is a gap)


def _public(method: str | None) -> bool:
    """A name code outside the run may call: no leading `_`, or a dunder (`__call__`
    is called as `solver(x)`, `__iter__` by a `for`)."""
    if method is None:
        return False
    return not method.startswith("_") or (method.startswith("__") and method.endswith("__"))


class TupleUses(Typing, ast.NodeVisitor):
    """The scanner's visitors for tuple use (the scanner sets `facts`, `site`, `returning`)."""

    # The scanner's (_facts.Facts and its Site): typed loosely, as _facts imports this module
    # and an import back, even for type checkers only, would be a cycle.
    facts: Any
    site: Callable[[ast.AST], Any]
    returning: str | None = None  # the class the enclosing function is annotated to return
    method: str | None  # the enclosing function's name

    def _typed(self, value: ast.expr) -> str | None:
        """The class of the run `value` is an instance of, OTHER, or None (unknown)."""
        if isinstance(value, ast.Name) and self._is_class(value):
            return OTHER  # the class itself, not an instance
        if isinstance(value, ast.Name | ast.Attribute):
            return self._receiver(value)
        return self._value_type(value) if isinstance(value, ast.Call) else None

    def _passes(self, *values: ast.expr | None) -> None:
        """Instances in `values` go where they cannot be typed."""
        for value in values if self.facts.namedtuple_fields else ():
            kind = (
                self._typed(value.value if isinstance(value, ast.Starred) else value)
                if value is not None
                else None
            )
            if kind not in (None, OTHER):
                self.facts.passed.add(kind)
            if isinstance(
                value, ast.Name
            ):  # `lax.cond(p, make, other)`: what the callback returns goes there
                self.facts.passed |= self.facts.call_returns.get(value.id, set())

    def _tuple_use(
        self,
        value: ast.expr,
        node: ast.AST,
        fields: tuple[int, int] | None = ANY,
        *,
        unpacked: bool = False,
    ) -> None:
        """`value` used as a tuple; if untyped, by the NamedTuples of `fields` (None: none)."""
        if not self.facts.namedtuple_fields:
            return
        owners = {self._typed(value)}
        if isinstance(
            value, ast.Call
        ):  # `f(*T.as_rpy())`, `for v in make()`: by the return annotation
            func = value.func
            name = (
                func.id
                if isinstance(func, ast.Name)
                else func.attr
                if isinstance(func, ast.Attribute)
                else None
            )
            owners |= self.facts.call_returns.get(name or "", set())
        for owner in filter(None, owners - {OTHER}):
            self.facts.tuple_use[owner].append(self.site(node))
        if (
            owners == {None}
            and fields is not None
            and (self._own(value) or (unpacked and isinstance(value, ast.Call)))
        ):
            self.facts.untyped_use.append((fields, self.site(node)))

    def _own(self, value: ast.expr) -> bool:
        """A name the code binds (not an import, a builtin or `self`), or a call of a
        function of the run by its name (`first(p)[0]`): what may hold an instance
        the run cannot type."""
        if isinstance(value, ast.Call) and isinstance(value.func, ast.Name):
            name = value.func.id
            return (
                self.names[name].split(".")[0] in self.packages
                if name in self.names
                else not hasattr(builtins, name)
            )
        bound = (
            isinstance(value, ast.Name)
            and (value.id in self.types or value.id in self.globals)
            and value.id not in self.names
        )
        return bound and getattr(value, "id", None) != "self"

    def _unpacked(self, target: ast.expr, value: ast.expr, node: ast.AST) -> None:
        if isinstance(target, ast.Tuple | ast.List):
            named = sum(not isinstance(e, ast.Starred) for e in target.elts)
            self._tuple_use(
                value, node, (named, named if named == len(target.elts) else ANY[1]), unpacked=True
            )

    def visit_Compare(self, node: ast.Compare) -> None:
        """`p == (x, y)`: a NamedTuple compares as a tuple, a treeclass by its leaves."""
        sides = [node.left, *node.comparators]
        if any(isinstance(o, ast.Eq | ast.NotEq) for o in node.ops) and any(
            _tuple_like(s, self.names) for s in sides
        ):
            for side in sides:
                if not _tuple_like(side, self.names):
                    self._tuple_use(side, node)
        self.generic_visit(node)

    def visit_Subscript(self, node: ast.Subscript) -> None:
        if isinstance(node.ctx, ast.Load):
            self._tuple_use(node.value, node, _index_fields(node.slice))
        self.generic_visit(node)

    def visit_For(self, node: ast.For | ast.AsyncFor | ast.comprehension) -> None:
        self._tuple_use(node.iter, node.iter)
        if (
            self.facts.namedtuple_fields
            and isinstance(node.target, ast.Tuple | ast.List)
            and not _makes_tuples(node.iter, self.names)
        ):
            named = sum(
                not isinstance(e, ast.Starred) for e in node.target.elts
            )  # `for a, b in pairs`: each is unpacked
            fields = (named, named if named == len(node.target.elts) else ANY[1])
            self.facts.untyped_use.append((fields, self.site(node.target)))
        self.generic_visit(node)

    visit_AsyncFor = visit_comprehension = visit_For  # noqa: N815 - ast's visitor naming

    def visit_Starred(self, node: ast.Starred) -> None:
        if isinstance(node.ctx, ast.Load):
            self._tuple_use(node.value, node)
        self.generic_visit(node)

    def _tuple_calls(self, node: ast.Call, qualified: str | None) -> None:
        if not self.facts.namedtuple_fields:
            return
        if qualified in _TUPLE_CALLS and len(node.args) >= 1:
            self._tuple_use(node.args[0], node)
        if qualified in _ITERATING or (qualified or "").startswith(("numpy.", "jax.numpy.")):
            for arg in node.args:  # `sum(p)`, `map(f, p)`, `jnp.stack(p)`: read as a sequence
                if (
                    qualified in _ITERATING or self._typed(arg) is not None
                ):  # an untyped array is the rule in NumPy
                    self._tuple_use(arg, node)
        if (
            qualified == "isinstance"
            and len(node.args) == 2
            and "tuple"
            in {
                _names.dotted(n, self.names)
                for n in ast.walk(node.args[1])
                if isinstance(n, ast.Name)
            }
        ):
            self._tuple_use(node.args[0], node)
        if qualified not in _OPAQUE and not (qualified or "").startswith(
            ("jax.tree.", "jax.tree_util.")
        ):
            self._passes(*node.args, *(k.value for k in node.keywords))

    # --- where an instance goes untyped -------------------------------------------------
    def visit_Return(self, node: ast.Return | ast.Yield | ast.YieldFrom) -> None:
        kind = (
            self._typed(node.value)
            if node.value is not None and self.facts.namedtuple_fields
            else None
        )
        if node.value is not None and kind != self.returning:
            self._passes(node.value)  # the callers of a function not annotated with the class
        if self.returning in self.classes and _public(
            self.method
        ):  # a public signature: its callers may be outside the run
            self.facts.returned_out[self.returning].append(self.site(node))
        self.generic_visit(node)

    visit_Yield = visit_YieldFrom = visit_Return  # noqa: N815 - ast's visitor naming

    def visit_Lambda(self, node: ast.Lambda) -> None:
        self._passes(node.body)
        self.generic_visit(node)

    def visit_Tuple(self, node: ast.Tuple | ast.List | ast.Set) -> None:
        if not isinstance(node, ast.Set) and isinstance(node.ctx, ast.Load):
            self._passes(*node.elts)
        self.generic_visit(node)

    visit_List = visit_Set = visit_Tuple  # noqa: N815 - ast's visitor naming

    def visit_Dict(self, node: ast.Dict) -> None:
        self._passes(*node.values)
        self.generic_visit(node)

    def _stored(self, targets: list[ast.expr], value: ast.expr | None, top: bool) -> None:
        """`obj.p = P(...)`, `d[k] = p`, or a module-level `P0 = P(...)` (imported
        elsewhere, untyped there)."""
        if (
            value is not None
            and self.facts.namedtuple_fields
            and (top or any(not isinstance(t, ast.Name) for t in targets))
        ):
            self._passes(value)


def namedtuple_fields(tree: ast.Module, names: dict[str, str], out: dict[str, set[str]]) -> None:
    """Adds to `out` each NamedTuple of `tree`'s top level with its fields. A run without
    one skips the tuple-use analysis: only a NamedTuple is refused for it."""
    for stmt in tree.body:
        if isinstance(stmt, ast.ClassDef) and any(
            _names.dotted(b, names) in _names.NAMEDTUPLE for b in stmt.bases
        ):
            declared = {
                s.target.id
                for s in stmt.body
                if isinstance(s, ast.AnnAssign) and isinstance(s.target, ast.Name)
            }
            out[stmt.name] = out.get(stmt.name, set()) | declared


def call_returns(
    tree: ast.Module, names: dict[str, str], classes: frozenset[str], out: dict[str, set[str]]
) -> None:
    """Adds to `out` each function or method of `tree`, at any depth, by name, with the
    classes of the run its return annotation names (`def as_rpy(self) -> hints.Rpy`):
    what a call of that name may return, for the tuple use of its result
    (`f(*T.as_rpy())`, `for v in make()`), whatever the receiver."""
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.returns is not None:
            kind = annotation_name(node.returns, names)
            if kind in classes:
                out.setdefault(node.name, set()).add(kind)
