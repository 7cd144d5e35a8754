"""The classes of a module, and how each is registered as a pytree.

Every top-level class is listed (a subclass or a base of a pytree class matters even
when it is not registered itself); `family` says how a pytree class is registered, by
the registry of `_families` (a registering decorator, a `register_*(Cls, ...)`
statement, a base such as `flax.struct.PyTreeNode` or `NamedTuple`, the latter only
with --namedtuples). Found here besides: classes registered in a loop or through a
helper, a project's dataclass wrapper (`wrapper`) or copy of `flax.struct.dataclass`,
subclasses registered by a base's `__init_subclass__` (directly or through a function
of its module), a `namedtuple(...)` given to a registration, and the families the tool
reports but does not rewrite (equinox.Module).

Classes defined inside functions, class bodies or under `if` are not found here: the
tool rewrites module-level code only (`_facts`'s scan lists them, and the run reports the
pytree classes among them).
"""

from __future__ import annotations

import ast

from treeclass.migrate import _families, _messages, _names
from treeclass.migrate._found import Found
from treeclass.migrate._plan import Family

__all__ = ["FLAX_COPY", "Found", "decorator_family", "find", "unhandled", "wrapper"]


def decorator_family(qualified: str | None) -> Family | None:
    """The family a class decorated with `qualified` belongs to (the registry's)."""
    rule = _families.by_decorator(qualified)
    return None if rule is None else rule.name


def _set_family(found: Found, family: Family) -> None:
    if found.family is not None:
        found.registered_twice = True
    found.family = family


def _registration_call(
    stmt: ast.stmt, names: dict[str, str]
) -> tuple[str, Family, ast.Call] | None:
    """`register_pytree_node(Cls, f, g)` (or another registration) as a statement."""
    if not (isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call)):
        return None
    call = stmt.value
    if not call.args or not isinstance(call.args[0], ast.Name):
        return None
    rule = _families.by_call(_names.dotted(call.func, names))
    return None if rule is None else (call.args[0].id, rule.name, call)


_REGISTERING = {*_names.REGISTER_CLASS, *_names.REGISTER_FUNCTION, *_names.REGISTER_DATACLASS}


def _registers_parameter(
    fn: ast.FunctionDef, names: dict[str, str], also: frozenset[str] | set[str] = frozenset()
) -> bool:
    """`fn` registers its first parameter, or a value made from it (mujoco-mjx:
    `data_clz = dataclasses.dataclass(frozen=True)(clz)`, then `register_dataclass(data_clz,
    ...)`), with JAX or with one of the functions `also`."""
    params = fn.args.posonlyargs + fn.args.args
    if not params:
        return False
    # One walk: the assignments in order, and the registering calls (most functions
    # have none, and are done).
    assigns: list[ast.Assign] = []
    registering: list[ast.Call] = []
    for node in ast.walk(fn):
        if isinstance(node, ast.Assign):
            assigns.append(node)
        elif (
            isinstance(node, ast.Call)
            and node.args
            and (
                _names.dotted(node.func, names) in _REGISTERING
                or (isinstance(node.func, ast.Name) and node.func.id in also)
            )
        ):
            registering.append(node)
    if not registering:
        return False
    made = {params[0].arg}  # the parameter, and the local names assigned from it
    for node in assigns:
        if _mentions(node.value, made):
            made |= {t.id for t in node.targets if isinstance(t, ast.Name)}
    return any(_mentions(n.args[0], made) for n in registering)


def _mentions(value: ast.expr, made: set[str]) -> bool:
    return any(isinstance(n, ast.Name) and n.id in made for n in ast.walk(value))


def _indirect(stmt: ast.stmt, names: dict[str, str], helpers: set[str]) -> list[tuple[str, str]]:
    """Classes a statement registers other than directly: `for c in (A, B):
    register_pytree_node(c, ...)`, or `helper(A)` with a helper of this module."""
    if (
        isinstance(stmt, ast.For)
        and isinstance(stmt.target, ast.Name)
        and isinstance(stmt.iter, ast.Tuple | ast.List)
    ):
        var = stmt.target.id
        loop = ast.Module(body=stmt.body, type_ignores=[])
        calls = [
            n
            for n in ast.walk(loop)
            if isinstance(n, ast.Call)
            and n.args
            and isinstance(n.args[0], ast.Name)
            and n.args[0].id == var
        ]
        if any(
            _names.dotted(c.func, names) in _REGISTERING
            or (isinstance(c.func, ast.Name) and c.func.id in helpers)
            for c in calls
        ):
            return [
                (e.id, f"in a loop at line {stmt.lineno}")
                for e in stmt.iter.elts
                if isinstance(e, ast.Name)
            ]
    if (
        isinstance(stmt, ast.Expr)
        and isinstance(stmt.value, ast.Call)
        and isinstance(stmt.value.func, ast.Name)
    ):
        call = stmt.value
        if call.func.id in helpers and call.args and isinstance(call.args[0], ast.Name):  # type: ignore[attr-defined]  # pyright: ignore[reportAttributeAccessIssue]
            return [(call.args[0].id, f"through the helper {call.func.id}() at line {stmt.lineno}")]  # type: ignore[attr-defined]  # pyright: ignore[reportAttributeAccessIssue]
    return []


# Bases whose subclasses are pytrees the tool does not rewrite (a frozen dataclass of the
# library's own, with its own field machinery): the reported families, by base.
_UNHANDLED_BASES = {b: r.reported for r in _families.RULES if r.reported for b in r.bases}
_RECIPES = {r.reported: r.recipe for r in _families.RULES if r.reported and r.recipe}


def _registers_subclasses(
    node: ast.ClassDef, names: dict[str, str], helpers: set[str]
) -> str | None:
    """How `node` makes its subclasses pytrees: an `__init_subclass__` (or a `__new__`,
    torax's pydantic base: at the first instance) that registers `cls`
    (`register_pytree_node(cls, cls.tree_flatten, cls.tree_unflatten)`, or a function of
    this module that registers its first parameter, `helpers`, applied to it: a copy of
    flax.struct.dataclass, mujoco-mjx's `_register(cls)`), or an unhandled base; None if
    it does not."""
    for stmt in node.body:
        if (
            isinstance(stmt, ast.FunctionDef)
            and stmt.name in ("__init_subclass__", "__new__")
            and _registers_parameter(stmt, names, helpers)
        ):
            return f"registered by `{node.name}.{stmt.name}` at line {stmt.lineno}"
    kinds = [
        _UNHANDLED_BASES[b]
        for b in map(str, [_names.dotted(b, names) for b in node.bases])
        if b in _UNHANDLED_BASES
    ]
    return kinds[0] if kinds else None


def _helpers(tree: ast.Module, names: dict[str, str]) -> set[str]:
    """The module's functions that register their first parameter, directly or through
    another such function (mujoco-mjx: `__init_subclass__` calls `_register(cls)`, which
    calls `register_dataclass(cls, ...)`), wherever they are defined in the module."""
    functions = [s for s in tree.body if isinstance(s, ast.FunctionDef)]
    helpers: set[str] = set()
    grown = True
    while grown:  # a chain of n helpers takes n passes; a module has few
        before = len(helpers)
        helpers |= {
            f.name
            for f in functions
            if f.name not in helpers and _registers_parameter(f, names, helpers)
        }
        grown = len(helpers) > before
    return helpers


def find(tree: ast.Module, names: dict[str, str], *, namedtuples: bool) -> list[Found]:
    """Every top-level class of `tree`, in order, with its registration."""
    options = frozenset({"namedtuples"} if namedtuples else set())
    classes: dict[str, Found] = {}
    duplicates: set[str] = set()
    helpers = _helpers(tree, names)  # module functions that register their first parameter
    factories: dict[str, ast.Assign] = {}  # `P = namedtuple("P", ...)`: a class, no statement
    for stmt in tree.body:
        made = _namedtuple_factory(stmt, names)
        if made is not None:
            factories[made] = stmt  # type: ignore[assignment]  # pyright: ignore[reportArgumentType]
        if isinstance(stmt, ast.ClassDef):
            if stmt.name in classes:
                duplicates.add(stmt.name)
            bases = [_names.dotted(b, names) for b in stmt.bases]
            found = Found(stmt.name, stmt, None, bases)
            for i, decorator in enumerate(stmt.decorator_list):
                family = decorator_family(_names.dotted(decorator, names))
                if family is not None:
                    _set_family(found, family)
                    found.decorator = i
            for rule in filter(None, (_families.by_base(b, options) for b in bases)):
                # Decorated too (`@struct.dataclass` on a PyTreeNode): one family still.
                if rule.reported is None and found.family != rule.name:
                    _set_family(found, rule.name)
            found.registers_subclasses = _registers_subclasses(stmt, names, helpers)
            if (
                found.registers_subclasses is not None
                and found.family is None
                and any(b in _UNHANDLED_BASES for b in bases)
            ):
                unhandled(found, found.registers_subclasses)
            new = next(
                (s for s in stmt.body if isinstance(s, ast.FunctionDef) and s.name == "__new__"),
                None,
            )
            if found.family is None and new and _registers_parameter(new, names, helpers):
                # torax's pydantic base: its `__new__` registers whatever class it builds,
                # the base itself too (the subclasses are reported through their base).
                unhandled(found, f"registered by its own `__new__` at line {new.lineno}")
            classes[stmt.name] = found
        for name, how in _indirect(stmt, names, helpers):
            if name in classes and classes[name].family is None:
                classes[name].family = "register_pytree_node"
                classes[name].indirect = _messages.INDIRECT.format(cls=name, how=how)
        registered = _registration_call(stmt, names)
        if registered is not None and registered[0] not in classes and registered[0] in factories:
            classes[registered[0]] = _factory_found(registered[0], factories[registered[0]], stmt)
        elif registered is not None and registered[0] in classes:
            name, family, call = registered
            _set_family(classes[name], family)
            classes[name].registration = call
    for name in duplicates:
        classes[name].registered_twice = True
    return list(classes.values())


def _namedtuple_factory(stmt: ast.stmt, names: dict[str, str]) -> str | None:
    """The name `stmt` binds to a class made by `namedtuple(...)` / `NamedTuple(...)`."""
    if (
        isinstance(stmt, ast.Assign)
        and len(stmt.targets) == 1
        and isinstance(stmt.targets[0], ast.Name)
        and isinstance(stmt.value, ast.Call)
        and _names.dotted(stmt.value.func, names) in _names.NAMEDTUPLE_FACTORY
    ):
        return stmt.targets[0].id
    return None


def _factory_found(name: str, made: ast.Assign, registration: ast.stmt) -> Found:
    """A `namedtuple(...)` class given to a registration (vbjax): a pytree class with no
    class statement to rewrite, reported as refused (never a silent miss). Its node is
    an empty class statement at the assignment's line, which nothing rewrites."""
    node = ast.ClassDef(name=name, bases=[], keywords=[], body=[ast.Pass()], decorator_list=[])
    ast.copy_location(node, made)
    found = Found(name, node, None, [])
    how = f"a `namedtuple(...)` registered at line {registration.lineno}, no class statement"
    unhandled(found, how)
    found.indirect = _messages.UNHANDLED.format(
        cls=name,
        how=how,
        recipe="a class with the fields declared, its registration removed: "
        "docs/migration.md#from-namedtuple",
    )
    return found


# What `wrapper` returns for a copy of flax.struct.dataclass (pgx vendors one).
FLAX_COPY: ast.Call = ast.Call(ast.Name("flax.struct.dataclass"), [], [])


def _flax_copy(fn: ast.FunctionDef, calls: list[ast.Call], names: dict[str, str]) -> bool:
    """`fn` has the shape of flax.struct.dataclass: it makes its first parameter a
    `dataclasses.dataclass(frozen=True)`, splits the fields by their metadata's
    "pytree_node" and registers the class with jax.tree_util, so its classes behave as
    flax's (a vendored copy)."""
    frozen = [
        c
        for c in calls
        if _names.dotted(c.func, names) in _names.DATACLASS
        and isinstance(c.func, ast.Call)
        and any(
            k.arg == "frozen" and isinstance(k.value, ast.Constant) and k.value.value is True
            for k in c.func.keywords
        )
        and all(k.arg in ("frozen", None) for k in c.func.keywords)
    ]
    if len(frozen) != 1:  # most functions: the walk below is left out (whole-run time)
        return False
    registers = [
        c
        for c in calls
        if _names.dotted(c.func, names)
        in {*_names.REGISTER_FUNCTION, *_names.REGISTER_DATACLASS, *_names.REGISTER_CLASS}
    ]
    # Its own flatten functions (as flax's), in declaration order: a `register_dataclass`
    # with lists of its own, or a sort, is some other wrapper.
    own = bool(registers) and all(
        _names.dotted(c.func, names) in _names.REGISTER_FUNCTION for c in registers
    )
    unsorted = not any(_names.dotted(c.func, names) == "sorted" for c in calls)
    return (
        own
        and unsorted
        and any(isinstance(n, ast.Constant) and n.value == "pytree_node" for n in ast.walk(fn))
    )


def unhandled(found: Found, how: str) -> None:
    """Marks `found` as a pytree class the tool sees but does not rewrite (refused, with
    what to do): an equinox.Module, a subclass registered by its base's
    `__init_subclass__`."""
    found.family = "register_pytree_node"
    recipe = _RECIPES.get(
        how, "fields declared, the registration removed: docs/migration.md#by-hand"
    )
    found.indirect = _messages.UNHANDLED.format(cls=found.name, how=how, recipe=recipe)


def wrapper(fn: ast.stmt, names: dict[str, str]) -> ast.Call | bool | None:
    """For a project's dataclass wrapper, the dataclass options it fixes (as a call
    without positions, so any module can print it), or False for a wrapper the tool
    cannot read; None for any other statement.

    A wrapper takes the class first, applies `dataclasses.dataclass` to it once (its own
    keywords constant, or forwarded with `**kwargs`), and registers it with
    `jax.tree_util.register_dataclass(cls)`, the fields left to JAX (static: the fields
    whose metadata says `static=True`, as for a plain register_dataclass class), and
    nothing else.
    """
    if not isinstance(fn, ast.FunctionDef) or not (fn.args.posonlyargs + fn.args.args):
        return None
    calls = [n for n in ast.walk(fn) if isinstance(n, ast.Call)]
    if _flax_copy(fn, calls, names):
        return FLAX_COPY
    dataclass = [  # `dataclasses.dataclass(frozen=True)(clz)` counted once: the inner call
        c
        for c in calls
        if _names.dotted(c.func, names) in _names.DATACLASS and not isinstance(c.func, ast.Call)
    ]
    register = [c for c in calls if _names.dotted(c.func, names) in _names.REGISTER_DATACLASS]
    other = [
        c
        for c in calls
        if _names.dotted(c.func, names) in {*_names.REGISTER_CLASS, *_names.REGISTER_FUNCTION}
    ]
    if not dataclass or not (register or other):
        return None
    if (
        len(dataclass) != 1
        or len(register) != 1
        or other
        or len(register[0].args) != 1
        or register[0].keywords
    ):
        return False
    keywords: list[ast.keyword] = []
    for kw in dataclass[0].keywords:
        if kw.arg is None:
            continue  # `**kwargs`: the decorator's own keywords, read at each use
        if not isinstance(kw.value, ast.Constant):
            return False
        keywords.append(ast.keyword(kw.arg, ast.Constant(kw.value.value)))
    return ast.Call(ast.Name("dataclass"), [], keywords)
