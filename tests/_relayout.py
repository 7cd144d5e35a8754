"""Moves test files to the folders tests/_layout.txt names, and every reference with them.

    python tests/_relayout.py            # apply, from the repository root
    python tests/_relayout.py --dry-run  # only print what it would do

For each `old -> new` line whose old path still exists: `git mv old new`; in the moved
file, `Path(__file__).parent.parent` (the repository root, from tests/) becomes
`Path(__file__).parents[N]` for its new depth; then every tracked text file that names
`old` names `new` (CHANGELOG.md excepted: its entries are history; and the
mapping itself). Lines of a moved
file that still read `__file__` are printed, to be checked by hand: a path next to the
test file may not have moved with it. Not collected by pytest (no `test_` prefix).
"""

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LAYOUT = ROOT / "tests" / "_layout.txt"
TEXT_SUFFIXES = {".py", ".md", ".toml", ".txt", ".yml", ".yaml", ".cfg", ".ini", ""}
HISTORY = {"CHANGELOG.md"}


def mapping() -> list[tuple[str, str]]:
    """The (old, new) pairs of tests/_layout.txt, in order."""
    pairs = []
    for line in LAYOUT.read_text(encoding="utf-8").splitlines():
        if line.strip() and not line.startswith("#"):
            old, new = (part.strip() for part in line.split("->"))
            pairs.append((old, new))
    return pairs


def tracked_text_files() -> list[Path]:
    names = subprocess.run(
        ["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout.split()
    return [
        ROOT / n
        for n in names
        if Path(n).suffix in TEXT_SUFFIXES and n not in HISTORY and ROOT / n != LAYOUT
    ]


def fix_depth(path: Path, new: str) -> None:
    """The moved file's way to the repository root, for its new depth."""
    depth = len(Path(new).parts) - 1  # tests/core/test_x.py: the root is parents[2]
    text = path.read_text(encoding="utf-8")
    pattern = r"(Path\(__file__\)(?:\.resolve\(\))?)\.parent\.parent\b"
    text = re.sub(pattern, rf"\1.parents[{depth}]", text)
    path.write_text(text, encoding="utf-8")
    for number, line in enumerate(text.splitlines(), 1):
        if "__file__" in line and f"parents[{depth}]" not in line:
            print(f"  check {new}:{number}: {line.strip()}")


def main(dry_run: bool) -> None:
    moves = [(old, new) for old, new in mapping() if (ROOT / old).exists()]
    for old, new in moves:
        print(f"{old} -> {new}")
        if dry_run:
            continue
        (ROOT / new).parent.mkdir(parents=True, exist_ok=True)
        subprocess.run(["git", "mv", old, new], cwd=ROOT, check=True)
        fix_depth(ROOT / new, new)
    if dry_run or not moves:
        return
    # A path is replaced only where it stands whole: not inside a longer path.
    patterns = [(re.compile(rf"(?<![\w/.]){re.escape(old)}(?![\w])"), new) for old, new in moves]
    for path in tracked_text_files():
        if not path.is_file():
            continue
        text = path.read_text(encoding="utf-8")
        changed = text
        for pattern, new in patterns:
            changed = pattern.sub(new, changed)
        if changed != text:
            path.write_text(changed, encoding="utf-8")
            print(f"  references updated: {path.relative_to(ROOT)}")


if __name__ == "__main__":
    main(dry_run="--dry-run" in sys.argv[1:])
