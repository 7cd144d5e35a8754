"""Plans for the classes that declare their fields already: flax.struct, chex,
`register_dataclass`, NamedTuple, and a `@dataclass` with a hand-written flatten.

Their fields stay where they are; what changes is how each says it is static
(`struct.field(pytree_node=False)`, `metadata=dict(static=True)`, a `meta_fields` list,
an aux tuple) -> `tc.static(...)` or `tc.Static[T]`, the decorators and bases that
registered the class, and `dataclasses.field(...)` -> `tc.field(...)`. The leaf order
must already be the declaration order (chex sorts by name: refused unless sorted).
"""

from __future__ import annotations

import ast
import builtins

from treeclass.migrate import _messages, _names
from treeclass.migrate._context import Context
from treeclass.migrate._flatten_code import Refused
from treeclass.migrate._plan import Field, Plan
from treeclass.migrate._rule import DeclaredField, Rule

__all__ = [
    "DeclaredField",
    "declared_fields",
    "plan_dataclass",
    "register_dataclass_fields",
    "rewrite_fields",
]

# dataclasses.field / flax struct.field keywords that tc.field and tc.static take.
_KEPT = ("default", "default_factory", "init", "repr", "kw_only", "metadata")
_FIELD_CALLS = {
    "dataclasses.field",
    "flax.struct.field",
    "jax_dataclasses.field",
    "jax_dataclasses.static_field",
}
# Decorator and class keywords: what treeclass does the same way, what it cannot do.
_SAME = {
    "frozen": "True",
    "init": "True",
    "order": "False",
    "unsafe_hash": "False",
    "slots": "False",
    "match_args": "True",
}
# Annotations and defaults of a static field that cannot hold a hashable value.
UNHASHABLE_TYPES = (
    "list",
    "dict",
    "set",
    "List",
    "Dict",
    "Set",
    "Mapping",
    "MutableMapping",
    "MutableSequence",
    "ndarray",
    "Array",
    "ArrayLike",
    "DataFrame",
)
_UNHASHABLE_FACTORIES = (
    "list",
    "dict",
    "set",
    "collections.defaultdict",
    "collections.OrderedDict",
)


def unhashable_annotation(code: str) -> bool:
    """Whether an annotation (source text) names an unhashable type: `dict[str, int]`,
    `np.ndarray`, `Optional[List[int]]`."""
    return any(
        part.split(".")[-1] in UNHASHABLE_TYPES
        for part in code.replace("[", " ")
        .replace("]", " ")
        .replace(",", " ")
        .replace("|", " ")
        .split()
    )


_OPTIONS = ("kw_only", "repr", "eq")


def _is_static_metadata(node: ast.expr) -> bool:
    if isinstance(node, ast.Dict):
        return any(isinstance(k, ast.Constant) and k.value == "static" for k in node.keys)
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "dict":
        return any(kw.arg == "static" for kw in node.keywords)
    return False


def declared_fields(ctx: Context) -> list[DeclaredField]:
    """The annotated fields of the class body, in order (ClassVar excluded)."""
    out: list[DeclaredField] = []
    for stmt in ctx.found.node.body:
        if not (isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name)):
            continue
        if (_names.dotted(stmt.annotation, ctx.names) or "").endswith(
            "ClassVar"
        ) or "ClassVar" in ctx.code(stmt.annotation)[:9]:
            continue
        call = (
            stmt.value
            if isinstance(stmt.value, ast.Call)
            and _names.dotted(stmt.value.func, ctx.names) in _FIELD_CALLS
            else None
        )
        static = _jdc_static(ctx, stmt.annotation) is not None
        if call is not None:
            static = static or _names.dotted(call.func, ctx.names) == "jax_dataclasses.static_field"
            for kw in call.keywords:
                if (
                    kw.arg == "pytree_node"
                    and isinstance(kw.value, ast.Constant)
                    and kw.value.value is False
                ):
                    static = True
                if kw.arg == "metadata" and _is_static_metadata(kw.value):
                    static = True
        out.append(DeclaredField(stmt.target.id, stmt, call, static))
    return out


def _jdc_static(ctx: Context, annotation: ast.expr) -> ast.expr | None:
    """T of a `jdc.Static[T]` annotation, else None."""
    if (
        isinstance(annotation, ast.Subscript)
        and _names.dotted(annotation.value, ctx.names) in _names.JDC_STATIC
    ):
        return annotation.slice
    return None


def rewrite_fields(ctx: Context, fields: list[DeclaredField], statics: set[str]) -> list[Field]:
    """The new annotation and right-hand side of each field."""
    out: list[Field] = []
    for f in fields:
        static = f.name in statics
        inner = _jdc_static(ctx, f.stmt.annotation)
        if f.call is None and not _resolvable(ctx, f.stmt.annotation):
            # haiku's `module: "Module"`, a class defined below: treeclass reads a field's
            # annotation when the class is created, to tell static from dynamic, and
            # that name is not bound yet. A specifier says which, and it is not read.
            given = f"default={ctx.code(f.stmt.value)}" if f.stmt.value is not None else ""
            value = f"{ctx.tc}.{'static' if static else 'field'}({given})"
            out.append(Field(f.name, static, None, value))
            continue
        if f.call is None:
            annotation = (
                f"{ctx.tc}.Static[{ctx.code(inner or f.stmt.annotation)}]" if static else None
            )
            out.append(Field(f.name, static, annotation, None))
            continue
        kept: list[str] = []
        for kw in f.call.keywords:
            if kw.arg == "pytree_node" or (
                kw.arg == "metadata" and _is_static_metadata(kw.value) and _only_static(kw.value)
            ):
                continue
            if kw.arg not in _KEPT:
                raise Refused(
                    _messages.FIELD_SPEC.format(code=f"{kw.arg}=" if kw.arg else "**", attr=f.name)
                )
            kept.append(ctx.code(kw))
        if f.call.args:
            raise Refused(_messages.FIELD_SPEC.format(code=ctx.code(f.call), attr=f.name))
        value = f"{ctx.tc}.{'static' if static else 'field'}({', '.join(kept)})"
        out.append(Field(f.name, static, None if inner is None else ctx.code(inner), value))
    return out


def _resolvable(ctx: Context, annotation: ast.expr) -> bool:
    """Every name `annotation` reads (in a string annotation too) is bound when the class
    statement runs: a builtin, or bound by a module-level statement above the class (an
    import not under `if TYPE_CHECKING:`, a class, a function, an assignment)."""
    if isinstance(annotation, ast.Constant) and isinstance(annotation.value, str):
        try:
            annotation = ast.parse(annotation.value, mode="eval").body
        except SyntaxError:
            return False
    read = {n.id for n in ast.walk(annotation) if isinstance(n, ast.Name)}
    strings = [
        n.value
        for n in ast.walk(annotation)
        if isinstance(n, ast.Constant) and isinstance(n.value, str)
    ]
    for text in strings:  # `list["Module"]`
        try:
            read |= {
                n.id for n in ast.walk(ast.parse(text, mode="eval")) if isinstance(n, ast.Name)
            }
        except SyntaxError:
            return False
    read -= set(dir(builtins))
    return not read or read <= _bound_above(ctx.tree, ctx.found.node.lineno)


def _bound_above(tree: ast.Module, line: int) -> set[str]:
    """The names module-level statements above `line` bind (imports in a `try` or an
    `if` too, unless the `if` tests TYPE_CHECKING: those run for type checkers only)."""
    out: set[str] = set()
    todo: list[ast.stmt] = [s for s in tree.body if s.lineno < line]
    while todo:
        stmt = todo.pop()
        if isinstance(stmt, ast.Import | ast.ImportFrom):
            out |= {(a.asname or a.name).split(".")[0] for a in stmt.names}
        elif isinstance(stmt, ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            out.add(stmt.name)
        elif isinstance(stmt, ast.Assign | ast.AnnAssign | ast.AugAssign):
            targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
            out |= {n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)}
        elif isinstance(stmt, ast.Try):
            todo += [*stmt.body, *stmt.orelse, *stmt.finalbody]
            todo += [s for h in stmt.handlers for s in h.body]
        elif isinstance(stmt, ast.If) and "TYPE_CHECKING" not in ast.unparse(stmt.test):
            todo += [*stmt.body, *stmt.orelse]
    return out


def _only_static(node: ast.expr) -> bool:
    if isinstance(node, ast.Dict):
        return len(node.keys) == 1
    return isinstance(node, ast.Call) and len(node.keywords) == 1 and not node.args


def _unhashable_default(ctx: Context, f: DeclaredField) -> str | None:
    value = f.stmt.value
    if f.call is not None:
        given = {kw.arg: kw.value for kw in f.call.keywords}
        if "default_factory" in given:
            factory = given["default_factory"]
            if isinstance(factory, ast.Lambda):
                factory = factory.body
            if (
                isinstance(factory, ast.List | ast.Dict | ast.Set)
                or _names.dotted(factory, ctx.names) in _UNHASHABLE_FACTORIES
            ):
                return ctx.code(given["default_factory"])
        value = given.get("default")
    if isinstance(value, ast.List | ast.Dict | ast.Set | ast.ListComp | ast.DictComp | ast.SetComp):
        return ctx.code(value)
    if (
        isinstance(value, ast.Call)
        and _names.dotted(value.func, ctx.names) in _UNHASHABLE_FACTORIES
    ):
        return ctx.code(value)
    return None


def check_statics(ctx: Context, fields: list[DeclaredField], statics: set[str]) -> None:
    """Refuses a static field declared unhashable: a treeclass checks statics at
    construction, where flax, chex and register_dataclass never did."""
    for i, f in enumerate(fields):
        if f.name not in statics:
            continue
        keys: list[str | int] = [f.name] if ctx.base_plans else [f.name, i]
        sites = [
            site
            for key in keys
            for site in ctx.facts.unhashable_args.get((ctx.found.name, key), [])
        ]
        if sites:
            raise Refused(
                _messages.STATIC_UNHASHABLE.format(
                    attr=f.name, why=f"given an unhashable value at {sites[0]}"
                )
            )
        annotation = ctx.code(f.stmt.annotation)
        if unhashable_annotation(annotation):
            raise Refused(
                _messages.STATIC_UNHASHABLE.format(attr=f.name, why=f"annotated `{annotation}`")
            )
        why = ctx.unhashable(f.stmt.annotation)
        if why is not None:
            raise Refused(
                _messages.STATIC_UNPROVEN.format(attr=f.name, annotation=annotation, why=why)
            )
        default = _unhashable_default(ctx, f)
        if default is not None:
            raise Refused(
                _messages.STATIC_UNHASHABLE.format(
                    attr=f.name, why=f"given the default `{default}`"
                )
            )


def _options(ctx: Context, decorators: list[ast.expr], required: str | None) -> dict[str, str]:
    """The dataclass options the decorators give, as treeclass class keywords; refused
    for those a treeclass has no equivalent of, or without the keyword the family
    requires (`required`: chex's `mappable_dataclass`)."""
    options: dict[str, str] = {}
    for decorator in decorators:
        if not isinstance(decorator, ast.Call):
            continue
        for kw in decorator.keywords:
            value = ctx.code(kw.value)
            if kw.arg == "mappable_dataclass":
                if value != "False":
                    raise Refused(_messages.CHEX_MAPPABLE)
            elif kw.arg in _OPTIONS:
                if value not in ("True", "False"):
                    raise Refused(_messages.OPTION.format(code=ctx.code(kw), why="not a constant"))
                if value != {"kw_only": "False", "repr": "True", "eq": "True"}[kw.arg]:
                    options[kw.arg] = value
            elif kw.arg in _SAME and value == _SAME[kw.arg]:
                continue
            elif kw.arg == "unsafe_hash" and value == "True" and options.get("eq") != "False":
                options["_hash"] = (
                    ""  # a treeclass hashes by type and static values already: dropped, noted
                )
            elif not (kw.arg == "frozen" and value == "False"):
                raise Refused(
                    _messages.OPTION.format(
                        code=ctx.code(kw),
                        why="a treeclass is a frozen dataclass with these defaults",
                    )
                )
    if required is not None and not any(
        isinstance(d, ast.Call) and any(kw.arg == required for kw in d.keywords) for d in decorators
    ):
        raise Refused(_messages.CHEX_MAPPABLE)
    return options


def register_dataclass_fields(
    ctx: Context, call: ast.Call | None
) -> tuple[list[str] | None, set[str] | None]:
    """data_fields and meta_fields of a `register_dataclass(Cls, ...)` call."""
    if call is None:
        return None, None
    given: dict[str, ast.expr] = dict(
        zip(("nodetype", "data_fields", "meta_fields", "drop_fields"), call.args, strict=False)
    )
    given.update({kw.arg: kw.value for kw in call.keywords if kw.arg})
    lists: dict[str, list[str]] = {}
    for key in ("data_fields", "meta_fields", "drop_fields"):
        node = given.get(key)
        if node is None:
            continue
        if not isinstance(node, ast.List | ast.Tuple) or not all(
            isinstance(e, ast.Constant) and isinstance(e.value, str) for e in node.elts
        ):
            raise Refused(
                _messages.OPTION.format(
                    code=ctx.code(node), why="the tool reads literal lists of names only"
                )
            )
        lists[key] = [e.value for e in node.elts]  # type: ignore[attr-defined]  # pyright: ignore[reportAttributeAccessIssue]
    if lists.get("drop_fields"):
        raise Refused(
            _messages.OPTION.format(code="drop_fields=", why="a treeclass flattens every field")
        )
    return lists.get("data_fields"), set(lists.get("meta_fields", []))


def plan_dataclass(
    ctx: Context, rule: Rule, statics: set[str] | None = None, children: list[str] | None = None
) -> Plan:
    """The plan for a class of `rule`'s family, whose body declares its fields
    (`statics`/`children`: what a hand-written flatten of a `@dataclass` says; else the
    family's `statics` hook reads them)."""
    node, found = ctx.found.node, ctx.found
    fields = declared_fields(ctx)
    names = [f.name for f in fields]
    remove_decorators = []
    dataclass_decorators: list[ast.expr] = []
    for i, d in enumerate(node.decorator_list):
        qualified = _names.dotted(d, ctx.names)
        if i == found.decorator or qualified in _names.DATACLASS:
            remove_decorators.append(i)
            dataclass_decorators.append(d)
    if found.wrapper is not None:
        dataclass_decorators.append(found.wrapper)  # the options the wrapper fixes
    # flax.struct.PyTreeNode takes the dataclass options as class keywords.
    keywords = (
        ast.Call(ast.Name("dataclass"), [], list(node.keywords))
        if rule.keywords_are_options
        else None
    )
    options = _options(
        ctx, [*dataclass_decorators, *([keywords] if keywords else [])], rule.required_option
    )
    remove_bases = tuple(
        i for i, b in enumerate(found.bases) if b in rule.bases or b in ("object",)
    )
    for kw in [] if keywords else node.keywords:
        raise Refused(
            _messages.OPTION.format(code=ctx.code(kw), why="class keywords of the old base")
        )
    if statics is None:
        statics = rule.statics(ctx, fields)
    statics = statics or set()
    check_statics(ctx, fields, statics)
    if children is not None and children != [n for n in names if n not in statics]:
        msg = _messages.PREFIX.format(
            children=children,
            base="its declared fields",
            base_children=[n for n in names if n not in statics],
        )
        raise Refused(msg)
    notes = _notes(
        ctx,
        rule,
        options,
        [f.name for f in fields if f.name in statics],
        dataclass_decorators,
        keywords,
    )
    options.pop("_hash", None)
    return Plan(
        found.name,
        rule.name,
        rewrite_fields(ctx, fields, statics),
        tuple_protocol=(
            tuple((f.name, ctx.code(f.stmt.annotation)) for f in fields)
            if rule.tuple_protocol
            else None
        ),
        defined=frozenset(_defined(node)),
        notes=notes,
        declare_fields=False,
        keep_init=True,
        remove_decorators=tuple(remove_decorators),
        drop_keywords=keywords is not None,
        remove_bases=remove_bases,
        options=options,
        remove_registration=found.registration is not None,
    )


def _notes(
    ctx: Context,
    rule: Rule,
    options: dict[str, str],
    statics: list[str],
    decorators: list[ast.expr],
    keywords: ast.Call | None,
) -> list[str]:
    """What changes for the users of a converted dataclass."""
    given = {
        kw.arg: ctx.code(kw.value)
        for d in [*decorators, *([keywords] if keywords else [])]
        if isinstance(d, ast.Call)
        for kw in d.keywords
    }
    frozen = rule.frozen or given.get("frozen") == "True"
    notes = [] if frozen else [_messages.NOTE_FROZEN]
    if statics:
        notes.append(_messages.NOTE_STATICS.format(fields=", ".join(statics)))
    own = [  # a dataclass keeps an __eq__ / __hash__ its class body defines, as a treeclass
        m
        for m in ("__eq__", "__hash__")
        if any(isinstance(s, ast.FunctionDef) and s.name == m for s in ctx.found.node.body)
    ]
    if own:
        notes.append(_messages.NOTE_OWN_EQ.format(methods=" and ".join(own)))
    elif options.get("eq") != "False" and not rule.tuple_protocol:  # NOTE_NAMEDTUPLE says it
        notes.append(_messages.NOTE_DATACLASS_EQ)
    if "_hash" in options:
        notes.append(_messages.NOTE_HASH)
    if any(
        isinstance(s, ast.FunctionDef) and s.name == "__post_init__" for s in ctx.found.node.body
    ):
        notes.append(_messages.NOTE_POST_INIT)
    return notes + list(rule.notes)


def _defined(node: ast.ClassDef) -> set[str]:
    """The names a class body binds (methods, class attributes)."""
    out = {s.name for s in node.body if isinstance(s, ast.FunctionDef | ast.AsyncFunctionDef)}
    for stmt in node.body:
        targets = stmt.targets if isinstance(stmt, ast.Assign) else []
        out |= {t.id for t in targets if isinstance(t, ast.Name)}
    return out
