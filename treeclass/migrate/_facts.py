"""What the code of the whole run does to instances, read with `ast`: the traps that
make a conversion change behaviour although the class itself looks mechanical.

- calls of `tree_flatten` / `tree_unflatten` / `tree_flatten_with_keys` other than a
  class's own (`super().tree_flatten()` in a subclass's flatten is the analysis's
  business): the methods go away with the conversion;
- attributes assigned after construction (`obj.x = ...`, `setattr(obj, "x", ...)`,
  `self.x = ...` in any method but `__init__`) and attributes mutated in place
  (`obj.cache[k] = v`, `obj.items.append(v)` as a statement: a call whose result is
  used, `s = s.add(v)`, is functional): a treeclass is frozen, and a mutable
  container in a field changes its leaves behind JAX's back;
- NamedTuple instances unpacked, indexed or iterated (`a, b = state`, `state[0]`,
  `for x in state`), uses of a NamedTuple's tuple API (`._replace`, `._asdict`) and of
  `flax.serialization`.

Attribution is by what is written to (`Event.owner`): `self` in a method of a class,
a variable annotated or constructed as a class of the run (the class's name), or
unknown (None: counted against every class with a field of that name, which refuses
too much, never too little). A receiver known to be something else (a module,
`jax.config`, an object built by another library: `pbar = tqdm(...)`) is not recorded.
"""

from __future__ import annotations

import ast
import dataclasses
from collections import defaultdict

from treeclass.migrate import _messages, _names
from treeclass.migrate._text import Text
from treeclass.migrate._tuples import TupleScan, call_returns, function_names, namedtuple_fields
from treeclass.migrate._types import OTHER, Typing, annotation_name

__all__ = [
    "FLATTEN_METHODS",
    "Blocked",
    "Event",
    "Facts",
    "Nested",
    "Site",
    "call_returns",
    "function_names",
    "is_test_file",
    "namedtuple_fields",
    "own_first",
    "scan",
]  # call_returns, namedtuple_fields: _tuples'

FLATTEN_METHODS = ("tree_flatten", "tree_unflatten", "tree_flatten_with_keys")
_MUTATORS = frozenset(
    [
        "append",
        "extend",
        "insert",
        "pop",
        "popitem",
        "remove",
        "clear",
        "update",
        "setdefault",
        "add",
        "discard",
        "sort",
        "reverse",
        "__setitem__",
        "__delitem__",
    ]
)


@dataclasses.dataclass(frozen=True)
class Site:
    """Where something happens: `path:line`, and the code (shortened)."""

    path: str
    line: int
    code: str

    def __str__(self) -> str:
        return f"`{self.code}` at {self.path}:{self.line}"


@dataclasses.dataclass(frozen=True)
class Blocked:
    """A use that blocks a NamedTuple's conversion: where, and the fix."""

    site: Site
    fix: str
    # For a value the run cannot type: why the class refused may be there (else "").
    why: str = ""

    def __str__(self) -> str:
        return f"{self.site}: {self.fix}{self.why}"


@dataclasses.dataclass(frozen=True)
class Nested:
    """A class defined below module level: a pytree class there is reported, never
    rewritten."""

    site: Site
    cls: str
    where: str  # "the function `make`", "the class `Initializer`"
    decorators: tuple[str | None, ...]  # qualified, as `_names.dotted` reads them
    bases: tuple[str | None, ...]


@dataclasses.dataclass(frozen=True)
class Event:
    """An attribute written to: on an instance of `owner` (a class name), or on an
    object of unknown type (None)."""

    owner: str | None
    site: Site


def is_test_file(path: str) -> bool:
    """A test module, by the names pytest and unittest collect: `test_*.py`, `*_test.py`,
    `conftest.py`. A helper module in a tests folder is not one (its uses block, as a
    package's), nor is a file under a folder named so (the path may be absolute)."""
    name = path.replace("\\", "/").rsplit("/", 1)[-1]
    return name.startswith("test_") or name.endswith("_test.py") or name == "conftest.py"


def own_first(events: list[Event], name: str) -> list[Event]:
    """`events` with those on an instance of class `name` first, then those on one of
    its bases, then those on an unknown receiver: a refusal cites the class's own use."""
    return sorted(events, key=lambda e: (e.owner != name, e.owner is None))


@dataclasses.dataclass
class Facts:
    classes: frozenset[str] = frozenset()  # the names of the run's classes
    packages: frozenset[str] = (
        frozenset()
    )  # the run's top-level modules: `from pkg.x import f` is the run's
    # (class, attribute) -> the class name its class-body annotation names (`geom: Geometry`)
    attr_types: dict[tuple[str, str], str] = dataclasses.field(default_factory=dict)
    # method name -> (receiver: "self:Cls" inside Cls, "name:x" for a name (a class or
    # a variable), "" for any other expression; site)
    flatten_calls: dict[str, list[tuple[str, Site]]] = dataclasses.field(
        default_factory=lambda: defaultdict(list)
    )
    mutated: dict[str, list[Event]] = dataclasses.field(default_factory=lambda: defaultdict(list))
    assigned: dict[str, list[Event]] = dataclasses.field(default_factory=lambda: defaultdict(list))
    # (class name, attribute) -> sites of `self.attr = ...` in a method other than __init__
    self_assigned: dict[tuple[str, str], list[Site]] = dataclasses.field(
        default_factory=lambda: defaultdict(list)
    )
    tuple_use: dict[str, list[Blocked]] = dataclasses.field(
        default_factory=lambda: defaultdict(list)
    )  # class -> the sites that block it
    # class -> the sites of a test file where a value the run cannot type, which may be an
    # instance, is used as a tuple: a converted class's notes list them (`narrow`).
    test_use: dict[str, list[Blocked]] = dataclasses.field(
        default_factory=lambda: defaultdict(list)
    )
    call_returns: dict[str, set[str]] = dataclasses.field(
        default_factory=dict
    )  # see call_returns()
    namedtuple_fields: dict[str, set[str]] = dataclasses.field(
        default_factory=dict
    )  # NamedTuple -> its fields
    # A blocking use of a value of unknown type: the (fewest, most) fields of the
    # NamedTuples it can be about, the function whose parameter it is (None: not a
    # parameter), and the site. `narrow()` counts them against the NamedTuples that can
    # flow there (_tuples).
    # ... and whether it reads out of a value the run types as no class of its own
    # (`trace_stack[0]`): only what code stores can be there.
    untyped_use: list[tuple[tuple[int, int], str | None, bool, Blocked]] = dataclasses.field(
        default_factory=list
    )
    functions: set[str] = dataclasses.field(default_factory=set)  # every function's name
    # The dunder methods the run defines (`__add__`): `a + b` gives an instance of a class
    # of the run only through one (None: not read).
    operators: frozenset[str] | None = None
    # function name -> the classes of the run given to its calls (or to the calls it is
    # a callback of); `untyped_arguments`: the functions also given values of unknown type.
    arguments: dict[str, set[str]] = dataclasses.field(default_factory=dict)
    untyped_arguments: set[str] = dataclasses.field(default_factory=set)
    read_arguments: set[str] = dataclasses.field(default_factory=set)  # given `stack[0]`s
    # function name -> the functions that hand it one of their own parameters.
    forwarded: dict[str, set[str]] = dataclasses.field(default_factory=dict)
    # The classes whose instances are put in a container, an attribute or a global.
    stored: set[str] = dataclasses.field(default_factory=set)
    passed: set[str] = dataclasses.field(
        default_factory=set
    )  # classes whose instances go where they are not typed
    returned_out: dict[str, list[Site]] = dataclasses.field(
        default_factory=lambda: defaultdict(list)
    )  # class -> public returns
    flax_serialization: list[Site] = dataclasses.field(default_factory=list)
    nested: list[Nested] = dataclasses.field(default_factory=list)  # see _Scanner._nested
    jdc_mutate: list[Site] = dataclasses.field(
        default_factory=list
    )  # jax_dataclasses.copy_and_mutate calls
    # (class, keyword or argument index) -> sites that pass it an unhashable literal
    # (`Cls(meta={...})`, `obj.replace(meta=[...])` with obj of the class)
    unhashable_args: dict[tuple[str, str | int], list[Site]] = dataclasses.field(
        default_factory=lambda: defaultdict(list)
    )
    # (function name, keyword or argument index) -> sites that give a function (any, by
    # its last name) an unhashable value; (function, key) -> the (class, key) of the call
    # of a class it hands that parameter on to (`forward_unhashable` joins them).
    unhashable_given: dict[tuple[str, str | int], list[Site]] = dataclasses.field(
        default_factory=lambda: defaultdict(list)
    )
    static_forwards: dict[tuple[str, str | int], set[tuple[str, str | int]]] = dataclasses.field(
        default_factory=lambda: defaultdict(set)
    )

    blocked = Blocked

    def narrow(self) -> None:
        """Counts the untyped blocking uses, once the whole run is scanned, against the
        NamedTuples that can flow there (`reaching`). One in a test file blocks nothing:
        it is a guess about a value the run cannot type, and a test that a conversion
        breaks fails when the tests run after `--write`, where a package's use would
        change its behaviour in silence; the conversion's notes list it (`test_use`).
        A test's use of a value the run can type still blocks (`_tuples._blocks`)."""
        for (fewest, most), function, read, blocked in self.untyped_use:
            fits = {
                cls
                for cls, fields in self.namedtuple_fields.items()
                if fewest <= len(fields) <= most and cls in self.passed
            }
            if function is None:  # a local, or a read out of a container
                reaching = fits & self.stored if read else fits
            else:
                reaching = self.reaching(function, fits)
            for cls in sorted(reaching):
                why = (
                    _messages.UNTYPED_LOCAL.format(cls=cls)
                    if function is None
                    else _messages.UNTYPED_PARAMETER.format(cls=cls, function=function)
                )
                table = self.test_use if is_test_file(blocked.site.path) else self.tuple_use
                table[cls].append(dataclasses.replace(blocked, why=why))

    def forward_unhashable(self) -> None:
        """Once the run is scanned: an unhashable value given to a helper's parameter that
        the helper hands to a class (jax-cfd's tests: `make(data, jnp.zeros(3))` with
        `def make(data, offset): return GridArray(data, offset)`) is given to the class."""
        for given, targets in self.static_forwards.items():
            for target in targets:
                self.unhashable_args[target] += self.unhashable_given.get(given, [])

    def reaching(self, function: str, fits: set[str]) -> set[str]:
        """The NamedTuples that can be a parameter of `function`: those its calls in the
        run give it (or the calls it is a callback of), those that flow into the
        parameters its callers hand on to it, and where a call gives it a value of
        unknown type, those that reach untyped code and fit the use (`fits`; only those
        code stores, for a read out of a list). A function the run never calls takes
        nothing from the run (its callers are outside: a gap, see docs/migration.md)."""
        out: set[str] = set()
        todo, seen = [function], set()
        while todo:
            f = todo.pop()
            if f in seen:
                continue
            seen.add(f)
            out |= self.arguments.get(f, set()) & set(self.namedtuple_fields)
            if f in self.untyped_arguments:
                out |= fits
            elif f in self.read_arguments:
                out |= fits & self.stored
            todo += self.forwarded.get(f, set())
        return out


# Calls that build an array: a static field cannot hold one (jax arrays do not hash,
# NumPy's compare elementwise). NumPy's scalar types (`np.float32(1.0)`) hash; other
# jax functions may return hashable values (`jax.tree.structure(x)`, a treedef).
_ARRAY_MAKERS = ("jax.numpy.", "jax.random.", "numpy.")
_NUMPY_SCALARS = frozenset(
    f"numpy.{t}"
    for t in (
        *(f"float{n}" for n in (16, 32, 64)),
        *(f"{u}int{n}" for u in ("", "u") for n in (8, 16, 32, 64)),
        "bool_",
        "complex64",
        "complex128",
        "str_",
    )
)


def _unhashable(value: ast.expr, names: dict[str, str]) -> bool:
    """A value no static field can hold: a list, a dict or a set (a display, a
    comprehension, a call), or an array built by jax.numpy, jax.random or NumPy
    (`jnp.zeros(3)`)."""
    if isinstance(value, ast.List | ast.Dict | ast.Set | ast.ListComp | ast.DictComp | ast.SetComp):
        return True
    qualified = (_names.dotted(value.func, names) or "") if isinstance(value, ast.Call) else ""
    return qualified in ("dict", "list", "set") or (
        qualified.startswith(_ARRAY_MAKERS) and qualified not in _NUMPY_SCALARS
    )


def _keys(
    node: ast.FunctionDef | ast.AsyncFunctionDef, cls: str | None
) -> dict[str, list[str | int]]:
    """The keys a call gives each parameter of `node` by: its name, and its position
    among the arguments a call writes (a method's first parameter is not written, unless
    it is a `@staticmethod`; `cls`: the class `node` is defined in, if any)."""
    args = node.args.posonlyargs + node.args.args
    static = any(_names.dotted(d, {}) == "staticmethod" for d in node.decorator_list)
    skip = 1 if cls is not None and not static else 0
    out: dict[str, list[str | int]] = {
        a.arg: ([a.arg, i - skip] if i >= skip else []) for i, a in enumerate(args)
    }
    out.update({a.arg: [a.arg] for a in node.args.kwonlyargs})
    return out


class _Scanner(Typing, ast.NodeVisitor):
    def __init__(
        self, facts: Facts, path: str, text: Text, names: dict[str, str], modules: set[str]
    ) -> None:
        super().__init__(names, facts.classes, facts.packages, facts.attr_types, modules)
        self.facts, self.path, self.text = facts, path, text
        self.operators = facts.operators
        self.unflattens: set[str] = set(
            FLATTEN_METHODS
        )  # and the module's functions given to register_pytree_node
        self.tuples = TupleScan(facts, self, self.site)  # NamedTuple uses: _tuples
        self.top_level: set[int] = set()  # the module's own statements (by id)
        # The parameters in scope, each with its function and the keys a call gives it
        # by (`_keys`): keyword-only ones too, which `param_of` leaves out.
        self.param_keys: dict[str, tuple[str, list[str | int]]] = {}

    def site(self, node: ast.AST) -> Site:
        return Site(self.path, getattr(node, "lineno", 0), self.text.short(node))

    # --- scopes ---------------------------------------------------------------------
    def _nested(self, node: ast.ClassDef) -> None:
        """A class not at module level (inside a function, a class body, an `if`), with
        the qualified names of its decorators and bases: the engine reports the pytree
        classes among them (the tool rewrites module-level classes only)."""
        where = (
            f"the function `{self.method}`"
            if self.method is not None
            else f"the class `{self.cls}`"
            if self.cls is not None
            else "a block of the module (`if`, `try`, `with`)"
        )
        self.facts.nested.append(
            Nested(
                self.site(node),
                node.name,
                where,
                tuple(_names.dotted(d, self.names) for d in node.decorator_list),
                tuple(_names.dotted(b, self.names) for b in node.bases),
            )
        )

    def visit_Module(self, node: ast.Module) -> None:
        self.top_level = {id(stmt) for stmt in node.body}
        for stmt in node.body:
            if isinstance(stmt, ast.FunctionDef):  # defined twice: not followed
                self.functions[stmt.name] = None if stmt.name in self.functions else stmt
        self._bindings(node.body, self.globals)
        for stmt in node.body:
            call = stmt.value if isinstance(stmt, ast.Expr) else None
            if (
                isinstance(call, ast.Call)
                and _names.dotted(call.func, self.names) in _names.REGISTER_FUNCTION
            ):
                self.unflattens |= {
                    a.id
                    for a in [*call.args, *(k.value for k in call.keywords)]
                    if isinstance(a, ast.Name)
                }
        self.generic_visit(node)

    def visit_ClassDef(self, node: ast.ClassDef) -> None:
        if id(node) not in self.top_level:
            self._nested(node)
        outer = self.cls, self.method, self.self_name
        self.cls, self.method, self.self_name = node.name, None, None
        self.generic_visit(node)
        self.cls, self.method, self.self_name = outer

    def visit_FunctionDef(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        outer = self.cls, self.method, self.self_name
        outer_new, outer_types = self.new_objects, self.types
        self.new_objects = set(outer_new)
        args = node.args.posonlyargs + node.args.args
        self.types = dict(outer_types)  # a closure sees its enclosing function's names
        self.declared.pop(id(self.types), None)
        for a in [*args, *node.args.kwonlyargs]:
            self.declare(self.types, a.arg, self._annotation_type(a.annotation))
        for a in filter(None, (node.args.vararg, node.args.kwarg)):
            self.types[a.arg] = OTHER  # `*args` is a tuple, `**kwargs` a dict
        outer_params, outer_param_of = self.params, self.param_of
        self.params = {**outer_params, **{a.arg: a.annotation for a in args}}
        self.param_of = {**outer_param_of, **{a.arg: node.name for a in args}}
        outer_keys = self.param_keys
        self.param_keys = {
            **outer_keys,
            **{name: (node.name, keys) for name, keys in _keys(node, self.cls).items()},
        }
        outer_returning, self.returning = (
            self.returning,
            annotation_name(node.returns, self.names) if node.returns else None,
        )
        if self.method is None and self.cls is not None:
            self.method, self.self_name = node.name, args[0].arg if args else None
            if self.self_name is not None:
                self.types[self.self_name] = self.cls
        else:  # a nested function: `self` there is not the instance being built
            self.cls, self.method, self.self_name = None, node.name, None
        self._bindings(node.body, self.types)
        self.generic_visit(node)
        self.cls, self.method, self.self_name = outer
        self.new_objects, self.types, self.returning = outer_new, outer_types, outer_returning
        self.params, self.param_of = outer_params, outer_param_of
        self.param_keys = outer_keys

    visit_AsyncFunctionDef = visit_FunctionDef  # noqa: N815 - ast's visitor naming

    # --- writes ---------------------------------------------------------------------
    def _is_self(self, node: ast.expr) -> bool:
        return isinstance(node, ast.Name) and node.id == self.self_name

    def _target(self, target: ast.expr, stmt: ast.AST) -> None:
        if isinstance(target, ast.Tuple | ast.List):
            for element in target.elts:
                self._target(element, stmt)
        elif isinstance(target, ast.Starred):
            self._target(target.value, stmt)
        elif isinstance(target, ast.Subscript):
            key = target.slice
            if (
                isinstance(target.value, ast.Attribute)
                and target.value.attr == "__dict__"
                and isinstance(key, ast.Constant)
                and isinstance(key.value, str)
            ):
                self._assigned(
                    target.value.value, key.value, stmt
                )  # `obj.__dict__["w"] = v` bypasses __setattr__
            elif isinstance(target.value, ast.Attribute):
                self._record(self.facts.mutated, target.value.value, target.value.attr, stmt)
        elif isinstance(target, ast.Attribute):
            self._assigned(target.value, target.attr, stmt)

    def _record(
        self, table: dict[str, list[Event]], receiver: ast.expr, attr: str, stmt: ast.AST
    ) -> None:
        owner = self.receiver(receiver)
        if owner != OTHER:
            table[attr].append(Event(owner, self.site(stmt)))

    def _assigned(self, receiver: ast.expr, attr: str, stmt: ast.AST) -> None:
        if (
            isinstance(receiver, ast.Name)
            and receiver.id in self.new_objects
            and self.method in self.unflattens
        ):
            return  # an unflatten building its instance: it goes with the conversion
        if self._is_self(receiver) and self.cls is not None:
            if self.method != "__init__":
                self.facts.self_assigned[(self.cls, attr)].append(self.site(stmt))
        else:
            self._record(self.facts.assigned, receiver, attr, stmt)

    def visit_Assign(self, node: ast.Assign) -> None:
        for target in node.targets:
            self._target(target, node)
        self.tuples.stored(node.targets, node.value, top=self.method is None)
        self.generic_visit(node)

    def visit_AugAssign(self, node: ast.AugAssign) -> None:
        self._target(node.target, node)
        self.generic_visit(node)

    def visit_AnnAssign(self, node: ast.AnnAssign) -> None:
        if node.value is not None:
            self._target(node.target, node)
        self.tuples.stored([node.target], node.value, top=self.method is None)
        self.generic_visit(node)

    def visit_Delete(self, node: ast.Delete) -> None:
        for target in node.targets:
            self._target(target, node)
        self.generic_visit(node)

    def visit_Expr(self, node: ast.Expr) -> None:
        call = node.value  # a mutator called for its effect; `s = s.add(x)` is functional
        func = call.func if isinstance(call, ast.Call) else None
        if (
            isinstance(func, ast.Attribute)
            and func.attr in _MUTATORS
            and isinstance(func.value, ast.Attribute)
        ):
            self._record(self.facts.mutated, func.value.value, func.value.attr, node)
        self.generic_visit(node)

    def _unhashable_args(self, node: ast.Call) -> None:
        """What a call gives a class of the run (`Cls(meta={...})`, `obj.replace(...)`)
        that a static field cannot hold (`_unhashable`); and, for a helper that hands its
        parameter to one (`def make(d, offset): return Grid(d, offset)`), what the calls
        of the helper give it (`Facts.forward_unhashable` joins the two)."""
        func = node.func
        replace = False
        if isinstance(func, ast.Attribute) and func.attr == "replace":
            owner, replace = self.receiver(func.value), True
        else:
            owner = self._named_type(func) if isinstance(func, ast.Name | ast.Attribute) else None
        given: list[tuple[str | int, ast.expr]] = [
            (kw.arg, kw.value) for kw in node.keywords if kw.arg
        ]
        given += [] if replace else list(enumerate(node.args))
        callee = func.id if isinstance(func, ast.Name) else getattr(func, "attr", None)
        for key, value in given:
            if _unhashable(value, self.names):
                if owner:
                    self.facts.unhashable_args[(owner, key)].append(self.site(node))
                elif callee is not None:
                    self.facts.unhashable_given[(callee, key)].append(self.site(node))
            elif owner and isinstance(value, ast.Name) and value.id in self.param_keys:
                function, keys = self.param_keys[value.id]
                for by in keys:
                    self.facts.static_forwards[(function, by)].add((owner, key))

    def visit_Call(self, node: ast.Call) -> None:
        func = node.func
        self._unhashable_args(node)
        if isinstance(func, ast.Attribute) and func.attr in FLATTEN_METHODS:
            self._flatten_call(func, node)
        qualified = _names.dotted(func, self.names)
        self.tuples.calls(node, qualified)
        if (
            qualified in {"setattr", "object.__setattr__", "delattr", "object.__delattr__"}
            and len(node.args) >= 2
        ):
            name = node.args[1]
            building = self.method == "__init__" and self._is_self(node.args[0])
            if isinstance(name, ast.Constant) and isinstance(name.value, str) and not building:
                self._assigned(node.args[0], name.value, node)
        if qualified in (
            "jax_dataclasses.copy_and_mutate",
            "jax_dataclasses._copy_and_mutate.copy_and_mutate",
        ):
            self.facts.jdc_mutate.append(self.site(node))
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
        if (
            isinstance(receiver, ast.Call)
            and _names.dotted(receiver.func, self.names) == "type"
            and len(receiver.args) == 1
        ):
            receiver = receiver.args[0]  # `type(self).tree_unflatten(...)`
        if (
            isinstance(receiver, ast.Name)
            and (receiver.id == self.self_name or receiver.id == "cls")
            and self.cls
        ):
            if self.method in FLATTEN_METHODS:
                return  # tree_flatten_with_keys reusing tree_flatten: the analysis reads it
            owner = f"self:{self.cls}"
        elif (kind := self.receiver(receiver)) == OTHER:
            return
        elif kind is not None:
            owner = f"self:{kind}"  # an instance of a known class (or the class itself)
        elif isinstance(receiver, ast.Name):
            owner = f"name:{receiver.id}"
        else:
            owner = ""
        self.facts.flatten_calls[func.attr].append((owner, self.site(node)))

    # --- NamedTuple uses and where instances go (_tuples.TupleScan) -----------------------
    def visit_Compare(self, node: ast.Compare) -> None:
        self.tuples.compare(node)
        self.generic_visit(node)

    def visit_Subscript(self, node: ast.Subscript) -> None:
        self.tuples.subscript(node)
        self.generic_visit(node)

    def visit_Attribute(self, node: ast.Attribute) -> None:
        self.tuples.attribute(node)
        self.generic_visit(node)

    def visit_Match(self, node: ast.Match) -> None:
        self.tuples.match(node)
        self.generic_visit(node)

    def visit_BinOp(self, node: ast.BinOp) -> None:
        self.tuples.binop(node)
        self.generic_visit(node)

    def visit_Dict(self, node: ast.Dict) -> None:
        self.tuples.dict_display(node)
        self.generic_visit(node)

    def visit_Set(self, node: ast.Set) -> None:
        self.tuples.set_display(node)
        self.generic_visit(node)

    def visit_Tuple(self, node: ast.Tuple | ast.List) -> None:
        self.tuples.sequence_display(node)
        self.generic_visit(node)

    visit_List = visit_Tuple  # noqa: N815 - ast's visitor naming

    def visit_Return(self, node: ast.Return | ast.Yield | ast.YieldFrom) -> None:
        self.tuples.returned(node)
        self.generic_visit(node)

    visit_Yield = visit_YieldFrom = visit_Return  # noqa: N815 - ast's visitor naming

    def visit_Lambda(self, node: ast.Lambda) -> None:
        self.tuples.returned_by_lambda(node)
        self.generic_visit(node)

    def visit_Import(self, node: ast.Import | ast.ImportFrom) -> None:
        if isinstance(node, ast.Import):
            self.modules |= {a.asname or a.name.split(".")[0] for a in node.names}
        for alias in node.names:
            full = (getattr(node, "module", None) or "") + "." + alias.name
            if "flax.serialization" in full or alias.name == "flax.serialization":
                self.facts.flax_serialization.append(
                    Site(self.path, node.lineno, f"import {alias.name}")
                )

    visit_ImportFrom = visit_Import  # noqa: N815 - ast's visitor naming


def scan(
    facts: Facts,
    tree: ast.Module,
    path: str,
    text: Text,
    names: dict[str, str],
    returns: dict[str, str],
) -> None:
    """Adds what `tree` (the module at `path`, whose functions annotated to return a class
    of the run are `returns`: _types.returns) does to `facts` (its `namedtuple_fields`
    read from every module of the run first)."""
    scanner = _Scanner(facts, path, text, names, set())
    scanner.returns = returns
    scanner.visit(tree)
