"""Helpers for tests that migrate a small package `pkg` written into a temporary folder:
write it, migrate a copy with the CLI, and import either version fresh; `differential`
runs its `pkg/main.py` before and after and returns both outputs; `leaf_lists` compares
trees by their leaves' values. The `root` fixture (tests/migrate/conftest.py) gives each
test its folder and forgets `pkg` afterwards."""

from __future__ import annotations

import contextlib
import importlib
import io
import json
import shutil
import sys
import textwrap
from pathlib import Path
from types import ModuleType

import jax
import numpy as np

from treeclass.migrate._cli import main


def forget_pkg() -> None:
    """Drops `pkg` and its modules from `sys.modules` (before and after share the name)."""
    for key in [k for k in sys.modules if k == "pkg" or k.startswith("pkg.")]:
        del sys.modules[key]


def leaf_lists(tree: object) -> list[list[float]]:
    """The leaves of `tree` as nested Python lists: equal when the values are."""
    return [np.asarray(x).tolist() for x in jax.tree.leaves(tree)]


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


def output(folder: Path, name: str = "pkg.main") -> str:
    """What importing module `name` of the `pkg` under `folder` prints; an exception
    ends the output with its type (the message may name a path or an address)."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        try:
            import_fresh(folder, name)
        except Exception as e:  # noqa: BLE001 - the behaviour compared
            print(f"raised {type(e).__name__}")
    forget_pkg()
    return out.getvalue()


def differential(root: Path, files: dict[str, str], *extra: str) -> tuple[dict[str, dict[str, str]], str, str]:
    """Migrates the package `files` (with a `pkg/main.py` that prints) and returns the
    report per class and what `pkg.main` printed before and after."""
    reports = migrate_package(root, files, *extra)
    return reports, output(root / "before"), output(root / "after")
