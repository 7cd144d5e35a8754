"""A module's source split into lines once, so that the code of a node costs time in
the node's length, not the file's: `ast.get_source_segment` splits the whole source at
every call, which made a run quadratic in the size of a file (one call per attribute
assignment: a 6,000-line file took 100 s)."""

from __future__ import annotations

import ast
import re

__all__ = ["LINE", "Text"]

# ast counts lines at \r\n, \r and \n only (str.splitlines also splits at \f, \v, ...).
LINE = re.compile(r"[^\r\n]*(?:\r\n|\r|\n)|[^\r\n]+$")


class Text:
    """The source of one module and the code of its nodes."""

    def __init__(self, source: str) -> None:
        self.source = source
        self._lines: list[bytes] | None = None

    def code(self, node: ast.AST) -> str:
        """The source text of `node`, as written (`ast.unparse` where it has no position)."""
        end_line, end_col = getattr(node, "end_lineno", None), getattr(node, "end_col_offset", None)
        line, col = getattr(node, "lineno", None), getattr(node, "col_offset", None)
        if line is None or col is None or end_line is None or end_col is None:
            return ast.unparse(node)
        if self._lines is None:  # the offsets are in UTF-8 bytes
            self._lines = [m.encode("utf-8") for m in LINE.findall(self.source)]
        lines = self._lines[line - 1 : end_line]
        if not lines:
            return ast.unparse(node)
        if len(lines) == 1:
            return lines[0][col:end_col].decode("utf-8")
        return b"".join([lines[0][col:], *lines[1:-1], lines[-1][:end_col]]).decode("utf-8")

    def short(self, node: ast.AST, limit: int = 60) -> str:
        """The code of `node` on one line, cut at `limit` characters."""
        code = " ".join(self.code(node).split())
        return code if len(code) <= limit else code[: limit - 3] + "..."
