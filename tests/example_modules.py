"""Running the example scripts as users run them: loaded as a module, for in-process
tests (examples/ is not a package, so it cannot be imported by name), or as a script in
a subprocess.

Either way under JAX's default settings: the in-process tests ask for conftest.py's
`jax_defaults` fixture, and `run_example` leaves the suite's strict environment
variables out. Warnings stay errors (`-W error`, through `strict_python.py`).
"""

import contextlib
import importlib.util
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
# `python -W error`, except for other libraries' own deprecations (strict_python.py).
STRICT = (sys.executable, str(Path(__file__).resolve().parent / "strict_python.py"))

# JAX reads its settings from these too; a developer who exports the strict ones to
# run the library's tests must not have them applied to the examples.
STRICT_VARIABLES = ("JAX_NUMPY_RANK_PROMOTION", "JAX_NUMPY_DTYPE_PROMOTION")


def example_env() -> dict[str, str]:
    """This process's environment without the variables that make JAX strict."""
    return {k: v for k, v in os.environ.items() if k not in STRICT_VARIABLES}


def run_example(script: Path, *args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """Runs `script *args` as `python -W error` would (`STRICT`) in `cwd`, under JAX's
    default settings."""
    # cwd is a scratch folder: a script must not depend on being run from the root.
    return subprocess.run(  # our own scripts, run with this interpreter
        [*STRICT, str(script), *args],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=cwd,
        env=example_env(),
        check=False,
    )


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
