"""Doctest examples shown as users write them: code blocks without prompts, each
output in a block of its own under the code.

treeclass writes its examples as doctests (`>>>` lines, then the expected output),
in the pages' ```` ```python ```` blocks and in docstrings, and `tests/docs/test_docs.py`
runs them from that source. A reader should see, and the copy button give, the code as
a user types it: no `>>>` / `...` prompts, no output lines, no `# doctest:` directives.
So the site shows each doctest block as plain code blocks, each followed by the output
it printed in an "Output" block (as the JAX docs show executed cells); the example of
`split_doctests` below shows one block rewritten.

Two entry points, one rewrite (`split_doctests`):

- an MkDocs hook (`mkdocs.yml`, `hooks:`) rewrites the blocks of every page;
- a griffe extension (`mkdocs.yml`, mkdocstrings' `extensions:`) does the same for
  docstrings on the API page, after wrapping each run of doctest lines in a fence
  (`fence_doctests`): Markdown has no doctest syntax, so rendered as they are, `>>> x`
  lines would become nested block quotes.

Loaded from this file by both, so the site needs no extension package.
"""

from __future__ import annotations

import doctest
import re
import textwrap
from typing import Any

import griffe

_FENCE_CHARS = ("```", "~~~")
# A fenced code block in Python, possibly indented (in a list or an admonition).
_BLOCK = re.compile(
    r"^(?P<indent>[ \t]*)(?P<fence>```+|~~~+)[ \t]*(?P<lang>python|py|pycon)\b(?P<info>[^\n]*)\n"
    r"(?P<body>.*?)^(?P=indent)(?P=fence)[ \t]*$",
    re.MULTILINE | re.DOTALL,
)
_DIRECTIVE = re.compile(r"[ \t]*#\s*doctest:[^\n]*$", re.MULTILINE)
OUTPUT = 'text title="Output"'
"""The info string of an output block: Material shows the title above the block."""


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


def _blocks(body: str) -> list[tuple[str, str]]:
    """The doctest `body` as `(code, output)` pairs: the examples up to one that
    prints, their sources joined (directives dropped), and what it prints."""
    examples = doctest.DocTestParser().get_examples(body)
    pairs: list[tuple[str, str]] = []
    code: list[str] = []
    end = 0  # the line after the last example's output
    for example in examples:
        source = _DIRECTIVE.sub("", example.source)
        if code and example.lineno > end:
            code.append("\n")  # a blank line between examples stays one
        code.append(source)
        end = example.lineno + source.count("\n")
        if example.want:
            pairs.append(("".join(code), example.want.replace("<BLANKLINE>", "")))
            code = []
            end += example.want.count("\n")
    if code:
        pairs.append(("".join(code), ""))
    return pairs


def split_doctests(markdown: str) -> str:
    r"""Returns `markdown` with each Python block that holds doctest examples rewritten
    as plain code blocks, each followed by the output block of what it printed.

    Blocks without `>>>` are left as they are, and so is a block doctest cannot parse.

    >>> print(split_doctests("```python\n>>> x = 2  # doctest: +SKIP\n>>> x * 21\n42\n```"))
    ```python
    x = 2
    x * 21
    ```
    <BLANKLINE>
    ```text title="Output"
    42
    ```
    """

    def rewrite(match: re.Match[str]) -> str:
        indent, fence = match["indent"], match["fence"]
        body = textwrap.dedent(match["body"])
        if ">>>" not in body:
            return match[0]
        try:
            pairs = _blocks(body)
        except ValueError:  # not a doctest after all: shown as written
            return match[0]
        lang = "python" if match["lang"] == "pycon" else match["lang"]
        out = []
        for code, output in pairs:
            out.append(f"{fence}{lang}{match['info']}\n{code}{fence}")
            if output:
                out.append(f"{fence}{OUTPUT}\n{output}{fence}")
        return textwrap.indent("\n\n".join(out), indent)

    return _BLOCK.sub(rewrite, markdown)


def on_page_markdown(markdown: str, **kwargs: Any) -> str:
    """The MkDocs hook: every page's doctest blocks, as code and output blocks."""
    return split_doctests(markdown)


class DoctestFences(griffe.Extension):
    """Shows the doctest examples of every docstring griffe loads as code and output
    blocks."""

    def on_object(self, *, obj: griffe.Object, **kwargs: Any) -> None:
        if obj.docstring is not None:
            obj.docstring.value = split_doctests(fence_doctests(obj.docstring.value))
