"""Griffe extension for the API page: docstring examples become code blocks.

treeclass docstrings write their examples as doctests (`>>>` lines, then the expected
output), which `tests/test_docs.py` runs. Markdown has no doctest syntax: rendered as
they are, `>>> x` lines become nested block quotes. This extension wraps each run of
doctest lines (from a `>>>` line to the next blank line, as doctest reads them) in a
```` ```pycon ```` fence before mkdocstrings renders the docstring.

Loaded by `mkdocs.yml` (mkdocstrings' python handler, `extensions:`), from this file,
so the site needs no extension package.
"""

from __future__ import annotations

from typing import Any

import griffe

_FENCE_CHARS = ("```", "~~~")


def fence_doctests(text: str) -> str:
    r"""Returns `text` with each doctest run wrapped in a ```` ```pycon ```` fence.

    >>> fence_doctests("Doubles.\n\n>>> 2 * 2\n4\n\nDone.").splitlines()
    ['Doubles.', '', '```pycon', '>>> 2 * 2', '4', '```', '', 'Done.']
    """
    out: list[str] = []
    in_fence = False  # inside a fence the author wrote: leave it alone
    in_doctest = False
    indent = ""  # the indentation of the doctest's first line, for its fence
    for line in text.splitlines():
        stripped = line.strip()
        if in_doctest and not stripped:
            out.append(f"{indent}```")
            in_doctest = False
        elif not in_doctest and not in_fence and stripped.startswith(">>>"):
            indent = line[: len(line) - len(line.lstrip())]
            out.append(f"{indent}```pycon")
            in_doctest = True
        elif not in_doctest and stripped.startswith(_FENCE_CHARS):
            in_fence = not in_fence
        out.append(line)
    if in_doctest:
        out.append(f"{indent}```")
    return "\n".join(out)


class DoctestFences(griffe.Extension):
    """Fences the doctest examples of every docstring griffe loads."""

    def on_object(self, *, obj: griffe.Object, **kwargs: Any) -> None:
        if obj.docstring is not None:
            obj.docstring.value = fence_doctests(obj.docstring.value)
