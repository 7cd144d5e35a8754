"""The documentation's Python blocks, as the docs tests find them: the pages (README.md and
docs/*.md), the fenced-block pattern, and which blocks run (tests/docs/test_docs.py runs them,
tests/docs/test_docs_typing.py type-checks the same blocks)."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

ROOT = Path(__file__).parents[1]
DOC_FILES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]

# A fenced block: ```python (or py/pycon) ... ```. The info string may carry `notest`
# for an illustration that is not meant to run (```python notest), or
# `requires=module`; GitHub highlights it from the first word only, and the site's
# hook (docs/_ext/repo_files.py) drops the other words.
FENCE = re.compile(r"^```(?P<info>[^\n`]*)\n(?P<body>.*?)^```[ \t]*$", re.MULTILINE | re.DOTALL)
_PYTHON = {"python", "py", "pycon"}


def runs(words: list[str]) -> bool:
    """Whether a fenced block with these info words runs (and type-checks): Python, not
    `notest`, and every `requires=` library installed."""
    if not words or words[0] not in _PYTHON or "notest" in words:
        return False
    required = [w.removeprefix("requires=") for w in words if w.startswith("requires=")]
    return all(importlib.util.find_spec(name) is not None for name in required)
