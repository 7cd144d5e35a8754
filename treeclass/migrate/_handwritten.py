"""Plans for hand-written pytree classes: `register_pytree_node_class`,
`register_pytree_with_keys_class`, `register_pytree_node(Cls, flatten, unflatten)`.

The class converts when its flatten maps 1:1 onto attributes (children -> dynamic
fields, in order; aux values -> static fields), its unflatten rebuilds exactly those
attributes from exactly those values, `__init__` sets nothing else, and nothing sets
or mutates them after construction. Then:

- fields are declared at the top of the body, children first in their order;
- a plain `__init__` (`self.a = a` for each parameter, nothing else) is replaced by
  the generated one, with the same signature; any other is kept, its `self.x = v`
  rewritten to `object.__setattr__(self, "x", v)` (treeclass runs it at construction,
  never at unflatten);
- the flatten/unflatten code and the registration go.
"""

from __future__ import annotations

import ast

from treeclass.migrate import _dataclasses, _messages, _names
from treeclass.migrate._checks import check_owned
from treeclass.migrate._context import Context
from treeclass.migrate._facts import FLATTEN_METHODS
from treeclass.migrate._flatten_code import Aux, Flattened, Refused, read_flatten, read_unflatten
from treeclass.migrate._init_code import Init, bind, passed_through, read_init
from treeclass.migrate._plan import Field, Plan
from treeclass.migrate._rule import Rule

__all__ = ["plan_handwritten"]

_LITERAL_DEFAULTS = (ast.Constant, ast.Tuple, ast.UnaryOp)


def _method(node: ast.ClassDef, name: str) -> ast.FunctionDef | None:
    found = [s for s in node.body if isinstance(s, ast.FunctionDef) and s.name == name]
    return found[-1] if found else None


def _inherited(ctx: Context, name: str) -> tuple[ast.FunctionDef | None, str | None]:
    """A flatten method from an unconverted base in the run: (method, base name)."""
    for base in ctx.base_found.values():
        method = _method(base.node, name)
        if method is not None:
            return method, base.name
    return None, None


def _functions(
    ctx: Context,
) -> tuple[ast.FunctionDef | ast.Lambda, ast.FunctionDef | ast.Lambda, bool, tuple[str, ...]]:
    """flatten, unflatten, keyed?, and the module functions to remove, of a
    `register_pytree_node(Cls, flatten, unflatten)` / `register_pytree_with_keys` call."""
    call = ctx.found.registration
    assert call is not None  # the finder sets it for this family
    keyed = (_names.dotted(call.func, ctx.names) or "").endswith("with_keys")
    given: dict[str, ast.expr] = dict(
        zip(("nodetype", "flatten", "unflatten", "flatten_func"), call.args, strict=False)
    )
    keywords = {
        "flatten_func": "flatten",
        "flatten_with_keys": "flatten",
        "unflatten_func": "unflatten",
    }
    given.update({keywords.get(kw.arg, kw.arg): kw.value for kw in call.keywords if kw.arg})
    functions, used = ctx.functions(), []
    out: list[ast.FunctionDef | ast.Lambda] = []
    for role in ("flatten", "unflatten"):
        node = given.get(role)
        if isinstance(node, ast.Lambda):
            out.append(node)
        elif isinstance(node, ast.Name) and node.id in functions:
            out.append(functions[node.id])
            used.append(node.id)
        else:
            raise Refused(
                _messages.NOT_FOUND.format(
                    what=f"{role} function `{ctx.code(node) if node else '?'}`"
                )
            )
    for fn in used:
        loads = [
            n
            for n in ast.walk(ctx.tree)
            if isinstance(n, ast.Name) and n.id == fn and isinstance(n.ctx, ast.Load)
        ]
        if len(loads) > 1 or fn in ctx.facts.flatten_calls:
            site = f"{ctx.path}:{loads[-1].lineno}"
            raise Refused(_messages.CALLED.format(method=f"flatten function {fn}()", site=site))
    return out[0], out[1], keyed, tuple(used)


def _read(ctx: Context) -> tuple[Flattened, ast.FunctionDef | ast.Lambda, bool, tuple[str, ...]]:
    node, family = ctx.found.node, ctx.found.family
    if family == "register_pytree_node":
        flatten, unflatten, keyed, functions = _functions(ctx)
        return read_flatten(flatten, "flatten", keyed=keyed), unflatten, False, functions
    keyed_fn = _method(node, "tree_flatten_with_keys")
    plain_fn = _method(node, "tree_flatten")
    un = _method(node, "tree_unflatten")
    if plain_fn is None and keyed_fn is None:
        inherited, base = _inherited(ctx, "tree_flatten")
        if inherited is not None:
            read_flatten(inherited, f"{base}.tree_flatten")  # refuses with the real reason
            raise Refused(_messages.BASE_UNKNOWN.format(base=base))
        raise Refused(_messages.NOT_FOUND.format(what="tree_flatten"))
    if plain_fn is not None:
        read_flatten(plain_fn, "tree_flatten")  # its own reason first
    if un is None:
        bases = [*(b for b, _ in ctx.base_plans.values()), *ctx.base_found.values()]
        un = next((m for m in (_method(b.node, "tree_unflatten") for b in bases) if m), None)
    if un is None:
        raise Refused(_messages.NOT_FOUND.format(what="tree_unflatten"))
    where = "tree_flatten"
    flat = read_flatten(keyed_fn, "tree_flatten_with_keys", keyed=True) if keyed_fn else None
    if plain_fn is not None:
        plain = read_flatten(plain_fn, where)
        if flat is not None and (flat.children, flat.aux) != (plain.children, plain.aux):
            raise Refused(_messages.TWO_FLATTENS.format(first=plain.children, second=flat.children))
        flat = flat or plain
    assert flat is not None
    decorators = {d.id for d in un.decorator_list if isinstance(d, ast.Name)}
    if "classmethod" in decorators:
        return flat, un, True, ()
    if "staticmethod" not in decorators:
        raise Refused(_messages.UNFLATTEN.format(detail="tree_unflatten is not a classmethod"))
    # `@staticmethod def tree_unflatten(aux, children): return Bounds(*children)` builds
    # the class by name: the same as `cls(...)` while no class extends it (a subclass
    # unflattens as its base today, a treeclass subclass as itself).
    subclasses = ctx.subclasses if un in node.body else ["a subclass (it is inherited)"]
    if subclasses:
        raise Refused(
            _messages.UNFLATTEN.format(
                detail=f"a staticmethod tree_unflatten builds `{ctx.found.name}` by name, and "
                f"`{subclasses[0]}` extends it (it unflattens as `{ctx.found.name}` today)"
            )
        )
    return flat, un, False, ()


def _check_class_body(ctx: Context, fields: list[str]) -> dict[str, ast.AnnAssign]:
    """Class-level names that clash with the fields; returns the annotations to move."""
    moved: dict[str, ast.AnnAssign] = {}
    for stmt in ctx.found.node.body:
        if isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name):
            name = stmt.target.id
            if "ClassVar" in ctx.code(stmt.annotation):
                if name in fields:
                    raise Refused(_messages.CLASS_ATTRIBUTE.format(name=name, line=stmt.lineno))
            elif name not in fields:
                raise Refused(_messages.CLASS_ANNOTATION.format(name=name))
            elif stmt.value is not None:
                raise Refused(_messages.CLASS_ATTRIBUTE.format(name=name, line=stmt.lineno))
            else:
                moved[name] = stmt
        elif isinstance(stmt, ast.Assign):
            for target in stmt.targets:
                if isinstance(target, ast.Name) and target.id in fields:
                    raise Refused(
                        _messages.CLASS_ATTRIBUTE.format(name=target.id, line=stmt.lineno)
                    )
        elif isinstance(stmt, ast.FunctionDef | ast.ClassDef) and stmt.name in fields:
            raise Refused(_messages.CLASS_ATTRIBUTE.format(name=stmt.name, line=stmt.lineno))
    return moved


def _check_static(ctx: Context, init: Init, attr: str) -> None:
    assigned = init.assigned[attr][0]
    value = assigned.value
    unhashable = isinstance(
        value, ast.List | ast.Dict | ast.Set | ast.ListComp | ast.DictComp | ast.SetComp
    )
    qualified = _names.dotted(value, ctx.names) if isinstance(value, ast.Call) else None
    if unhashable or (qualified or "").split(".")[0] in ("dict", "list", "set", "numpy", "jax"):
        raise Refused(_messages.AUX_UNHASHABLE.format(attr=attr, why=f"set to `{ctx.code(value)}`"))
    param = passed_through(init, assigned, ctx.names, static=True)
    for i, p in enumerate(init.params):
        if p.name != param:
            continue
        keys: list[str | int] = [p.name, i] if p.kind in ("pos", "posonly") else [p.name]
        sites = [
            site
            for key in keys
            for site in ctx.facts.unhashable_args.get((ctx.found.name, key), [])
        ]
        if sites:
            raise Refused(
                _messages.AUX_UNHASHABLE.format(
                    attr=attr, why=f"given an unhashable value at {sites[0]}"
                )
            )
        annotation = ctx.code(p.annotation) if p.annotation is not None else ""
        if _dataclasses.unhashable_annotation(annotation):
            raise Refused(
                _messages.AUX_UNHASHABLE.format(attr=attr, why=f"annotated `{annotation}`")
            )
        why = ctx.unhashable(p.annotation) if p.annotation is not None else None
        if why is not None:
            raise Refused(
                _messages.STATIC_UNPROVEN.format(attr=attr, annotation=annotation, why=why)
            )
        if isinstance(p.default, ast.List | ast.Dict | ast.Set):
            raise Refused(_messages.STATIC_DEFAULT.format(attr=attr, code=ctx.code(p.default)))


def _check_unflatten(
    ctx: Context, flat: Flattened, unflatten: ast.FunctionDef | ast.Lambda, method: bool, init: Init
) -> None:
    slots = flat.slots()
    rebuilt = read_unflatten(unflatten, flat, {ctx.found.name}, method=method)
    if rebuilt.kind == "bypass":
        if rebuilt.kwargs != slots:
            given = sorted(rebuilt.kwargs.values(), key=str)
            detail = f"it sets {sorted(rebuilt.kwargs)} from {given}, flatten saves {sorted(slots)}"
            raise Refused(_messages.UNFLATTEN.format(detail=detail))
        return
    bound = bind(init, rebuilt.args, rebuilt.kwargs)
    for attr, slot in slots.items():
        assigned = init.assigned[attr][-1]
        param = passed_through(init, assigned, ctx.names, static=slot[0] == "a")
        if param is None or bound.get(param) != slot or len(init.assigned[attr]) > 1:
            raise Refused(_messages.RECOMPUTES.format(attr=attr, code=ctx.code(assigned.value)))


def _annotation(ctx: Context, init: Init, attr: str, moved: dict[str, ast.AnnAssign]) -> str:
    if attr in moved:
        return ctx.code(moved[attr].annotation)
    assigned = init.assigned[attr][0]
    if assigned.annotation is not None:
        return ctx.code(assigned.annotation)
    if isinstance(assigned.value, ast.Name):
        for p in init.params:
            if (
                p.name == assigned.value.id
                and p.annotation is not None
                and p.name not in init.rebound
            ):
                return ctx.code(p.annotation)
    return "Any"


def _plain(ctx: Context, init: Init, flat: Flattened) -> bool:
    """`self.a = a` for each parameter, in the children's order, nothing else."""
    fn = init.node
    text = ctx.code(fn)
    if (
        init.has_docstring
        or not init.only_assignments
        or fn.decorator_list
        or "#" in text
        or fn.returns is not None
    ):
        return False
    names = [p.name for p in init.params]
    if any(p.kind != "pos" for p in init.params) or set(names) != set(flat.slots()):
        return False
    for name in names:
        entries = init.assigned.get(name, [])
        if len(entries) != 1 or not (
            isinstance(entries[0].value, ast.Name) and entries[0].value.id == name
        ):
            return False
        if entries[0].annotation is not None:
            return False
    if [n for n in names if n in flat.children] != flat.children:
        return False
    for p in init.params:
        if p.default is not None:
            literal = isinstance(p.default, _LITERAL_DEFAULTS) and all(
                isinstance(n, ast.Constant | ast.Tuple | ast.UnaryOp | ast.USub | ast.Load)
                for n in ast.walk(p.default)
            )
            if not literal and (
                p.name in flat.children or not isinstance(p.default, ast.Name | ast.Attribute)
            ):
                return False
    return True


def plan_handwritten(ctx: Context) -> Plan:
    """The plan for a hand-written pytree class, or `Refused`."""
    found, node = ctx.found, ctx.found.node
    removed = check_owned(ctx)
    for i, base in enumerate(found.bases):
        if (
            i not in {*ctx.base_plans, *ctx.mixins, *ctx.refused_bases}
            and base not in _names.ALLOWED_MIXINS
        ):
            if i in ctx.base_found:
                _read(ctx)  # the base's own flatten, read through the subclass: its reason first
            raise Refused(_messages.BASE_UNKNOWN.format(base=ctx.code(node.bases[i])))
    own_flatten = (
        _method(node, "tree_flatten") is not None
        or _method(node, "tree_flatten_with_keys") is not None
    )
    if ctx.refused_bases and not own_flatten:  # inherited from the refused base: the run says why
        base = found.bases[min(ctx.refused_bases)] or "?"
        raise Refused(_messages.BASE_REFUSED.format(base=base.split(".")[-1]))
    if ctx.base_plans and not own_flatten:
        return _plan_subclass(ctx)
    if any(_names.dotted(d, ctx.names) in _names.DATACLASS for d in node.decorator_list):
        flat, _, _, _ = _read(ctx)
        family = Rule(found.family or "register_pytree_node_class")  # no hooks: statics given
        plan = _dataclasses.plan_dataclass(ctx, family, set(flat.aux.attrs), flat.children)
        plan.remove_methods = (
            tuple(m for m in FLATTEN_METHODS if _method(node, m) is not None) + removed
        )
        return plan
    flat, unflatten, method, functions = _read(ctx)
    fields = flat.children + flat.aux.attrs
    if flat.keys is not None:
        for attr, key in zip(flat.children, flat.keys, strict=True):
            if key != attr:
                raise Refused(_messages.KEYS.format(attr=attr, key=key))
    for base_found, base_plan in ctx.base_plans.values():
        inherited = [f.name for f in base_plan.fields if not f.static]
        if flat.children[: len(inherited)] != inherited:
            raise Refused(
                _messages.PREFIX.format(
                    children=flat.children, base=base_found.name, base_children=inherited
                )
            )
        fields = [f for f in fields if f not in {f.name for f in base_plan.fields}]
    moved = _check_class_body(ctx, fields)
    init_node = _method(node, "__init__")
    if init_node is None and not flat.slots() and not ctx.base_plans:
        return _plan_fieldless(ctx, unflatten, method, functions, removed)
    if init_node is None:
        raise Refused(_messages.NO_INIT.format(cls=found.name))
    init = read_init(init_node, ctx.text)
    for call in init.super_calls:
        if call.args or call.keywords or ctx.base_plans:
            raise Refused(_messages.INIT_CALLS_SUPER.format(code=ctx.code(call)))
    for attr in init.assigned:
        if attr not in flat.slots():
            raise Refused(_messages.DERIVED.format(attr=attr))
    for attr in flat.slots():
        entries = init.assigned.get(attr, [])
        if not entries:
            raise Refused(_messages.NEVER_SET.format(attr=attr))
        if not any(e.top_level for e in entries):
            raise Refused(_messages.NOT_SET.format(attr=attr, where=f"line {entries[0].line}"))
    for attr in flat.aux.attrs:
        _check_static(ctx, init, attr)
    _check_unflatten(ctx, flat, unflatten, method, init)
    plain = _plain(ctx, init, flat) and not ctx.base_plans
    order = [p.name for p in init.params] if plain else flat.children + flat.aux.attrs
    defaults = {p.name: ctx.code(p.default) for p in init.params if plain and p.default is not None}
    statics = set(flat.aux.attrs)
    plan_fields = []
    for attr in (a for a in order if a in fields):
        annotation = _annotation(ctx, init, attr, moved)
        if attr in statics:
            annotation = f"{ctx.tc}.Static[{annotation}]"
        plan_fields.append(Field(attr, attr in statics, annotation, defaults.get(attr)))
    has_eq = _method(node, "__eq__") is not None
    remove_decorators = () if found.decorator is None else (found.decorator,)
    plan = Plan(
        found.name,
        found.family or "register_pytree_node_class",
        plan_fields,
        declare_fields=True,
        keep_init=not plain,
        remove_methods=tuple(m for m in FLATTEN_METHODS if _method(node, m) is not None) + removed,
        remove_decorators=remove_decorators,
        remove_bases=tuple(i for i, b in enumerate(found.bases) if b == "object"),
        add_base=not ctx.base_plans,
        remove_functions=functions,
        remove_registration=found.registration is not None,
        moved_annotations=tuple(moved),
        options={**({} if has_eq else {"eq": "False"}), **_repr_option(ctx)},
    )
    plan.notes = [_messages.NOTE_FROZEN]
    if flat.keys is None and flat.children:
        plan.notes.append(
            _messages.NOTE_KEYS.format(example=f"[<flat index 0>] -> .{flat.children[0]}")
        )
    if flat.aux.attrs:
        plan.notes.append(_messages.NOTE_STATICS.format(fields=", ".join(flat.aux.attrs)))
    if not plain:
        plan.notes.append(_messages.NOTE_INIT)
    if not has_eq:
        plan.notes.append(_messages.NOTE_EQ)
    return plan


def _repr_option(ctx: Context) -> dict[str, str]:
    """`repr=False` where a base in the run (a mixin, a converted class) defines the
    `__repr__` the class inherits today: a treeclass installs its own where the class
    body has none."""
    if _method(ctx.found.node, "__repr__") is None and "__repr__" in ctx.methods:
        return {"repr": "False"}
    return {}


def _plan_fieldless(
    ctx: Context,
    unflatten: ast.FunctionDef | ast.Lambda,
    method: bool,
    functions: tuple[str, ...],
    removed: tuple[str, ...],
) -> Plan:
    """A class with no `__init__` that flattens to nothing (an abstract base, a marker):
    a field-less treeclass, when its unflatten is `cls()`."""
    found, node = ctx.found, ctx.found.node
    rebuilt = read_unflatten(unflatten, Flattened([], Aux("none", [])), {found.name}, method=method)
    if rebuilt.args or rebuilt.kwargs:
        raise Refused(
            _messages.UNFLATTEN.format(detail="it passes values to a class that flattens none")
        )
    has_eq = _method(node, "__eq__") is not None
    return Plan(
        found.name,
        found.family or "register_pytree_node_class",
        [],
        declare_fields=True,
        keep_init=True,
        remove_methods=tuple(m for m in FLATTEN_METHODS if _method(node, m) is not None) + removed,
        remove_decorators=() if found.decorator is None else (found.decorator,),
        remove_bases=tuple(i for i, b in enumerate(found.bases) if b == "object"),
        remove_functions=functions,
        remove_registration=found.registration is not None,
        options={**({} if has_eq else {"eq": "False"}), **_repr_option(ctx)},
        notes=[_messages.NOTE_FROZEN, *([] if has_eq else [_messages.NOTE_EQ])],
    )


def _plan_subclass(ctx: Context) -> Plan:
    """A subclass of a converted class that inherits its flatten: it becomes a
    treeclass subclass with no fields of its own."""
    found, node = ctx.found, ctx.found.node
    (base, base_plan), *_ = ctx.base_plans.values()
    if _method(node, "__init__") is not None:
        raise Refused(_messages.SUBCLASS_INIT.format(cls=found.name, base=base.name))
    _check_class_body(ctx, [])
    options = dict(base_plan.options) if _method(node, "__eq__") is None else {}
    options.pop("repr", None)
    options.update(_repr_option(ctx))
    return Plan(
        found.name,
        found.family or "register_pytree_node_class",
        [],
        declare_fields=True,
        remove_methods=tuple(m for m in FLATTEN_METHODS if _method(node, m) is not None),
        remove_decorators=() if found.decorator is None else (found.decorator,),
        add_base=False,
        remove_registration=found.registration is not None,
        options=options,
        notes=list(base_plan.notes),
    )
