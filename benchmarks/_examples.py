"""The example scripts as modules: examples/ is not a package, so it cannot be
imported by name; every section that times an example loads it here."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


def example(name: str) -> ModuleType:
    """`examples/<name>.py` as the module `name`, loaded once per process.

    It is registered in `sys.modules` before it runs, as an import would do: treeclass
    and dataclasses resolve the module's string annotations through it, and the
    examples load their siblings under the same names (examples/pln.py loads
    `pln_containers`, which imports `pln`), so one name means one module.
    """
    path = EXAMPLES / f"{name}.py"
    loaded = sys.modules.get(name)
    if loaded is not None and getattr(loaded, "__file__", None) == str(path):
        return loaded
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        msg = f"cannot load {path} as a module"
        raise ImportError(msg)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module
