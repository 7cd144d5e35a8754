"""The command line: `python -m treeclass.migrate PATH...` / `treeclass-migrate`.

By default it prints a unified diff of every file it would change, then one line per
class found (`path:line: Class: converted` or `... refused: reason`), then the summary
`converted N, refused M`. `--write` rewrites the files in place, `--check` exits 1
when anything would change, `--json` prints one JSON object per class instead of the
diff and the class lines.

Exit status: 0, or 1 under `--check` when a file would change, or 2 when an input could
not be used (a missing path, a file that is not UTF-8 or does not parse, a file that
cannot be written). A missing path stops the run before anything is read or written;
a file that cannot be read or parsed is reported and the others are still processed.
"""

from __future__ import annotations

import argparse
import difflib
import json
import os
import stat
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TextIO

from treeclass.migrate import _engine

__all__ = ["main"]

_EPILOG = """\
examples:
  python -m treeclass.migrate src/               # show the diff, change nothing
  python -m treeclass.migrate --write src/       # rewrite the files in place
  python -m treeclass.migrate --check src/       # CI: exit 1 if anything would change
  python -m treeclass.migrate --json src/ | jq . # one object per class found

Run it on the whole package folder: the files of one run are one program (imports,
relative imports, aliases and re-exports are followed), so a class converts with its
bases and subclasses in other modules. Every conversion says what changes for users
(frozen, statics checked at construction, ...); every refusal gives all its reasons and
what to do by hand: docs/migration.md"""


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m treeclass.migrate",
        description="Rewrite hand-written JAX pytree classes (register_pytree_node_class, "
        "register_pytree_node, register_dataclass, flax.struct, chex.dataclass) into "
        "treeclasses; refuse, with the reason, whatever would change behaviour.",
        epilog=_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "paths",
        nargs="+",
        type=Path,
        metavar="PATH",
        help="files or directories (searched for *.py): give the whole package",
    )
    parser.add_argument(
        "--form",
        choices=("base", "decorator"),
        default="base",
        help="base: class X(tc.TreeClass) (the default); decorator: @tc.treeclass",
    )
    parser.add_argument("--write", action="store_true", help="rewrite the files in place")
    parser.add_argument("--check", action="store_true", help="exit 1 when any file would change")
    parser.add_argument(
        "--json", action="store_true", help="one JSON object per class found, no diff"
    )
    parser.add_argument(
        "--namedtuples",
        action="store_true",
        help="convert NamedTuple classes too, keeping unpacking, indexing, len and _replace "
        "(refused where code needs a real tuple: isinstance(x, tuple), == a tuple, +, hash)",
    )
    return parser


def _writable(path: Path) -> bool:
    # os.access says yes to root for a read-only file; the mode bits say what the
    # user asked for.
    mode = path.stat().st_mode
    return os.access(path, os.W_OK) and bool(mode & (stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH))


def _write(file: _engine.File, errors: list[str]) -> None:
    path = Path(file.path)
    assert file.new_source is not None
    if not _writable(path):
        errors.append(f"{path}: read-only; left unchanged")
        return
    try:
        with path.open("w", encoding=file.encoding, newline="") as f:
            f.write(file.new_source)
    except OSError as e:
        errors.append(f"{path}: cannot be written ({e.strerror}); left unchanged")


def _diff(file: _engine.File) -> str:
    assert file.new_source is not None
    lines = difflib.unified_diff(
        file.source.splitlines(keepends=True),
        file.new_source.splitlines(keepends=True),
        fromfile=file.path if Path(file.path).is_absolute() else f"a/{file.path}",
        tofile=file.path if Path(file.path).is_absolute() else f"b/{file.path}",
    )
    return "".join(
        line if line.endswith("\n") else line + "\n\\ No newline at end of file\n" for line in lines
    )


def main(
    argv: Sequence[str] | None = None, out: TextIO | None = None, err: TextIO | None = None
) -> int:
    """Runs the command line; returns the exit status."""
    out = sys.stdout if out is None else out
    err = sys.stderr if err is None else err
    args = _parser().parse_args(argv)
    _, missing = _engine.source_files(args.paths)
    if missing:
        for line in missing:
            print(f"treeclass.migrate: {line}; nothing was changed", file=err)
        return 2
    result = _engine.run(args.paths, form=args.form, namedtuples=args.namedtuples)
    errors = list(result.errors)
    changed = [f for f in result.files if f.new_source is not None]
    if args.json:
        for report in result.reports:
            print(json.dumps(report.as_json()), file=out)
    else:
        for file in changed:
            print(_diff(file), end="", file=out)
        for report in result.reports:
            detail = f": {report.reason}" if report.reason else ""
            print(f"{report.path}:{report.line}: {report.cls}: {report.status}{detail}", file=out)
    if args.write:
        for file in changed:
            _write(file, errors)
    for line in errors:
        print(f"treeclass.migrate: {line}", file=err)
    for hint in result.hints:  # on stderr with --json: stdout stays one object per class
        print(f"treeclass.migrate: {hint}", file=err if args.json else out)
    converted = sum(r.status == "converted" for r in result.reports)
    print(f"converted {converted}, refused {len(result.reports) - converted}", file=out)
    if errors:
        return 2
    return 1 if args.check and changed else 0
