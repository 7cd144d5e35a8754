"""The files of one run as one program: each file's module name (from its package's
`__init__.py` files), and which class of the run a name in a module means, through
absolute and relative imports, `as` aliases and re-exports (`from .types import State`
in a package's `__init__.py`).

Also which bases hold no state (`stateless`): a mixin of methods only (numpy's
`NDArrayOperatorsMixin`, a package's own operator mixin, an abstract base with no
`__init__` and no fields, annotations without values included: a plain class's
annotations are no dataclass fields) stays a plain base of the converted class.
"""

from __future__ import annotations

import ast
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Protocol, TypeVar

from treeclass.migrate import _messages, _names
from treeclass.migrate._families import flax_struct, register_dataclass
from treeclass.migrate._find import FLAX_COPY, Found, decorator_family, wrapper

__all__ = [
    "Program",
    "harmless_decorator",
    "mark_wrapped",
    "module_name",
    "stateless",
]

_T = TypeVar("_T")

# Bases outside the run that hold no state: kept as plain bases.
# What a stateless base must not define: each stores or shapes instance state.
_STATEFUL = frozenset(
    {
        "__init__",
        "__new__",
        "__slots__",
        "__setattr__",
        "__delattr__",
        "__post_init__",
        "__init_subclass__",
        "__getstate__",
        "__setstate__",
        "__dict__",
    }
)


class _File(Protocol):
    path: str
    module: str
    names: dict[str, str]
    found: list[Found]
    tree: ast.Module


def module_name(path: Path) -> str:
    """`pkg.sub.mod` for `.../pkg/sub/mod.py` (the folders up to the last one without an
    `__init__.py` are the package), `pkg.sub` for `pkg/sub/__init__.py`."""
    path = path.resolve()
    parts = [] if path.stem == "__init__" else [path.stem]
    folder = path.parent
    while (folder / "__init__.py").is_file() and folder.parent != folder:
        parts.insert(0, folder.name)
        folder = folder.parent
    return ".".join(parts)


def package_aliases(files: Sequence[_File]) -> dict[str, _File]:
    """The names a module has below the folders above it that also hold an
    `__init__.py` (jax-md checked out in a folder with one: `outer.jax_md.dataclasses` is
    imported as `jax_md.dataclasses`): every tail of its dotted name that starts at a
    package of the run (a folder with `__init__.py`), never at a plain module (a
    `dataclasses.py` of the run is not the standard library's `dataclasses`)."""
    packages = {file.module for file in files if Path(file.path).stem == "__init__" and file.module}
    aliases: dict[str, _File] = {}
    for file in files:
        parts = file.module.split(".")
        for i in range(1, len(parts)):
            if ".".join(parts[: i + 1]) in packages:
                aliases.setdefault(".".join(parts[i:]), file)
    return aliases


class Program:
    """The modules of a run, and what their names mean."""

    def __init__(self, files: list[_File]) -> None:
        self.modules: dict[str, _File] = {}
        self.suffixes: dict[str, list[tuple[_File, Found]]] = {}
        for file in files:
            self.modules.setdefault(file.module, file)
        for name, file in package_aliases(files).items():
            self.modules.setdefault(name, file)
        for file in files:
            parts = Path(file.path).with_suffix("").parts
            for i in range(len(parts)):  # files given without their package: by path suffix
                for found in file.found:
                    self.suffixes.setdefault(".".join([*parts[i:], found.name]), []).append(
                        (file, found)
                    )

    def absolute(self, file: _File, qualified: str) -> str:
        """`qualified` with a leading `.`/`..` (a relative import) made absolute."""
        level = len(qualified) - len(qualified.lstrip("."))
        if not level:
            return qualified
        package = (
            file.module.split(".")
            if Path(file.path).stem == "__init__"
            else file.module.split(".")[:-1]
        )
        package = package[: len(package) - (level - 1)] if level > 1 else package
        return ".".join([*package, qualified[level:]])

    def resolve(
        self, file: _File, qualified: str | None, depth: int = 0
    ) -> tuple[_File, Found] | None:
        """The class of the run that `qualified` (a name as `file`'s imports spell it) is."""
        if qualified is None or depth > 20:
            return None
        local = [f for f in file.found if f.name == qualified]
        if local:
            return file, local[-1]
        assigned = _assigned_aliases(file).get(qualified)
        if assigned is not None:  # `Ref = m0.Base` in this module, then `class C(Ref)`
            return self.resolve(file, assigned, depth + 1)
        name = self.absolute(file, qualified)
        parts = name.split(".")
        for k in range(len(parts) - 1, 0, -1):
            module = self.modules.get(".".join(parts[:k]))
            if module is None:
                continue
            rest = parts[k:]
            if len(rest) == 1:
                classes = [f for f in module.found if f.name == rest[0]]
                if classes:
                    return module, classes[-1]
            if rest[0] in module.names:  # re-exported, or a submodule imported there
                return self.resolve(module, ".".join([module.names[rest[0]], *rest[1:]]), depth + 1)
            assigned = _assigned_aliases(module).get(rest[0])
            if assigned is not None:  # `Base = model_base.Base`: a re-export by assignment
                return self.resolve(module, ".".join([assigned, *rest[1:]]), depth + 1)
            if ".".join([module.module, rest[0]]) in self.modules:
                continue  # a submodule: the longer prefix was tried first
            break  # a folder without __init__.py between (a namespace package): by path suffix
        for key in dict.fromkeys([name, qualified.lstrip(".")]):
            matches = self.suffixes.get(key, [])
            if matches:
                return matches[0] if len(matches) == 1 else None
        return None

    def function(
        self, file: _File, qualified: str | None, functions: Mapping[str, _T], depth: int = 0
    ) -> _T | None:
        """The entry of `functions` (by `module.name`) that `qualified` names in `file`."""
        if qualified is None or depth > 20:
            return None
        name = self.absolute(file, qualified if "." in qualified else f"{file.module}.{qualified}")
        if name in functions:
            return functions[name]
        module_name, _, attr = name.rpartition(".")
        module = self.modules.get(module_name)
        if module is not None and f"{module.module}.{attr}" in functions:  # by a package alias
            return functions[f"{module.module}.{attr}"]
        if module is not None and attr in module.names:  # re-exported
            return self.function(module, module.names[attr], functions, depth + 1)
        return None

    def base(self, file: _File, found: Found, i: int) -> tuple[_File, Found] | None:
        """The class of the run that base `i` of `found` is, if any."""
        return self.resolve(file, found.bases[i])

    def methods(self, file: _File, found: Found, *, everything: bool = False) -> set[str]:
        """The methods `found` and its bases in the run define (`everything`: every name
        their bodies bind, class attributes included)."""
        out: set[str] = set()
        todo, seen = [(file, found)], set()
        while todo:
            f, c = todo.pop()
            if id(c) in seen:
                continue
            seen.add(id(c))
            out |= {
                s.name
                for s in c.node.body
                if isinstance(s, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef)
            }
            if everything:
                out |= {
                    t.id
                    for s in c.node.body
                    if isinstance(s, ast.Assign)
                    for t in s.targets
                    if isinstance(t, ast.Name)
                }
                out |= {
                    s.target.id
                    for s in c.node.body
                    if isinstance(s, ast.AnnAssign)
                    and s.value is not None
                    and isinstance(s.target, ast.Name)
                }
            todo += [b for b in (self.base(f, c, i) for i in range(len(c.bases))) if b is not None]
        return out

    def ancestors(self, file: _File, found: Found) -> set[str]:
        """The names of `found`'s bases in the run, transitively."""
        out: set[str] = set()
        todo = [(file, found)]
        while todo:
            f, c = todo.pop()
            for i in range(len(c.bases)):
                base = self.base(f, c, i)
                if base is not None and base[1].name not in out and base[1] is not found:
                    out.add(base[1].name)
                    todo.append(base)
        return out


def _assigned_aliases(file: _File) -> dict[str, str]:
    """The module-level names `file` binds once, to another name (torax's
    `BaseModelFrozen = model_base.BaseModelFrozen`): each with that name as its imports
    spell it. A name bound more than once, or to anything else, is left out."""
    out: dict[str, str] = {}
    bound: dict[str, int] = {}
    for stmt in file.tree.body:
        if not isinstance(stmt, ast.Assign):
            continue
        for target in stmt.targets:
            for n in ast.walk(target):
                if isinstance(n, ast.Name):
                    bound[n.id] = bound.get(n.id, 0) + 1
        (target, *more) = stmt.targets
        if not more and isinstance(target, ast.Name):
            value = stmt.value
            qualified = (
                _names.dotted(value, file.names)
                if isinstance(value, ast.Name | ast.Attribute)
                else None
            )
            if qualified is not None:
                out[target.id] = qualified
    return {k: v for k, v in out.items() if bound.get(k) == 1 and k not in file.names}


def _abstract(stmt: ast.stmt) -> bool:
    """A method whose body is only a docstring, `...`, `pass` or `raise NotImplementedError`."""
    if not isinstance(stmt, ast.FunctionDef):
        return False
    for s in stmt.body:
        if isinstance(s, ast.Pass) or (
            isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant)
        ):
            continue
        if isinstance(s, ast.Raise) and "NotImplementedError" in ast.unparse(s):
            continue
        return False
    return True


def stateless(program: Program, file: _File, found: Found, depth: int = 0) -> bool:
    """Whether `found` holds no state: no fields, no `__init__`, no attribute writes to
    `self`, no registration, no decorators, and only stateless bases."""
    node = found.node
    if found.family is not None or node.decorator_list or depth > 20:
        return False
    if any(
        kw.arg != "metaclass" or _names.dotted(kw.value, file.names) not in ("abc.ABCMeta",)
        for kw in node.keywords
    ):
        return False
    for stmt in node.body:
        if (
            isinstance(stmt, ast.AnnAssign)
            and stmt.value is not None
            and "ClassVar" not in ast.unparse(stmt.annotation)
        ):
            # An annotation alone is no field of a plain class (nor of a dataclass subclass).
            return False
        names = (
            [stmt.name]
            if isinstance(stmt, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef)
            else []
        )
        if isinstance(stmt, ast.Assign):
            names = [t.id for t in stmt.targets if isinstance(t, ast.Name)]
        if any(n in _STATEFUL for n in names) and not (names == ["__init__"] and _abstract(stmt)):
            return False
        if any(n.startswith("tree_") for n in names) and not _abstract(stmt):
            return False
        if isinstance(stmt, ast.FunctionDef | ast.AsyncFunctionDef):
            args = stmt.args.posonlyargs + stmt.args.args
            me = args[0].arg if args else None
            for n in ast.walk(stmt):
                if (
                    isinstance(n, ast.Attribute)
                    and isinstance(n.ctx, ast.Store | ast.Del)
                    and isinstance(n.value, ast.Name)
                    and n.value.id == me
                ):
                    return False
                if isinstance(n, ast.Call) and _names.dotted(n.func, file.names) in (
                    "setattr",
                    "object.__setattr__",
                ):
                    return False
    for i, qualified in enumerate(found.bases):
        if qualified in _names.ALLOWED_MIXINS or qualified in _names.GENERIC:
            continue
        base = program.base(file, found, i)
        if base is None or not stateless(program, base[0], base[1], depth + 1):
            return False
    return True


def harmless_decorator(fn: ast.FunctionDef, *, factory: bool) -> bool:
    """Whether a class decorator of the run only writes dunder attributes (`__doc__`,
    `__name__`, `__qualname__`, its own `__x__` markers) on the class and returns it:
    then it does the same to the converted class. `factory`: `fn` is called with
    arguments and returns the decorator (its one nested function)."""
    if factory:
        inner = [s for s in fn.body if isinstance(s, ast.FunctionDef)]
        returns = [s for s in ast.walk(fn) if isinstance(s, ast.Return) and s in fn.body]
        if (
            len(inner) != 1
            or not returns
            or any(
                not (isinstance(r.value, ast.Name) and r.value.id == inner[0].name) for r in returns
            )
        ):
            return False
        fn = inner[0]
    params = fn.args.posonlyargs + fn.args.args
    if len(params) != 1:
        return False
    me = params[0].arg
    dunder_lists = {
        n.target.id
        for n in ast.walk(fn)
        if isinstance(n, ast.For)
        and isinstance(n.target, ast.Name)
        and isinstance(n.iter, ast.List | ast.Tuple)
        and all(isinstance(e, ast.Constant) and str(e.value).startswith("__") for e in n.iter.elts)
    }
    for n in ast.walk(fn):
        if isinstance(n, ast.FunctionDef | ast.Lambda | ast.ClassDef) and n is not fn:
            return False
        if isinstance(n, ast.Return) and not (isinstance(n.value, ast.Name) and n.value.id == me):
            return False
        dunder_write = (
            isinstance(n.value, ast.Name) and n.value.id == me and n.attr.startswith("__")
            if isinstance(n, ast.Attribute)
            else True
        )
        if (
            isinstance(n, ast.Attribute)
            and isinstance(n.ctx, ast.Store | ast.Del)
            and not dunder_write
        ):
            return False
        if isinstance(n, ast.Call) and _names.dotted(n.func, {}) in (
            "setattr",
            "delattr",
            "object.__setattr__",
        ):
            name = n.args[1] if len(n.args) > 1 else None
            dunder = isinstance(name, ast.Constant) and str(name.value).startswith("__")
            if not (
                isinstance(n.args[0], ast.Name)
                and n.args[0].id == me
                and (dunder or (isinstance(name, ast.Name) and name.id in dunder_lists))
            ):
                return False
        if isinstance(n, ast.Name) and n.id == me and isinstance(n.ctx, ast.Store):
            return False
    return True


def mark_wrapped(files: list[_File]) -> None:
    """Marks the classes that a project's dataclass wrapper in the run registers."""
    wrappers: dict[str, ast.Call | str] = {}
    for file in files:
        for stmt in file.tree.body:
            options = wrapper(stmt, file.names)
            if isinstance(stmt, ast.FunctionDef) and options is not None:  # a wrapper is a function
                wrappers[f"{file.module}.{stmt.name}"] = (
                    options if isinstance(options, ast.Call) else stmt.name
                )
    if not wrappers:
        return
    program = Program(files)
    for file in files:
        for found in (
            f for f in file.found if f.family is None
        ):  # flax's own struct.dataclass is known
            for i, decorator in enumerate(found.node.decorator_list):
                qualified = _names.dotted(decorator, file.names)
                known = decorator_family(program.absolute(file, qualified or ""))
                if known is not None:  # `from . import struct` inside flax itself
                    found.family, found.decorator = known, i
                    break
                wrapped = program.function(file, qualified, wrappers)
                if isinstance(wrapped, str):  # a wrapper the tool cannot read
                    found.family, found.indirect = (
                        register_dataclass.RULE.name,
                        _messages.WRAPPER.format(cls=found.name, name=wrapped),
                    )
                elif wrapped is FLAX_COPY:  # a vendored flax.struct.dataclass
                    found.family, found.decorator = flax_struct.RULE.name, i
                elif wrapped is not None:
                    found.family, found.decorator = register_dataclass.RULE.name, i
                    found.wrapper = wrapped
