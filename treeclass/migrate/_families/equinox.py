"""`equinox.Module` subclasses: reported, never rewritten (equinox's own field
machinery); docs/migration.md#from-equinoxmodule shows the port by hand."""

from __future__ import annotations

from treeclass.migrate._rule import Rule

__all__ = ["RULE"]

RULE = Rule(
    "equinox.Module",
    bases=frozenset({"equinox.Module", "equinox._module.Module"}),
    reported="a subclass of equinox.Module",
    recipe="docs/migration.md#from-equinoxmodule",
)
