"""Helpers for tests that migrate a small package `pkg` written into a temporary folder:
write it, migrate a copy with the CLI, and import either version fresh."""

from __future__ import annotations

import importlib
import io
import json
import shutil
import sys
import textwrap
from pathlib import Path
from types import ModuleType

from treeclass.migrate._cli import main


def forget_pkg() -> None:
    """Drops `pkg` and its modules from `sys.modules` (before and after share the name)."""
    for key in [k for k in sys.modules if k == "pkg" or k.startswith("pkg.")]:
        del sys.modules[key]


def migrate_package(root: Path, files: dict[str, str], *extra: str) -> dict[str, dict[str, str]]:
    """Writes `files` under `root/before`, migrates a copy in `root/after` (`--write`) and
    returns the `--json` report per class."""
    before, after = root / "before", root / "after"
    for name, text in files.items():
        path = before / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text), encoding="utf-8")
    shutil.copytree(before, after)
    out, err = io.StringIO(), io.StringIO()
    code = main(["--json", "--write", *extra, str(after / "pkg")], out=out, err=err)
    assert code == 0, err.getvalue()
    reports = [json.loads(line) for line in out.getvalue().splitlines() if line.startswith("{")]
    return {r["class"]: r for r in reports}


def import_fresh(folder: Path, name: str) -> ModuleType:
    """Imports module `name` of the `pkg` under `folder`, forgetting any earlier `pkg`."""
    forget_pkg()
    sys.path.insert(0, str(folder))
    try:
        return importlib.import_module(name)
    finally:
        sys.path.remove(str(folder))
