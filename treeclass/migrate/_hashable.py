"""Whether a static field's annotation proves its values hashable.

A treeclass hashes its statics at construction; the old class never did. An annotation
naming a class of the run is believed only when that class (and each subclass in the
run: the annotation admits them) is provably hashable: a plain class keeping identity
hashing, an enum, or a frozen dataclass / NamedTuple whose fields are provably hashable
(`int`, `float`, `str`, `bool`, `None`, `bytes`, tuples and frozensets of those, enums,
such classes of the run). A field annotated `Sequence[...]`, `list`, `Any`, or not at
all proves nothing; an `__init__` of its own must build every field hashable
(`tuple(float(x) for x in xs)`, not `tuple(xs)`, whose items stay as given).
"""

from __future__ import annotations

import ast
from typing import Final

from treeclass.migrate import _names
from treeclass.migrate._find import Found
from treeclass.migrate._resolve import Program, _File

__all__ = ["why_not"]

_SCALARS: Final = {
    "int",
    "float",
    "str",
    "bool",
    "bytes",
    "complex",
    "None",
    "NoneType",
    "type",
    "Ellipsis",
}
_TUPLES: Final = {
    "tuple",
    "Tuple",
    "typing.Tuple",
    "frozenset",
    "FrozenSet",
    "typing.FrozenSet",
    "AbstractSet",
}
_UNIONS: Final = {
    "Optional",
    "typing.Optional",
    "Union",
    "typing.Union",
    "Final",
    "typing.Final",
    "Literal",
    "typing.Literal",
}
_CONVERTERS: Final = {
    "int",
    "float",
    "str",
    "bool",
    "complex",
    "operator.index",
    "len",
    "round",
    "abs",
    "hash",
}
_HASH_BASES: Final = {
    "object",
    "enum.Enum",
    "enum.IntEnum",
    "enum.StrEnum",
    "enum.Flag",
    "enum.IntFlag",
    "abc.ABC",
}
_Type = tuple[_File, Found]


def why_not(program: Program, file: _File, annotation: ast.expr) -> str | None:
    """Why a value annotated `annotation` may be unhashable, where the annotation names
    a class of the run that is not provably hashable; None otherwise (other annotations
    are judged elsewhere)."""
    for node in _instances(_parse(annotation), file.names):
        if isinstance(node, ast.Name | ast.Attribute):
            resolved = program.resolve(file, _names.dotted(node, file.names))
            if resolved is not None:
                why = _Judge(program).cls(resolved)
                if why is not None:
                    return why
    return None


def _instances(node: ast.expr, names: dict[str, str]) -> list[ast.expr]:
    """The names in an annotation whose instances are values: not inside `type[...]`
    (a class is hashable) or `Callable[...]` (a function is)."""
    if isinstance(node, ast.Subscript):
        outer = (_names.dotted(node.value, names) or "").split(".")[-1]
        if outer in ("type", "Type", "Callable"):
            return []
        return [*_instances(node.value, names), *_instances(node.slice, names)]
    if isinstance(node, ast.Name | ast.Attribute):
        return [node]
    return [
        n
        for child in ast.iter_child_nodes(node)
        if isinstance(child, ast.expr)
        for n in _instances(child, names)
    ]


def _parse(node: ast.expr) -> ast.expr:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        try:
            return ast.parse(node.value, mode="eval").body
        except SyntaxError:
            return node
    return node


class _Judge:
    def __init__(self, program: Program) -> None:
        self.program = program
        self.seen: dict[int, str | None] = {}

    def cls(self, resolved: _Type) -> str | None:
        file, found = resolved
        if id(found.node) in self.seen:
            return self.seen[id(found.node)]
        self.seen[id(found.node)] = None  # a recursive reference: judged by its other fields
        why = self._own(file, found) or next(
            (w for sub in self._subclasses(found) if (w := self.cls(sub))), None
        )
        self.seen[id(found.node)] = why
        return why

    def _subclasses(self, found: Found) -> list[_Type]:
        """The classes of the run that may extend `found`: a base resolved to it, or named
        like it (a module-level alias such as `BC = grids.BC` is not followed)."""
        out = []
        for file in self.program.modules.values():
            for other in file.found:
                bases = [self.program.base(file, other, i) for i in range(len(other.bases))]
                named = any((q or "").split(".")[-1] == found.name for q in other.bases)
                if other is not found and (
                    named or any(b is not None and b[1] is found for b in bases)
                ):
                    out.append((file, other))
        return out

    def _own(self, file: _File, found: Found) -> str | None:
        name = found.name
        decorators = [d.func if isinstance(d, ast.Call) else d for d in found.node.decorator_list]
        dataclass = [
            d
            for d in decorators
            if _names.dotted(d, file.names) in ("dataclasses.dataclass", *_names.FLAX_DATACLASS)
        ]
        qualified = [b or "" for b in found.bases]
        named_tuple = any(q in _names.NAMEDTUPLE for q in qualified)
        methods = {s.name: s for s in found.node.body if isinstance(s, ast.FunctionDef)}
        run_bases = [self.program.base(file, found, i) for i in range(len(found.bases))]
        if any(q.startswith("enum.") for q in qualified) or "__hash__" in methods:
            return None  # an enum, or a class that says how it hashes (flax's GraphDef)
        why = self._body(file, found, methods, dataclass, decorators, named_tuple)
        for b, q in zip(run_bases, qualified, strict=True):
            if why is not None:
                return why
            if b is not None:
                why = self.cls(b)
            elif q not in _HASH_BASES and q not in _names.NAMEDTUPLE:
                why = f"`{name}` has the base `{q or '?'}`, which may be unhashable"
        return why

    def _body(
        self,
        file: _File,
        found: Found,
        methods: dict[str, ast.FunctionDef],
        dataclass: list[ast.expr],
        decorators: list[ast.expr],
        named_tuple: bool,
    ) -> str | None:
        name = found.name
        if any(
            isinstance(s, ast.Assign) and "__hash__" in map(ast.unparse, s.targets)
            for s in found.node.body
        ):
            return f"`{name}` sets __hash__ in its body"
        if "__eq__" in methods and "__hash__" not in methods:
            return f"`{name}` defines __eq__ without __hash__, so its instances are unhashable"
        if not dataclass and not named_tuple:
            return None  # identity hashing
        if dataclass:
            raw = found.node.decorator_list[decorators.index(dataclass[0])]
            keywords = (
                {kw.arg: kw.value for kw in raw.keywords} if isinstance(raw, ast.Call) else {}
            )
            flax = _names.dotted(dataclass[0], file.names) in _names.FLAX_DATACLASS
            frozen = flax or any(_true(keywords.get(k)) for k in ("frozen", "unsafe_hash"))
            if not frozen:
                return (
                    f"`{name}` is a dataclass without frozen=True, so its instances are unhashable"
                )
        fields = {
            s.target.id: s.annotation
            for s in found.node.body
            if isinstance(s, ast.AnnAssign)
            and isinstance(s.target, ast.Name)
            and "ClassVar" not in ast.dump(s.annotation)
        }
        for field, annotation in fields.items():
            if not self.annotation(file, annotation):
                return (
                    f"`{name}.{field}` is annotated `{ast.unparse(annotation)}`, "
                    "which does not prove it hashable"
                )
        for method in ("__init__", "__post_init__"):
            if method in methods:
                why = _Init(self, file, methods[method], name).check()
                if why is not None:
                    return why
        return None

    def annotation(self, file: _File, node: ast.expr) -> bool:
        """Whether every value the annotation admits is hashable."""
        node = _parse(node)
        if isinstance(node, ast.Constant):
            return node.value is None or node.value is Ellipsis
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr):
            return self.annotation(file, node.left) and self.annotation(file, node.right)
        if isinstance(node, ast.Subscript):
            outer = _names.dotted(node.value, file.names) or ""
            inner = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
            if outer in _TUPLES or outer.split(".")[-1] in (
                "tuple",
                "Tuple",
                "frozenset",
                "FrozenSet",
            ):
                return all(self.annotation(file, e) for e in inner)
            if outer in _UNIONS:
                return outer.endswith("Literal") or all(self.annotation(file, e) for e in inner)
            return False
        if isinstance(node, ast.Name | ast.Attribute):
            qualified = _names.dotted(node, file.names) or ""
            if qualified in _SCALARS or qualified in ("tuple", "frozenset"):
                return qualified not in ("tuple", "frozenset")  # bare tuple: items unknown
            resolved = self.program.resolve(file, qualified)
            return resolved is not None and self.cls(resolved) is None
        return False


class _Init:
    """Reads an `__init__` that stores fields (`self.x = ...`, `object.__setattr__(self,
    "x", ...)`): each stored value must be built hashable on every path."""

    def __init__(self, judge: _Judge, file: _File, fn: ast.FunctionDef, name: str) -> None:
        self.judge, self.file, self.fn, self.name = judge, file, fn, name
        params = [*fn.args.posonlyargs, *fn.args.args, *fn.args.kwonlyargs]
        self.params = {a.arg: a.annotation for a in params[1:]}

    def check(self) -> str | None:
        for node in ast.walk(self.fn):
            if isinstance(node, ast.Call) and _hidden_store(node):
                return (
                    f"`{self.name}.{self.fn.name}` stores through `{ast.unparse(node.func)}`, "
                    "which the tool cannot follow"
                )
        env: dict[str, list[ast.expr]] = {}
        for p, annotation in self.params.items():
            ok = annotation is not None and self.judge.annotation(self.file, annotation)
            env[p] = [ast.Constant(0)] if ok else [ast.Name(p)]
        return self._block(self.fn.body, env)

    def _block(self, body: list[ast.stmt], env: dict[str, list[ast.expr]]) -> str | None:
        for stmt in body:
            why = self._stmt(stmt, env)
            if why is not None:
                return why
        return None

    def _stmt(self, stmt: ast.stmt, env: dict[str, list[ast.expr]]) -> str | None:
        stored = _stored(stmt)
        if stored is not None:
            attr, value = stored
            if not self.value(value, env, {}):
                built = env.get(value.id, [value]) if isinstance(value, ast.Name) else [value]
                code = " or ".join(f"`{ast.unparse(v)}`" for v in built)
                return (
                    f"`{self.name}.__init__` stores `{attr}` as {code}, which may hold an "
                    "unhashable value (a list given by a caller)"
                )
            return None
        if (
            isinstance(stmt, ast.Assign)
            and len(stmt.targets) == 1
            and isinstance(stmt.targets[0], ast.Name)
        ):
            env[stmt.targets[0].id] = [stmt.value]
        elif isinstance(stmt, ast.If):
            branches = []
            for body in (stmt.body, stmt.orelse):
                inner = {k: list(v) for k, v in env.items()}
                why = self._block(body, inner)
                if why is not None:
                    return why
                if not (body and isinstance(body[-1], ast.Raise | ast.Return)):
                    branches.append(inner)
            env.clear()
            for inner in branches:
                for k, v in inner.items():
                    env.setdefault(k, []).extend(e for e in v if e not in env.get(k, []))
        elif isinstance(stmt, ast.For | ast.While | ast.With | ast.Try):
            if any(_stored(s) is not None for s in ast.walk(stmt) if isinstance(s, ast.stmt)):
                return f"`{self.name}.__init__` stores a field inside a loop or block"
            for node in ast.walk(stmt):
                if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                    env[node.id] = [ast.Name(node.id)]  # rebound there: unknown
        else:
            for node in ast.walk(stmt):
                if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                    env[node.id] = [ast.Name(node.id)]
        return None

    def value(self, node: ast.expr, env: dict[str, list[ast.expr]], loop: dict[str, bool]) -> bool:
        """Whether `node` is hashable on every path (`loop`: comprehension targets)."""
        if isinstance(node, ast.Constant):
            return True
        if isinstance(node, ast.Tuple):
            return all(self.value(e, env, loop) for e in node.elts)
        if isinstance(node, ast.Name):
            if node.id in loop:
                return loop[node.id]
            values = env.get(node.id)
            if values is None or any(isinstance(v, ast.Name) and v.id == node.id for v in values):
                return False
            return all(self.value(v, {**env, node.id: [ast.Name(node.id)]}, loop) for v in values)
        if isinstance(node, ast.BinOp):
            if isinstance(node.op, ast.Mult) and isinstance(node.left, ast.Tuple):
                return self.value(node.left, env, loop)
            return self.value(node.left, env, loop) and self.value(node.right, env, loop)
        if isinstance(node, ast.UnaryOp):
            return self.value(node.operand, env, loop)
        if isinstance(node, ast.Call):
            func = _names.dotted(node.func, self.file.names)
            if func in _CONVERTERS:
                return True
            if (
                func in ("tuple", "frozenset")
                and len(node.args) == 1
                and isinstance(node.args[0], ast.GeneratorExp | ast.ListComp)
            ):
                comp = node.args[0]
                inner = dict(loop)
                for gen in comp.generators:
                    ok = self._iterable(gen.iter, env, inner)
                    for target in ast.walk(gen.target):
                        if isinstance(target, ast.Name):
                            inner[target.id] = ok
                return self.value(comp.elt, env, inner)
        return False

    def _iterable(
        self, node: ast.expr, env: dict[str, list[ast.expr]], loop: dict[str, bool]
    ) -> bool:
        """Whether every item of `node`, to any depth, is hashable."""
        if isinstance(node, ast.Call) and _names.dotted(node.func, self.file.names) in (
            "zip",
            "enumerate",
            "reversed",
        ):
            return all(self._iterable(a, env, loop) for a in node.args)
        return self.value(node, env, loop)


def _stored(stmt: ast.stmt) -> tuple[str, ast.expr] | None:
    """`self.x = v` or `object.__setattr__(self, "x", v)`: ("x", v)."""
    if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1:
        target = stmt.targets[0]
        if (
            isinstance(target, ast.Attribute)
            and isinstance(target.value, ast.Name)
            and target.value.id == "self"
        ):
            return target.attr, stmt.value
    if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call):
        call = stmt.value
        if (
            ast.unparse(call.func) == "object.__setattr__"
            and len(call.args) == 3
            and isinstance(call.args[1], ast.Constant)
        ):
            return str(call.args[1].value), call.args[2]
    return None


def _true(node: ast.expr | None) -> bool:
    return isinstance(node, ast.Constant) and node.value is True


def _hidden_store(call: ast.Call) -> bool:
    """A call that may store a field unseen: `setattr(self, ...)`, `super().__init__(...)`,
    `Base.__init__(self, ...)`, `self.method(...)`, `object.__setattr__` with a computed name."""
    func = ast.unparse(call.func)
    if func == "object.__setattr__":
        return not (len(call.args) == 3 and isinstance(call.args[1], ast.Constant))
    if func in ("setattr", "vars") or func.endswith(("__init__", "__setattr__", "__dict__.update")):
        return True
    return func.startswith("self.")
