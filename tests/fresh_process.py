"""Code run in a new Python process, for what this one cannot show: which modules an
import loads, classes created before a library is first imported, another hash seed.

`run_fresh` runs `python -c CODE` with this interpreter; treeclass is imported from this
checkout (the suite does not install it), and the folders passed after it (tests/ for
the shared models of checkpoints.py, a temporary folder of generated modules) come next
on PYTHONPATH."""

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TESTS = ROOT / "tests"


def run_fresh(code: str, *paths: Path, env: dict[str, str] | None = None) -> str:
    """What `code` prints in a new process; a non-zero exit fails the test with its
    stderr. `env` adds variables to this process's environment (PYTHONHASHSEED)."""
    where = os.pathsep.join([str(ROOT), *(str(p) for p in paths)])
    done = subprocess.run(  # our own code, run with this interpreter
        [sys.executable, "-c", code],
        env={**os.environ, **(env or {}), "PYTHONPATH": where},
        check=False,
        timeout=120,
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout
