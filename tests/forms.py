"""The two ways to declare a treeclass, for the tests that run a behaviour in both.

A test that takes the `form` fixture (tests/conftest.py) declares its classes as

    @form.decorate
    class Box(*form.bases):
        item: jax.Array

which is `@tc.treeclass` on `class Box:` in one run and `class Box(tc.TreeClass):` in
the other. A subclass of such a class is `@form.decorate class Child(Box)`: the base form
needs no decorator on it, the decorator form does. Both forms run the same code in
treeclass, so the shared behaviours are tested once, over both; what only one form has
(decorator arguments, class keywords, mixing the forms) is tested on its own.
"""

import dataclasses
import sys
import types
from collections.abc import Callable
from typing import Any

import treeclass as tc


def _as_written(cls: type[Any]) -> type[Any]:
    return cls


@dataclasses.dataclass(frozen=True)
class Form:
    name: str
    decorate: Callable[[type[Any]], type[Any]]
    bases: tuple[type, ...]

    def class_source(self, header: str) -> str:
        """The first lines of a class statement in this form, for classes written as
        source (PEP 695 syntax, `from __future__ import annotations`): `header` is the
        class name and its type parameters, such as "Box[T]". The source refers to
        treeclass as `tc`."""
        if self.bases:
            return f"class {header}(tc.TreeClass):"
        return f"@tc.treeclass\nclass {header}:"


DECORATOR = Form("decorator", tc.treeclass, ())
BASE = Form("base", _as_written, (tc.TreeClass,))
FORMS = (DECORATOR, BASE)


def exec_module(source: str) -> dict[str, Any]:
    """Runs `source` as the module `generated` (dataclasses looks a class's module up
    in sys.modules to read string annotations); its namespace."""
    module = types.ModuleType("generated")
    sys.modules["generated"] = module
    try:
        exec(source, module.__dict__)
    finally:
        del sys.modules["generated"]
    return module.__dict__
