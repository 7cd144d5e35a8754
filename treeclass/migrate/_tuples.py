"""NamedTuples used in ways a treeclass cannot keep, read by _facts' scanner (`TupleScan`,
a part of it).

A converted NamedTuple keeps the tuple protocol its users need (unpacking, indexing,
iteration, `len`, `_replace`, `_fields`, `_asdict`, `_make`: `_namedtuple.py` writes
them into the class), so those uses are not recorded here. What blocks it is what a
treeclass cannot keep: `isinstance(x, tuple)` (False now), `x == (a, b)` (a treeclass
never equals a tuple), `x + y` / `x * 2` (no concatenation), `hash(x)`, a dict key or
a set member (hashed by type and statics, not by value).

A blocking use of a value the run can type (annotated, constructed, returned by a
function annotated to return the class) counts against that class. One on a value it
cannot type counts against the classes that can flow there: for a parameter of a
function, those given to that function's calls by name or to the calls it is a
callback of (`lax.scan(body, init, xs)`: `init`'s and `xs`'s); where a call site passes
a value the run cannot type either, or for any other name, against the NamedTuples
whose instances reach code that cannot type them (`passed`: given to a call, returned
by a function not annotated with the class, put in a container or an attribute, bound
at module level) and whose number of fields fits (`x == (a, b)`: two). A function
annotated to return the class and given as a callback (`lax.cond(p, make, other)`)
takes its instances there too. A public function (no leading `_`, or a dunder:
`__call__`) annotated to return the class hands it to code outside the run
(`returned_out`): the conversion says so in its notes.
"""

from __future__ import annotations

import ast
import builtins
import itertools
from collections.abc import Callable
from typing import Any

from treeclass.migrate import _names
from treeclass.migrate._types import OTHER, Typing, annotation_name, names_none_of

__all__ = ["ANY", "FIXES", "TupleScan", "call_returns", "function_names", "namedtuple_fields"]

# Calls that read a NamedTuple as a pytree or an object, never as a tuple: giving them
# one does not take it where it is not typed.
_OPAQUE = frozenset(
    {"isinstance", "type", "print", "repr", "str", "id", "hasattr", "getattr", "jax.jit"}
)
# Methods that keep what they are given (`stack.append(frame)`), for a later read.
_KEEPING = frozenset({"append", "extend", "insert", "add", "update", "setdefault", "put"})
ANY = (0, 1 << 30)  # (fewest, most) fields of the NamedTuples a use can be about

# Each use a treeclass cannot keep, with the fix (a refusal lists every site).
FIXES = {
    "isinstance": "isinstance(x, tuple) is False for a treeclass: test the class instead",
    "compare": "a treeclass never equals a tuple: compare `tuple(x)`, or the fields",
    "concat": "+ and * do not concatenate a treeclass: write `(*x, ...)` or `tuple(x) * n`",
    "hash": "a treeclass hashes by type and static fields, not by its values: hash or key "
    "on `tuple(x)`",
    "order": "a treeclass has no order (`<`, `sorted`, `min` of several): compare `tuple(x)`",
    "tuple_method": "a treeclass has no tuple method `{attr}`: call it on `tuple(x)`",
    "match": "a `case` sequence pattern never matches a treeclass: match `tuple(x)`",
    "foreign": "{function} takes a tuple as a list and knows no treeclass: pass `tuple(x)`",
}
# Tuple methods and class attributes of a NamedTuple that a converted class does not keep
# (`_namedtuple.KEPT` lists those it keeps).
_NOT_KEPT = frozenset({"count", "index", "_field_defaults"})
# Calls that order their arguments' items, and other libraries' functions that read a
# NamedTuple as a tuple (a list in JSON).
_ORDERING = frozenset({"sorted", "min", "max"})
_AS_TUPLE = frozenset({"json.dumps", "json.dump"})


def _tuple_like(node: ast.expr, names: dict[str, str]) -> bool:
    """A tuple or list literal, or a `tuple(...)` / `list(...)` call."""
    return isinstance(node, ast.Tuple | ast.List) or (
        isinstance(node, ast.Call) and _names.dotted(node.func, names) in ("tuple", "list")
    )


def _length(node: ast.expr) -> tuple[int, int]:
    """The NamedTuples a comparison with `node` can be about: `(a, b)`, two fields."""
    if isinstance(node, ast.Tuple | ast.List) and not any(
        isinstance(e, ast.Starred) for e in node.elts
    ):
        return (len(node.elts), len(node.elts))
    return ANY


def _callee(func: ast.expr) -> str | None:
    """A call's function by its last name: `f(...)` and `obj.f(...)` both `f`."""
    return (
        func.id
        if isinstance(func, ast.Name)
        else func.attr
        if isinstance(func, ast.Attribute)
        else None
    )


def _public(method: str | None) -> bool:
    """A name code outside the run may call: no leading `_`, or a dunder (`__call__`
    is called as `solver(x)`, `__iter__` by a `for`)."""
    if method is None:
        return False
    return not method.startswith("_") or (method.startswith("__") and method.endswith("__"))


class TupleScan:
    """The NamedTuple half of the scan: the scanner (`_facts._Scanner`) walks a module
    and hands this the nodes it reads (a comparison, `+`, a display, a call, a return);
    `typing` (the scanner itself) says what an expression is in the current scope.
    What it finds goes into `facts`: `tuple_use`, `untyped_use`, `passed`, `stored`,
    `arguments`, `returned_out` (narrowed by `Facts.narrow()` once the run is read)."""

    def __init__(self, facts: Any, typing: Typing, site: Callable[[ast.AST], Any]) -> None:
        # `facts` is a _facts.Facts, `site` its Site maker: typed loosely, as _facts
        # imports this module and an import back, even for type checkers, is a cycle.
        self.facts = facts
        self.typing = typing
        self.site = site

    def _typed(self, value: ast.expr) -> str | None:
        """The class of the run `value` is an instance of, OTHER, or None (unknown)."""
        if isinstance(value, ast.Name) and self.typing.is_class(value):
            return OTHER  # the class itself, not an instance
        if isinstance(value, ast.Name | ast.Attribute):
            return self.typing.receiver(value)
        return self.typing.value_type(value)  # a call, or a display (`(1, 2)`: OTHER)

    def _classes(self, value: ast.expr) -> set[str]:
        """The classes of the run `value` may be an instance of: its type, or for a call,
        what a function of that name anywhere in the run is annotated to return
        (`initial_state()` imported from another module)."""
        value = value.value if isinstance(value, ast.Starred) else value
        kinds = {self._typed(value)}
        if isinstance(value, ast.Call):
            kinds |= self.facts.call_returns.get(_callee(value.func) or "", set())
        return {k for k in kinds if k}

    def _passes(self, *values: ast.expr | None, stored: bool = False) -> None:
        """Instances in `values` go where they cannot be typed (`stored`: into a
        container, an attribute or a module global, where a read of it finds them)."""
        for value in values if self.facts.namedtuple_fields else ():
            kinds = self._classes(value) if value is not None else set()
            self.facts.passed |= kinds
            if stored:
                self.facts.stored |= kinds
            if isinstance(
                value, ast.Name
            ):  # `lax.cond(p, make, other)`: what the callback returns goes there
                self.facts.passed |= self.facts.call_returns.get(value.id, set())

    def _arguments(self, node: ast.Call) -> None:
        """What flows into the parameters of the function called, and of each function
        given as a callback (`lax.scan(body, init, xs)`: `init` and `xs` into `body`)."""
        values = [a.value if isinstance(a, ast.Starred) else a for a in node.args]
        values += [k.value for k in node.keywords]
        callbacks = [v.id for v in values if isinstance(v, ast.Name) and self._function(v)]
        callees = [_callee(node.func), *callbacks]
        given = [v for v in values if not self._function(v)]
        typed = {k for v in given for k in self._classes(v)}
        untyped = [v for v in given if self._typed(v) is None and not self._classes(v)]
        # An untyped value read out of something the run knows is not an instance
        # (`trace_stack[0]` of a list literal): only what code stores can be there. A
        # parameter of this function handed on: what flows into it flows on.
        read = [v for v in untyped if self._root_is_other(v)]
        forwarded = [v for v in untyped if isinstance(v, ast.Name) and v.id in self.typing.params]
        for callee in filter(None, callees):
            self.facts.arguments.setdefault(callee, set()).update(typed)
            if len(read) + len(forwarded) < len(untyped):
                self.facts.untyped_arguments.add(callee)
            if read:
                self.facts.read_arguments.add(callee)
            for name in forwarded:
                self.facts.forwarded.setdefault(callee, set()).add(self.typing.param_of[name.id])

    def _root_is_other(self, value: ast.expr) -> bool:
        """`x[0]`, `x.a[1]`, `x.get(k)`: a read out of a name the run types as something
        other than its classes (a list or dict literal, another library's object)."""
        while True:
            if isinstance(value, ast.Subscript | ast.Attribute):
                value = value.value
            elif isinstance(value, ast.Call) and isinstance(value.func, ast.Attribute):
                value = value.func.value
            else:
                break
        return (
            isinstance(value, ast.Name)
            and not self._function(value)
            and value.id not in self.typing.names  # a module's functions may return anything
            and self._typed(value) == OTHER
        )

    def _function(self, value: ast.expr) -> bool:
        """A name bound to a function (a callback given to a call), not a value."""
        return isinstance(value, ast.Name) and value.id in self.facts.functions

    def _blocks(
        self, value: ast.expr, node: ast.AST, use: str, fields: tuple[int, int] = ANY
    ) -> None:
        """`value` used as a tuple in a way a treeclass cannot keep (`use`: a key of
        FIXES); if untyped, by the NamedTuples that can flow there (see the module)."""
        if not self.facts.namedtuple_fields:
            return
        blocked = self.facts.blocked(self.site(node), FIXES[use])
        owners = {self._typed(value)}
        if isinstance(value, ast.Call):  # `hash(make())`: by the return annotation
            owners |= self.facts.call_returns.get(_callee(value.func) or "", set())
        for owner in filter(None, owners - {OTHER}):
            self.facts.tuple_use[owner].append(blocked)
        read = self._root_is_other(value)
        if owners == {None} and self._annotated_otherwise(value):
            return  # `def f(key: jax.Array | int)`: its annotation says what it holds
        if owners == {None} and (self._own(value) or read):
            param = self.typing.param_of.get(value.id) if isinstance(value, ast.Name) else None
            self.facts.untyped_use.append((fields, param, read, blocked))

    def _annotated_otherwise(self, value: ast.expr) -> bool:
        """A parameter annotated with types that name no NamedTuple of the run (and not
        `Any` or `object`): a type checker refuses an instance there, so none is counted
        as going there (haiku's `key_or_seed: jax.Array | int | PRNGSequenceState`)."""
        annotation = self.typing.params.get(value.id) if isinstance(value, ast.Name) else None
        if annotation is None:
            return False
        return names_none_of(annotation, set(self.facts.namedtuple_fields))

    def _own(self, value: ast.expr) -> bool:
        """A name the code binds (not an import, a builtin or `self`), or a call of a
        function of the run by its name (`first(p)[0]`): what may hold an instance
        the run cannot type."""
        names = self.typing.names
        if isinstance(value, ast.Call) and isinstance(value.func, ast.Name):
            name = value.func.id
            return (
                names[name].split(".")[0] in self.typing.packages
                if name in names
                else not hasattr(builtins, name)
            )
        bound = (
            isinstance(value, ast.Name)
            and (value.id in self.typing.types or value.id in self.typing.globals)
            and value.id not in names
        )
        return bound and getattr(value, "id", None) != "self"

    # --- the uses a treeclass cannot keep ----------------------------------------------
    def _blocks_typed(self, value: ast.expr, node: ast.AST, use: str, **detail: str) -> None:
        """`value`, an instance of a NamedTuple of the run the run can type, used as a
        tuple where a treeclass cannot be one (`use`: a key of FIXES, `detail` its
        fields). Not counted on a value it cannot type: these uses (an index, an order,
        `x.count`) are everywhere on other values."""
        kind = self._typed(value)
        if kind in self.facts.namedtuple_fields:
            fix = FIXES[use].format(**detail)
            self.facts.tuple_use[kind].append(self.facts.blocked(self.site(node), fix))

    def compare(self, node: ast.Compare) -> None:
        """`p == (x, y)`: a NamedTuple compares as a tuple, a treeclass by its leaves;
        `p in d` hashes it (or compares it), `p < q` orders it as a tuple."""
        sides = [node.left, *node.comparators]
        for op, (left, right) in zip(node.ops, itertools.pairwise(sides), strict=True):
            if isinstance(op, ast.In | ast.NotIn):
                self._blocks_typed(left, node, "hash")
            elif isinstance(op, ast.Lt | ast.LtE | ast.Gt | ast.GtE):
                self._blocks_typed(left, node, "order")
                self._blocks_typed(right, node, "order")
        if any(isinstance(o, ast.Eq | ast.NotEq) for o in node.ops):
            literals = [s for s in sides if _tuple_like(s, self.typing.names)]
            for side in sides if literals else []:
                if not _tuple_like(side, self.typing.names):
                    self._blocks(side, node, "compare", _length(literals[0]))

    def binop(self, node: ast.BinOp) -> None:
        """`p + (x,)`, `p * 2`: tuple concatenation and repetition."""
        if isinstance(node.op, ast.Add | ast.Mult):
            for side, other in ((node.left, node.right), (node.right, node.left)):
                # `p + (x,)` with `p` untyped may be a NamedTuple; `[1] * n` is no tuple
                # use of `n`: an untyped side counts only beside a tuple, added.
                tuple_added = isinstance(node.op, ast.Add) and isinstance(other, ast.Tuple)
                if self._typed(side) not in (None, OTHER) or tuple_added:
                    self._blocks(side, node, "concat")

    def dict_display(self, node: ast.Dict) -> None:
        """`{p: v}`: a key hashed as a tuple; the values are kept there."""
        for key in filter(None, node.keys):
            if self._typed(key) not in (None, OTHER):
                self._blocks(key, node, "hash")
        self._passes(*node.values, stored=True)

    def set_display(self, node: ast.Set) -> None:
        """`{p, q}`: members hashed as tuples."""
        for element in node.elts:
            if self._typed(element) not in (None, OTHER):
                self._blocks(element, node, "hash")

    def subscript(self, node: ast.Subscript) -> None:
        """`d[p]` (read, written or deleted): a key hashed, or an index, as a tuple."""
        if self.facts.namedtuple_fields:
            self._blocks_typed(node.slice, node, "hash")

    def attribute(self, node: ast.Attribute) -> None:
        """`p.count(v)`, `p.index(v)`, `P._field_defaults`: what a converted class lacks
        (unless a field has that name)."""
        if self.facts.namedtuple_fields and node.attr in _NOT_KEPT:
            kind = self._typed(node.value) or (
                node.value.id
                if isinstance(node.value, ast.Name) and self.typing.is_class(node.value)
                else None
            )
            fields = self.facts.namedtuple_fields.get(kind) if kind else None
            if kind and fields is not None and node.attr not in fields:
                fix = FIXES["tuple_method"].format(attr=node.attr)
                self.facts.tuple_use[kind].append(self.facts.blocked(self.site(node), fix))

    def match(self, node: ast.Match) -> None:
        """`match p:` with a `case (x, y):` sequence pattern: a NamedTuple matches it."""
        if self.facts.namedtuple_fields and any(
            isinstance(c.pattern, ast.MatchSequence)
            or (
                isinstance(c.pattern, ast.MatchOr)
                and any(isinstance(p, ast.MatchSequence) for p in c.pattern.patterns)
            )
            for c in node.cases
        ):
            self._blocks_typed(node.subject, node, "match")

    def calls(self, node: ast.Call, qualified: str | None) -> None:
        """`hash(p)`, `isinstance(p, tuple)`, `sorted([p, q])`, `json.dumps(p)`; and
        where a call takes its arguments."""
        if not self.facts.namedtuple_fields:
            return
        if qualified in _ORDERING and len(node.args) == 1 and not node.keywords:
            items = node.args[0]
            for item in items.elts if isinstance(items, ast.List | ast.Tuple | ast.Set) else []:
                self._blocks_typed(item, node, "order")
        if qualified in _ORDERING and len(node.args) > 1 and not node.keywords:
            for item in node.args:  # `min(p, q)`
                self._blocks_typed(item, node, "order")
        if qualified in _AS_TUPLE and node.args:
            self._blocks_typed(node.args[0], node, "foreign", function=qualified)
        if qualified == "hash" and len(node.args) == 1:
            self._blocks(node.args[0], node, "hash")
        if (
            qualified == "isinstance"
            and len(node.args) == 2
            and "tuple"
            in {
                _names.dotted(n, self.typing.names)
                for n in ast.walk(node.args[1])
                if isinstance(n, ast.Name)
            }
        ):
            self._blocks(node.args[0], node, "isinstance")
        if qualified not in _OPAQUE and not (qualified or "").startswith(
            ("jax.tree.", "jax.tree_util.")
        ):
            keeps = isinstance(node.func, ast.Attribute) and node.func.attr in _KEEPING
            self._passes(*node.args, *(k.value for k in node.keywords), stored=keeps)
        self._arguments(node)

    # --- where an instance goes untyped -------------------------------------------------
    def returned(self, node: ast.Return | ast.Yield | ast.YieldFrom) -> None:
        """A function's result: untyped for its callers unless annotated with the class;
        a public function's (or a dunder's) goes outside the run."""
        returning = self.typing.returning
        kind = (
            self._typed(node.value)
            if node.value is not None and self.facts.namedtuple_fields
            else None
        )
        if node.value is not None and kind != returning:
            self._passes(node.value)  # the callers of a function not annotated with the class
        if returning in self.typing.classes and _public(self.typing.method):
            self.facts.returned_out[returning].append(self.site(node))

    def returned_by_lambda(self, node: ast.Lambda) -> None:
        self._passes(node.body)

    def sequence_display(self, node: ast.Tuple | ast.List) -> None:
        """`(h, state)` hands its items on (a scan body's result); `[frame, ...]` keeps
        them, where a later `stack[0]` reads them."""
        if isinstance(node.ctx, ast.Load):
            self._passes(*node.elts, stored=isinstance(node, ast.List))

    def stored(self, targets: list[ast.expr], value: ast.expr | None, top: bool) -> None:
        """`obj.p = P(...)`, `d[k] = p`, or a module-level `P0 = P(...)` (imported
        elsewhere, untyped there)."""
        if (
            value is not None
            and self.facts.namedtuple_fields
            and (top or any(not isinstance(t, ast.Name) for t in targets))
        ):
            self._passes(value, stored=True)


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


def function_names(tree: ast.Module, out: set[str]) -> None:
    """Adds to `out` the name of every function of `tree`, at any depth: a name given
    to a call is then a callback, whose parameters take the call's other arguments."""
    out |= {n.name for n in ast.walk(tree) if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)}


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
