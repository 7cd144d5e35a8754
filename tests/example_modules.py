"""Loading an example script as a module, for in-process tests (examples/ is not a
package, so it cannot be imported by name)."""

import contextlib
import importlib.util
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


@contextlib.contextmanager
def example_module(script: str, name: str | None = None, *also: str) -> Iterator[ModuleType]:
    """Runs `examples/<script>.py` as the module `name` (default: `script`) and yields
    it; afterwards removes it, and the modules named in `also` that it registered,
    from `sys.modules`."""
    name = name or script
    spec = importlib.util.spec_from_file_location(name, EXAMPLES / f"{script}.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    # Registered before running, as an import would: dataclasses and treeclass resolve
    # the module's string annotations through sys.modules.
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
        yield module
    finally:
        for registered in (name, *also):
            sys.modules.pop(registered, None)
