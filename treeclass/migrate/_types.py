"""What the code of a module says an expression is (for _facts.py): an instance of a
class of the run (its name), something else (`OTHER`: a module, `jax.config`, an object
another library built, a literal), or unknown (None).

A name is typed per scope: `self` in methods; a parameter or variable annotated as a
class (Optional, unions less None and array types, strings); one built by `X(...)`,
`X.create(...)`, `step(...)` / `obj.m()` annotated `-> X`; a copy (`b = a._replace(...)`);
a guard (`isinstance(v, X)`); a loop over another library's call, or over a parameter
annotated as a container of types that name no class of the run (OTHER); an attribute by
its class's annotation or what its methods store. A name bound twice to different types
is unknown unless annotated. `Pair[T]` names the class. What another library's function
returns is OTHER (the run's own packages, imported absolutely, are not another library).
"""

from __future__ import annotations

import ast
import re

from treeclass.migrate import _names

__all__ = [
    "OTHER",
    "Typing",
    "annotation_name",
    "attribute_types",
    "names_none_of",
    "operator_methods",
    "returns",
]

# Packages whose functions may return the caller's own objects (jax.tree.map(f, state),
# copy.copy(state)): a variable bound to their result may be an instance of the class.
_MAY_RETURN_YOURS = frozenset(
    {
        "jax",
        "flax",
        "chex",
        "equinox",
        "optax",
        "copy",
        "functools",
        "dataclasses",
        "typing",
        "builtins",
        "pickle",
        "cloudpickle",
    }
)
_OTHER_BUILTINS = frozenset(
    {
        "int",
        "float",
        "str",
        "bytes",
        "bool",
        "list",
        "dict",
        "set",
        "frozenset",
        "tuple",
        "range",
        "open",
    }
)
OTHER: str = ""  # a known type that is not a class of the run
# Array types left out of a union (`geom: Union[jnp.ndarray, PointCloud]` is a PointCloud
# where it is an instance of a class of the run): a class of the run that derives from one
# has a base from outside the run, and such a class is refused whatever its receivers.
# Calls that return an object of their argument's class.
_COPIES = frozenset({"copy.copy", "copy.deepcopy"})
_ARRAYS = frozenset(
    {"jax.Array", "jax.numpy.ndarray", "numpy.ndarray", "chex.Array", "jax.typing.ArrayLike"}
)


class Typing:
    """What an expression of the module being scanned is: an instance of a class of the
    run (its name), OTHER, or None (unknown). It holds the scope the scanner is in (the
    enclosing class, function and its parameters, and what each local and global name
    was bound to); `_facts._Scanner` extends it and updates the scope as it walks."""

    def __init__(
        self,
        names: dict[str, str],
        classes: frozenset[str],
        packages: frozenset[str],
        attr_types: dict[tuple[str, str], str],
        modules: set[str],
    ) -> None:
        self.names = names  # local name -> qualified name (_names.aliases)
        self.classes = classes  # the names of the run's classes
        self.packages = packages  # the run's top-level modules
        # (class, attribute) -> the class its class-body annotation names
        self.attr_types = attr_types
        self.modules = modules  # local names bound by `import x` / `import x as y`
        self.returns: dict[str, str] = {}  # the module's functions annotated to return a class
        # The module's top-level functions by name (None: defined twice), and which of
        # them return only plain values (`_returns_plain`, read when a call asks).
        self.functions: dict[str, ast.FunctionDef | None] = {}
        self.plain_returns: dict[str, bool] = {}
        # The operator methods the run defines (`__add__`; None: not known): `a + b` is an
        # instance of a class of the run only through one of them.
        self.operators: frozenset[str] | None = None
        # The scope: where the scanner is, and what names hold there.
        self.cls: str | None = None  # the enclosing class, for methods
        self.method: str | None = None  # the enclosing function's name
        self.self_name: str | None = None  # its first parameter, in a method
        # The parameters in scope (the enclosing function's, and those of the functions
        # around it that a closure reads), each with its annotation (None: none) and the
        # name of the function it is a parameter of.
        self.params: dict[str, ast.expr | None] = {}
        self.param_of: dict[str, str] = {}
        self.returning: str | None = None  # the class it is annotated to return
        self.types: dict[str, str | None] = {}  # local -> class name, OTHER, None: unknown
        self.globals: dict[str, str | None] = {}  # the same for the module's names
        self.declared: dict[int, set[str]] = {}  # id(scope) -> its annotated names
        self.local_classes: set[str] = set()  # classes defined inside functions or classes
        # Names bound to `X.__new__(...)` in the current function: an unflatten that
        # bypasses __init__ builds its instance with attribute writes.
        self.new_objects: set[str] = set()

    # --- what a name is -------------------------------------------------------------
    def _annotation_type(self, node: ast.expr | None) -> str | None:
        if node is None:
            return None
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            try:
                node = ast.parse(node.value, mode="eval").body
            except SyntaxError:
                return None
        members = self._members(node)
        if members is not None:  # a union: what is left without None and the array types
            kept = [
                m
                for m in members
                if not (isinstance(m, ast.Constant) and m.value is None)
                and _names.dotted(m, self.names) not in _ARRAYS
            ]
            return self._annotation_type(kept[0]) if len(kept) == 1 else None
        return self._named_type(node)

    def _members(self, node: ast.expr) -> list[ast.expr] | None:
        """The members of `Optional[X]`, `Union[X, Y]`, `X | Y`; None if not a union."""
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr):
            return [m for side in (node.left, node.right) for m in (self._members(side) or [side])]
        last = (
            (_names.dotted(node.value, self.names) or "").split(".")[-1]
            if isinstance(node, ast.Subscript)
            else ""
        )
        if isinstance(node, ast.Subscript) and last in ("Optional", "Union"):
            return list(node.slice.elts) if isinstance(node.slice, ast.Tuple) else [node.slice]
        return None

    def _named_type(self, node: ast.expr) -> str | None:
        qualified = _names.dotted(node, self.names)
        if qualified is None:
            return None
        last = qualified.split(".")[-1]
        if last in self.local_classes and "." not in qualified:
            return OTHER  # a class defined inside a function: not one the tool converts
        if last in self.classes:
            return last
        if qualified in _OTHER_BUILTINS:
            return OTHER
        root = node
        while isinstance(root, ast.Attribute | ast.Call | ast.Subscript):
            root = root.func if isinstance(root, ast.Call) else root.value
        imported = (
            isinstance(root, ast.Name)
            and root.id in self.names
            and not self.names[root.id].startswith(".")
        )
        top = qualified.split(".")[0]
        if (
            imported
            and top not in _MAY_RETURN_YOURS
            and top not in self.classes
            and top not in self.packages
        ):
            return OTHER  # built by another library: not an instance of a class of the run
        return None

    def value_type(self, value: ast.expr) -> str | None:
        if isinstance(value, ast.Call):
            func = value.func
            if (
                isinstance(func, ast.Attribute)
                and isinstance(func.value, ast.Name)
                and func.value.id in self.classes
            ):
                return func.value.id  # State.create(...): a classmethod of the class
            if isinstance(func, ast.Name) and not (
                func.id in self.types or func.id in self.globals or func.id in self.names
            ):
                if func.id in self.returns:  # `step(...)` with `def step(...) -> State`
                    return self.returns[func.id]
                if self._returns_plain(func.id):  # `unroll(...)` returning `tuple(out)`
                    return OTHER
            if (
                _names.dotted(func, self.names) in _COPIES
                and len(value.args) == 1
                and isinstance(value.args[0], ast.Name | ast.Attribute)
            ):  # `new = copy.copy(self)`: an instance of what it copies
                return self.receiver(value.args[0])
            receiver = self.receiver(func.value) if isinstance(func, ast.Attribute) else None
            if (
                receiver
                and isinstance(func, ast.Attribute)
                and (receiver, f"{func.attr}()") in self.attr_types
            ):
                return self.attr_types[
                    receiver, f"{func.attr}()"
                ]  # `t.as_rpy()`, `def as_rpy(self) -> RollPitchYaw`
            return self._named_type(func)
        return OTHER if self._plain(value, scoped=True) else None

    def _plain(self, value: ast.expr, *, scoped: bool) -> bool:
        """`value` is never an instance of a class of the run: a literal or a display (a
        tuple display is a plain tuple, never a NamedTuple instance), a call of a builtin
        (`tuple(out)`) or of a function of the module that returns only such values, or
        `a + b` of such values (adding two NamedTuples gives a plain tuple, though the `+`
        itself is a use `_tuples` judges). `scoped`: a name is what the current scope
        says; without (a `return` read for its callers, in another scope), not known."""
        if isinstance(
            value,
            ast.Constant
            | ast.Tuple
            | ast.List
            | ast.Dict
            | ast.Set
            | ast.JoinedStr
            | ast.ListComp
            | ast.DictComp
            | ast.SetComp,
        ):
            return True
        if isinstance(value, ast.BinOp):
            return self._plain_operation(value, scoped=scoped)
        if scoped:
            if isinstance(value, ast.Name | ast.Attribute):
                return self.receiver(value) == OTHER
            return isinstance(value, ast.Call) and self.value_type(value) == OTHER
        func = value.func if isinstance(value, ast.Call) else None
        if not isinstance(func, ast.Name) or func.id in self.names or func.id in self.globals:
            return False
        builtin = func.id in _OTHER_BUILTINS and func.id not in self.functions
        return builtin or self._returns_plain(func.id)

    def _plain_operation(self, value: ast.BinOp, *, scoped: bool) -> bool:
        """`a + b` that gives no instance of a class of the run: no class of the run
        defines the operator (`operators`), and beside a display (`(16,) * n`,
        `dims + (4,)`: a tuple, a list or an error) or between plain values."""
        method = _OPERATOR_METHODS.get(type(value.op))
        defined = {f"__{method}__", f"__r{method}__", f"__i{method}__"}
        if method is None or (self.operators is not None and self.operators & defined):
            return False
        if isinstance(value.op, ast.Add | ast.Mult) and any(
            isinstance(side, ast.Tuple | ast.List) for side in (value.left, value.right)
        ):
            return True
        return (
            self.operators is not None
            and self._plain(value.left, scoped=scoped)
            and self._plain(value.right, scoped=scoped)
        )

    def _returns_plain(self, name: str) -> bool:
        """`name` is a function of the module, defined once, without a decorator or a
        return annotation, whose every `return` gives a plain value (`_plain`): a call of
        it gives no instance of a class of the run, whatever it is given. What it returns
        is followed rather than guessed (haiku's `unroll_descriptors` returns
        `tuple(out)`). A generator, or a function that returns through itself, is not."""
        if name not in self.plain_returns:
            self.plain_returns[name] = False  # while it is read: recursion is not plain
            fn = self.functions.get(name)
            self.plain_returns[name] = (
                fn is not None
                and fn.returns is None
                and not fn.decorator_list
                and all(
                    isinstance(r, ast.Return)
                    and (r.value is None or self._plain(r.value, scoped=False))
                    for r in _results(fn)
                )
            )
        return self.plain_returns[name]

    def _foreign_call(self, node: ast.expr) -> bool:
        """Another library's function given only constants (`pygame.event.get()`)."""
        call = (
            node
            if isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and self._named_type(node.func) == OTHER
            else None
        )
        return call is not None and all(
            isinstance(a, ast.Constant) for a in [*call.args, *(k.value for k in call.keywords)]
        )

    def receiver(self, node: ast.expr) -> str | None:
        """The class `node` is an instance of: a name, OTHER or None (unknown)."""
        if isinstance(node, ast.Name):
            if node.id in self.modules:
                return OTHER
            if self.is_class(node):
                return node.id  # the class itself: `Carry._make(...)`
            if node.id in self.types:
                return self.types[node.id]
            return self.globals.get(node.id)
        if isinstance(node, ast.Attribute):
            root: ast.expr = node
            while isinstance(root, ast.Attribute):
                root = root.value
            if isinstance(root, ast.Name) and root.id in self.modules:
                return OTHER  # jax.config, np.random: attributes of a module
            owner = self.receiver(node.value)
            if owner:  # `const.geom` with `const: KMeansConst` and `geom: Geometry` declared there
                declared = self.attr_types.get((owner, node.attr))
                return declared if declared in self.classes else None
        if (
            isinstance(node, ast.Call)
            and _names.dotted(node.func, self.names) == "type"
            and len(node.args) == 1
        ):
            return self.receiver(node.args[0])  # `type(self).tree_unflatten(...)`
        return None

    def is_class(self, node: ast.Name) -> bool:
        """`node` names a class of the run itself, not a variable (which may hold an instance)."""
        return (
            node.id in self.classes
            and node.id not in self.types
            and node.id not in self.globals
            and node.id not in self.modules
        )

    def _narrowed(self, node: ast.AST) -> tuple[str, str] | None:
        """`type(v) is self.__class__` / `type(v) == type(self)` / `isinstance(v, C)`:
        `v` is an instance of the class there (a guard before its use)."""
        if (
            isinstance(node, ast.Call)
            and _names.dotted(node.func, self.names) == "isinstance"
            and len(node.args) == 2
        ):
            v, kind = node.args
        elif (
            isinstance(node, ast.Compare)
            and len(node.ops) == 1
            and isinstance(node.ops[0], ast.Is | ast.Eq | ast.IsNot | ast.NotEq)
        ):
            v, kind = node.left, node.comparators[0]
            if not (
                isinstance(v, ast.Call)
                and _names.dotted(v.func, self.names) == "type"
                and len(v.args) == 1
            ):
                return None
            v = v.args[0]
        else:
            return None
        if not isinstance(v, ast.Name):
            return None
        if (isinstance(kind, ast.Attribute) and kind.attr == "__class__") or (
            isinstance(kind, ast.Call) and _names.dotted(kind.func, self.names) == "type"
        ):
            owner = self.cls if self.self_name is not None else None
        else:
            owner = self._named_type(kind)
        return (v.id, owner) if owner else None

    def _items_excluded(self, iterated: ast.expr) -> bool:
        """`iterated` is a parameter annotated as a container of types that name no class
        of the run (`List[Union[int, Tuple[int, int]]]`). A bare `list` or `Sequence`
        says nothing of its items, so it does not count."""
        annotation = self.params.get(iterated.id) if isinstance(iterated, ast.Name) else None
        if isinstance(annotation, ast.Constant) and isinstance(annotation.value, str):
            try:
                annotation = ast.parse(annotation.value, mode="eval").body
            except SyntaxError:
                return False
        return isinstance(annotation, ast.Subscript) and names_none_of(annotation, self.classes)

    def _bind(self, scope: dict[str, str | None], name: str, kind: str | None) -> None:
        if name in self.declared.get(id(scope), ()):
            return  # annotated: its declared type holds through rebinding, as type checkers say
        scope[name] = kind if scope.get(name, kind) == kind else None

    def declare(self, scope: dict[str, str | None], name: str, kind: str | None) -> None:
        """`name: T` (a parameter or an annotated assignment) in `scope`."""
        scope[name] = kind
        if kind is not None:
            self.declared.setdefault(id(scope), set()).add(name)

    def _bindings(self, stmts: list[ast.stmt], scope: dict[str, str | None]) -> None:
        todo: list[ast.AST] = list(stmts)
        copies: list[tuple[str, str]] = []  # `a = b`, `a = b._replace(...)`: a is what b is
        while todo:
            node = todo.pop()
            if isinstance(node, ast.ClassDef) and scope is not self.globals:
                self.local_classes.add(node.name)
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef | ast.Lambda):
                continue
            narrowed = self._narrowed(node)
            if narrowed is not None and scope.get(narrowed[0]) is None:
                scope[narrowed[0]] = narrowed[1]
            if isinstance(node, ast.Assign):
                value = node.value
                new = (
                    isinstance(value, ast.Call)
                    and isinstance(value.func, ast.Attribute)
                    and value.func.attr == "__new__"
                )
                source = _copied(value)
                for t in node.targets:
                    if isinstance(t, ast.Name) and source is not None:
                        if source != t.id:  # `s = s._replace(...)` keeps what s is
                            copies.append((t.id, source))
                    elif isinstance(t, ast.Name):
                        self._bind(scope, t.id, self.value_type(value))
                        if new:
                            self.new_objects.add(t.id)
                    elif isinstance(t, ast.Tuple | ast.List):
                        for e in t.elts:
                            if isinstance(e, ast.Name):
                                self._bind(scope, e.id, None)
            elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
                self.declare(scope, node.target.id, self._annotation_type(node.annotation))
            elif (
                isinstance(node, ast.For | ast.AsyncFor | ast.comprehension)
                and isinstance(node.target, ast.Name)
                and self._foreign_call(node.iter)
            ):
                self._bind(
                    scope, node.target.id, OTHER
                )  # `for event in pygame.event.get()`: another library's objects
            elif (
                isinstance(node, ast.For | ast.AsyncFor | ast.comprehension)
                and isinstance(node.target, ast.Name)
                and self._items_excluded(node.iter)
            ):
                # `for r in ranges` with `ranges: List[Union[int, Tuple[int, int]]]`: each
                # item is of a type the annotation names, none a class of the run.
                self._bind(scope, node.target.id, OTHER)
            elif isinstance(
                node,
                ast.For
                | ast.AsyncFor
                | ast.With
                | ast.NamedExpr
                | ast.AugAssign
                | ast.comprehension,
            ):
                for n in ast.walk(
                    node.target
                    if isinstance(
                        node,
                        ast.For | ast.AsyncFor | ast.NamedExpr | ast.AugAssign | ast.comprehension,
                    )
                    else node
                ):
                    if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store):
                        self._bind(scope, n.id, None)
            todo.extend(ast.iter_child_nodes(node))
        # Once every other binding is known: a copy takes its source's type, until none
        # changes (a type only goes from unset to a class to unknown, so this ends).
        changed = bool(copies)
        while changed:
            before = [(t in scope, scope.get(t)) for t, _ in copies]
            for target, source in copies:
                self._bind(scope, target, self.receiver(ast.Name(source, ast.Load())))
            changed = before != [(t in scope, scope.get(t)) for t, _ in copies]


# The methods through which `a <op> b` may give an instance of a class of the run.
_OPERATOR_METHODS: dict[type[ast.operator], str] = {
    ast.Add: "add",
    ast.Sub: "sub",
    ast.Mult: "mul",
    ast.MatMult: "matmul",
    ast.Div: "truediv",
    ast.FloorDiv: "floordiv",
    ast.Mod: "mod",
    ast.Pow: "pow",
    ast.LShift: "lshift",
    ast.RShift: "rshift",
    ast.BitOr: "or",
    ast.BitXor: "xor",
    ast.BitAnd: "and",
}
_DEFINED_METHOD = re.compile(r"\bdef\s+(__\w+__)\s*\(")


def operator_methods(source: str) -> frozenset[str]:
    """The dunder methods a module defines (`__add__`, `__rmul__`), read from its text: a
    `def` in a string or a comment counts too, which only keeps `a + b` unknown."""
    return frozenset(_DEFINED_METHOD.findall(source))


def _results(
    fn: ast.FunctionDef | ast.AsyncFunctionDef,
) -> list[ast.Return | ast.Yield | ast.YieldFrom | ast.Await]:
    """The `return`s (and `yield`s, `await`s) of `fn` itself, not of the functions,
    lambdas and classes inside it."""
    out: list[ast.Return | ast.Yield | ast.YieldFrom | ast.Await] = []
    todo: list[ast.AST] = list(fn.body)
    while todo:
        node = todo.pop()
        if isinstance(node, ast.Return | ast.Yield | ast.YieldFrom | ast.Await):
            out.append(node)
        if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef | ast.Lambda):
            todo.extend(ast.iter_child_nodes(node))
    return out


def _copied(value: ast.expr) -> str | None:
    """The name whose value `value` is, or a copy of (same type): `b`, `b._replace(...)`,
    `b.replace(...)`; None for anything else."""
    if (
        isinstance(value, ast.Call)
        and isinstance(value.func, ast.Attribute)
        and value.func.attr in ("_replace", "replace")
    ):
        value = value.func.value
    return value.id if isinstance(value, ast.Name) else None


def names_none_of(annotation: ast.expr, classes: frozenset[str] | set[str]) -> bool:
    """An annotation that names none of `classes` (nor `Any` or `object`), at any depth:
    a type checker refuses an instance of one of them there, and in a container so
    annotated (`Union[int, tuple[int, list[int]]]`, `List[Union[int, Tuple[int, int]]]`)."""
    if isinstance(annotation, ast.Constant) and isinstance(annotation.value, str):
        text = annotation.value
    else:
        text = ast.unparse(annotation)
    words = set(text.replace("[", " ").replace("]", " ").replace("|", " ").split())
    words |= {w.split(".")[-1] for w in list(words)}
    words = {w.strip(",") for w in words}
    return not (words & {"Any", "object", "typing.Any", *classes})


def annotation_name(node: ast.expr | None, names: dict[str, str]) -> str | None:
    """The last name of the class an annotation names (`Optional[X]`, `X | None` and
    string annotations read), or None."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        try:
            node = ast.parse(node.value, mode="eval").body
        except SyntaxError:
            return None
    if (
        isinstance(node, ast.Subscript)
        and (_names.dotted(node.value, names) or "").split(".")[-1] == "Optional"
    ):
        return annotation_name(node.slice, names)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr):
        sides = [
            s
            for s in (node.left, node.right)
            if not (isinstance(s, ast.Constant) and s.value is None)
        ]
        return annotation_name(sides[0], names) if len(sides) == 1 else None
    qualified = _names.dotted(node, names) if isinstance(node, ast.Name | ast.Attribute) else None
    return None if qualified is None else qualified.split(".")[-1]


def attribute_types(
    node: ast.ClassDef, names: dict[str, str], classes: frozenset[str], returns: dict[str, str]
) -> dict[tuple[str, str], str]:
    """(class, attribute) -> the class its instances hold there: declared in the class
    body (`geom: Geometry`), or the one class every `self.x = ...` of its methods stores
    (`self.state = State(...)`, `self.state = self.state._replace(...)`, `self.state =
    new` where every binding of the local `new` is one: `new = step(...)` with `def
    step(...) -> State` in the module, `returns`)."""
    out: dict[tuple[str, str], str] = {}
    stored: dict[str, set[str | None]] = {}
    for stmt in node.body:
        if isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name):
            declared = annotation_name(stmt.annotation, names)
            if declared is not None:
                out[(node.name, stmt.target.id)] = declared
        if not isinstance(stmt, ast.FunctionDef | ast.AsyncFunctionDef) or not (
            stmt.args.posonlyargs + stmt.args.args
        ):
            continue
        returned = annotation_name(stmt.returns, names) if stmt.returns is not None else None
        if returned in classes and all(
            _keeps_type(d, names) or _names.dotted(d, names) in _METHOD_KINDS
            for d in stmt.decorator_list
        ):
            out[(node.name, f"{stmt.name}()")] = (
                returned  # `def as_rpy(self) -> RollPitchYaw`: what a call returns
            )
        me = (stmt.args.posonlyargs + stmt.args.args)[0].arg
        module_returns = returns
        if returns:  # not shadowed in the method
            a = stmt.args
            bound = {
                x
                for n in ast.walk(stmt)
                for x in (
                    [n.id]
                    if isinstance(n, ast.Name) and not isinstance(n.ctx, ast.Load)
                    else _bound_otherwise(n)
                )
            }
            bound |= {
                p.arg
                for p in [
                    *a.posonlyargs,
                    *a.args,
                    *a.kwonlyargs,
                    *filter(None, [a.vararg, a.kwarg]),
                ]
            }
            module_returns = {k: v for k, v in returns.items() if k not in bound}
        local: dict[str, str] | None = None  # its typed locals, read at the first `self.x = name`
        for n in ast.walk(stmt):
            targets: list[ast.expr]
            value: ast.expr | None  # None: `self.x: int` declares only
            if isinstance(n, ast.Assign):
                targets, value = n.targets, n.value
            elif isinstance(n, ast.AugAssign | ast.AnnAssign):
                targets, value = [n.target], n.value
            else:
                continue
            for t in targets:
                if (
                    isinstance(t, ast.Attribute)
                    and isinstance(t.value, ast.Name)
                    and t.value.id == me
                ):
                    if local is None and isinstance(value, ast.Name):
                        local = _locals(stmt, names, classes, module_returns)
                    stored.setdefault(t.attr, set()).add(
                        _stored(value, local or {}, me, t.attr, names, classes, module_returns)
                    )
    for attr, kinds in stored.items():
        kinds.discard("")  # `self.x = self.x._replace(...)`: the same type
        if len(kinds) == 1 and (node.name, attr) not in out:
            kind = kinds.pop()
            if kind is not None:
                out[(node.name, attr)] = kind
    return out


def _stored(
    value: ast.expr | None,
    local: dict[str, str],
    me: str,
    attr: str,
    names: dict[str, str],
    classes: frozenset[str],
    returns: dict[str, str],
) -> str | None:
    """The class of what `self.<attr> = value` stores in a method whose typed locals are
    `local` ("": the attribute's own class, `self.x._replace(...)`; None: unknown)."""
    if isinstance(value, ast.Name) and value.id != me:
        return local.get(value.id)
    if isinstance(value, ast.Call):
        func = value.func
        if isinstance(func, ast.Attribute) and func.attr in ("_replace", "replace"):
            inner = func.value
            if (
                isinstance(inner, ast.Attribute)
                and inner.attr == attr
                and isinstance(inner.value, ast.Name)
                and inner.value.id == me
            ):
                return ""
        return _made(value, names, classes, returns)
    return None


def _made(
    value: ast.Call, names: dict[str, str], classes: frozenset[str], returns: dict[str, str]
) -> str | None:
    """The class a call builds: `State(...)`, `mod.State(...)`, `step(...)` with `def
    step(...) -> State` in the module; None: unknown."""
    func = value.func
    if isinstance(func, ast.Name) and func.id in returns and func.id not in names:
        return returns[func.id]
    qualified = _names.dotted(func, names) if isinstance(func, ast.Name | ast.Attribute) else None
    if qualified is not None and qualified.split(".")[-1] in classes:
        return qualified.split(".")[-1]
    return None


def _locals(
    fn: ast.FunctionDef | ast.AsyncFunctionDef,
    names: dict[str, str],
    classes: frozenset[str],
    returns: dict[str, str],
) -> dict[str, str]:
    """The locals of `fn` to which every binding gives one class: each an assignment of
    a call that builds it, or `x = x._replace(...)`; a local bound any other way too (a
    parameter, a loop, an unpacking, `global`, `import ... as`) is left out."""
    a = fn.args
    other = {
        p.arg for p in [*a.posonlyargs, *a.args, *a.kwonlyargs, *filter(None, [a.vararg, a.kwarg])]
    }
    stores: dict[str, int] = {}
    kinds: dict[str, list[str | None]] = {}
    for n in ast.walk(fn):
        other.update(_bound_otherwise(n) if n is not fn else [])
        if isinstance(n, ast.Name) and not isinstance(n.ctx, ast.Load):
            stores[n.id] = stores.get(n.id, 0) + 1
        if isinstance(n, ast.Assign | ast.AnnAssign) and n.value is not None:
            value = n.value
            for t in n.targets if isinstance(n, ast.Assign) else [n.target]:
                if isinstance(t, ast.Name) and isinstance(value, ast.Call):
                    func = value.func
                    same = (
                        isinstance(func, ast.Attribute)
                        and func.attr in ("_replace", "replace")
                        and isinstance(func.value, ast.Name)
                        and func.value.id == t.id
                    )
                    kinds.setdefault(t.id, []).append(
                        "" if same else _made(value, names, classes, returns)
                    )
                elif isinstance(t, ast.Name):
                    kinds.setdefault(t.id, []).append(None)
    out: dict[str, str] = {}
    for name, found in kinds.items():
        distinct = set(found) - {""}
        kind = distinct.pop() if len(distinct) == 1 else None
        if kind is not None and name not in other and stores.get(name) == len(found):
            out[name] = kind
    return out


_BINDERS = (
    ast.Global,
    ast.Nonlocal,
    ast.alias,
    ast.ExceptHandler,
    ast.FunctionDef,
    ast.AsyncFunctionDef,
    ast.ClassDef,
    ast.MatchAs,
    ast.MatchStar,
    ast.MatchMapping,
)


def _bound_otherwise(node: ast.AST) -> list[str]:
    """The names `node` binds other than as an `ast.Name`: `global x`, `except E as x`,
    `import m as x`, `def x`, `class x`, `case x`."""
    if not isinstance(node, _BINDERS):
        return []
    if isinstance(node, ast.Global | ast.Nonlocal):
        return node.names
    if isinstance(node, ast.alias):
        return [(node.asname or node.name).split(".")[0]]
    name = (
        getattr(node, "name", None)
        if isinstance(
            node,
            ast.ExceptHandler
            | ast.FunctionDef
            | ast.AsyncFunctionDef
            | ast.ClassDef
            | ast.MatchAs
            | ast.MatchStar,
        )
        else None
    )
    rest = node.rest if isinstance(node, ast.MatchMapping) else None
    return [x for x in (name, rest) if x is not None]


def returns(tree: ast.Module, names: dict[str, str], classes: frozenset[str]) -> dict[str, str]:
    """The module's top-level functions annotated to return a class of the run (`def
    step(...) -> State`), undecorated or under a decorator that keeps the result's type
    (`jax.jit`, `partial(jax.jit, ...)`); a name defined twice differently is left out."""
    out: dict[str, str | None] = {}
    for stmt in tree.body:
        if (
            isinstance(stmt, ast.FunctionDef)
            and stmt.returns is not None
            and annotation_name(stmt.returns, names) in classes
        ):
            kind = (
                annotation_name(stmt.returns, names)
                if all(_keeps_type(d, names) for d in stmt.decorator_list)
                else None
            )
            out[stmt.name] = kind if out.get(stmt.name, kind) == kind else None
    if not out:
        return {}
    todo: list[ast.AST] = [
        s for s in tree.body if not (isinstance(s, ast.FunctionDef) and out.get(s.name))
    ]
    while (
        todo
    ):  # any other binding of the name: `step = jax.jit(step)`, `import step`, a def under `if`
        n = todo.pop()
        for name in (
            [n.id]
            if isinstance(n, ast.Name) and not isinstance(n.ctx, ast.Load)
            else _bound_otherwise(n)
        ):
            out[name] = None
        if not isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef | ast.Lambda):
            todo.extend(ast.iter_child_nodes(n))
    return {k: v for k, v in out.items() if v is not None}


_METHOD_KINDS = frozenset(
    {
        "property",
        "staticmethod",
        "classmethod",
        "functools.cached_property",
        "abc.abstractmethod",
        "typing.override",
    }
)
_KEEPS_TYPE = frozenset(
    {
        "jax.jit",
        "jax.named_call",
        "jax.checkpoint",
        "jax.remat",
        "functools.cache",
        "functools.lru_cache",
    }
)


def _keeps_type(decorator: ast.expr, names: dict[str, str]) -> bool:
    """`@jax.jit`, `@partial(jax.jit, static_argnums=0)`, `@functools.lru_cache(maxsize=None)`."""
    qualified = _names.dotted(decorator, names)
    if qualified == "functools.partial" and isinstance(decorator, ast.Call) and decorator.args:
        qualified = _names.dotted(decorator.args[0], names)
    return qualified in _KEEPS_TYPE
