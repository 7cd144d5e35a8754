"""The source of generated class modules (tests/class_strategies.py draws them), and
what that source runs against.

A module is rendered as text, exec'd as a module of its own (in `sys.modules`, so
pickle finds its classes by name), and printed by every failure: paste it into a file
beside this one and it runs. Its first lines import this module's names:

    from __future__ import annotations
    from class_source import *

    class Gen1(tc.TreeClass):
        a0: Optional[tc.Static[int]] = tc.field(default=3, converter=plus_one('a0'))
        a1: jax.Array = tc.field(init=False)

        def __post_init__(self):
            EVENTS.append('post_init Gen1')
            object.__setattr__(self, 'a1', DERIVED_ARRAY)

User code appends to `EVENTS` (`convert a0`, `init Gen1` for a hand-written
`__init__`, `post_init Gen1`, `check_init Gen1`), so a test compares how often each hook
ran with the reference model's count (tests/reference.py).
"""

from __future__ import annotations

import itertools
import pickle
import subprocess
import sys
import types
from pathlib import Path
from typing import Annotated, Any, Optional, Union

import cloudpickle
import jax
import jax.numpy as jnp
from class_strategies import (
    STATIC_TYPES,
    Call,
    ClassDecl,
    FieldDecl,
    ModuleDecl,
    Val,
    defines_post_init,
    params,
)
from typing_extensions import TypeAliasType

import treeclass as tc

__all__ = [
    "DERIVED_ARRAY", "EVENTS", "Annotated", "Any", "Optional", "TypeAliasType", "Union",
    "jax", "jnp", "plus_one", "tc",
]

EVENTS: list[str] = []
"""What user code ran, in order: `convert <field>`, `init <Class>` (a hand-written
`__init__`), `post_init <Class>`, `check_init <Class>`."""

DERIVED_ARRAY = jnp.arange(3.0)
"""What `__post_init__` stores in a dynamic `init=False` field ('derived' in a static)."""


def plus_one(name: str) -> Any:
    """The converter of field `name`: counts its call, adds one (so running it twice
    shows in the value as well as in the count)."""

    def convert(value: Any) -> Any:
        EVENTS.append(f"convert {name}")
        return value + 1

    convert.__qualname__ = f"plus_one({name!r})"
    return convert


# ---------------------------------------------------------------------------------------
# Rendering and building.


def _render_field(f: FieldDecl) -> str:
    options = []
    if f.static and f.spelling == "field":
        options.append("static=True")
    if f.default in ("value", "array"):
        options.append(f"default={f.default_src}")
    elif f.default == "factory":
        options.append(f"default_factory={f.default_src}")
    if f.derived:
        options.append("init=False")
    if f.converter:
        options.append(f"converter=plus_one({f.name!r})")
    if not f.trainable:
        options.append("trainable=False")
    head = f"{f.name}: {f.annotation}"
    if f.spelling == "static":
        return f"{head} = tc.static({', '.join(options)})"
    if f.spelling == "field" or (f.spelling == "ann_field" and options):
        return f"{head} = tc.field({', '.join(options)})"
    if f.default in ("value", "array"):
        return f"{head} = {f.default_src}"
    if options:  # a bare or Static annotation with a factory
        return f"{head} = tc.field({', '.join(options)})"
    return head


def render_class(c: ClassDecl) -> str:
    if c.form == "decorator":
        lines = ["@tc.treeclass(kw_only=True)" if c.kw_only else "@tc.treeclass"]
        lines.append(f"class {c.name}({c.parent.name}):" if c.parent else f"class {c.name}:")
    else:
        bases = [c.parent.name] if c.parent else []
        if not c.parent or c.parent.form != "base":
            bases.append("tc.TreeClass")
        lines = [f"class {c.name}({', '.join(bases + (['kw_only=True'] if c.kw_only else []))}):"]
    lines += [f"    {_render_field(f)}" for f in c.own]
    if c.init != "generated":
        names = params(c)
        lines += ["", f"    def __init__(self{''.join(', ' + n for n in names)}):",
                  f"        EVENTS.append('init {c.name}')"]
        if c.init == "super" and c.parent:
            up = ", ".join(f"{n}={n}" for n in params(c.parent))
            lines.append(f"        super().__init__({up})")
        lines += [f"        self.{n} = {n}" for n in c.assigns]
        if c.init_calls_post_init:
            lines.append("        self.__post_init__()")
    if c.post_init:
        lines += ["", "    def __post_init__(self):", f"        EVENTS.append('post_init {c.name}')"]
        if c.parent and defines_post_init(c.parent):
            lines.append("        super().__post_init__()")
        for f in c.own:
            if f.derived:
                value = "'derived'" if f.static else "DERIVED_ARRAY"
                lines.append(f"        object.__setattr__(self, {f.name!r}, {value})")
    if c.check_init:
        lines += ["", "    def __check_init__(self):", f"        EVENTS.append('check_init {c.name}')"]
    if lines[-1].startswith("class "):
        lines.append("    pass")
    return "\n".join(lines)


def render_module(m: ModuleDecl) -> str:
    lines = ["from __future__ import annotations"] if m.future else []
    lines.append("from class_source import *")
    for alias in m.aliases:
        kind = alias.removeprefix("Hyper").removesuffix("TA").removesuffix("P")
        t = STATIC_TYPES[kind.lower()]
        if alias.endswith("TA"):
            lines.append(f"{alias} = TypeAliasType({alias!r}, tc.Static[{t}])")
        elif alias.endswith("P"):
            lines.append(f"type {alias} = tc.Static[{t}]")
        else:
            lines.append(f"{alias} = tc.Static[{t}]")
    classes = [render_class(c) for c in m.classes]
    # The target class gets a jit method with a trace limit (cloudpickle's trace history).
    classes[-1] += "\n\n    @tc.jit(max_traces=1)\n    def same(self):\n        return self"
    return "\n".join(lines) + "\n\n\n" + "\n\n\n".join(classes)


_modules = itertools.count()


def build_module(m: ModuleDecl) -> types.ModuleType:
    """Execs the module's source as a new module in `sys.modules` (pickle finds its
    classes by name). Raises what the class statements raise."""
    name = f"refgen_{next(_modules)}"
    module = types.ModuleType(name)
    sys.modules[name] = module
    source = render_module(m)
    exec(compile(source, f"<{name}>", "exec", dont_inherit=True), module.__dict__)
    return module


def real_value(v: Val | Call, ns: dict[str, Any]) -> Any:
    """The value `v` describes, built with the module's real classes."""
    if isinstance(v, Val):
        return eval(v.src, ns)
    return ns[v.decl.name](**{k: real_value(x, ns) for k, x in v.kwargs})



# ---------------------------------------------------------------------------------------
# Carrying instances to a new process, as cloudpickle does for a notebook's classes.

_LOADER = """\
import pickle, sys
for data in pickle.loads(sys.stdin.buffer.read()):
    try:
        m = pickle.loads(data)
        m.same()
        print("ok")
    except Exception as e:
        print(f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}")
"""


def in_new_process(calls: list[tuple[ModuleDecl, Call]]) -> list[str]:
    """Builds each instance, calls its `@tc.jit(max_traces=1)` method `same` once, pickles
    it with cloudpickle (its class by value, as for a class defined in `__main__`) and
    calls `same` again in one new process: per call "ok", the exception there, or "in
    this process: ..." where it failed before pickling (the other checks report that)."""
    dumped: list[bytes] = []
    outcomes: list[str | None] = []  # None: the new process's answer
    for decl, call in calls:
        try:
            module = build_module(decl)
            obj = real_value(call, module.__dict__)
            obj.same()
            cloudpickle.register_pickle_by_value(module)
            try:
                dumped.append(cloudpickle.dumps(obj))
            finally:
                cloudpickle.unregister_pickle_by_value(module)
            outcomes.append(None)
        except Exception as e:  # noqa: BLE001 (reported by the other checks)
            outcomes.append(f"in this process: {type(e).__name__}")
    path = f"{Path(__file__).parent}:{Path(tc.__file__).parent.parent}"
    run = subprocess.run(
        [sys.executable, "-c", _LOADER], input=pickle.dumps(dumped), check=False,
        capture_output=True, env={"PYTHONPATH": path, "JAX_PLATFORMS": "cpu"},
    )
    if run.returncode:
        raise RuntimeError(run.stderr.decode()[-2000:])
    lines = iter(run.stdout.decode().splitlines())
    return [outcome or next(lines) for outcome in outcomes]
