"""MkDocs hook: links from the docs to repository files outside docs/ work on the site.

The pages are written to read well on GitHub too, so they link to the code with
relative paths (`[examples/pln.py](../../examples/pln.py)`). MkDocs knows only docs/:
it reports such a link as not found, which fails `mkdocs build --strict`, and it
cannot check that the file exists. Setting MkDocs' link validation to `info` would
hide broken links between pages as well. Instead, this hook

1. finds every relative link (outside code) whose target lies outside docs/, and
   fails the build if the target does not exist in the repository;
2. copies the target into the site under `repo/`, keeping its path: a `.md` file
   becomes a page (its own links are followed in turn, so RESULTS.md or a package
   README can link onwards), any other file is copied as it is, and a directory
   stands for its README.md;
3. rewrites the link to point at the copy.

It also drops the words after the language in a Python fence (```` ```python notest ````,
```` ```python requires=optax ````): they tell `tests/docs/test_docs.py` whether to run the
block, and the Markdown renderer would take them for options.

Loaded by `mkdocs.yml` (`hooks:`), from this file: the site needs no plugin package.
"""

from __future__ import annotations

import posixpath
import re
from pathlib import Path
from typing import Any

from mkdocs.config.defaults import MkDocsConfig
from mkdocs.exceptions import PluginError
from mkdocs.structure.files import File, Files
from mkdocs.structure.pages import Page

MIRROR = "repo"  # where copies of repository files go in the site

# A fenced code block, or an inline code span: no links are read inside them.
_CODE = re.compile(r"^(?P<fence>```+|~~~+).*?^(?P=fence)[ \t]*$|`[^`\n]+`", re.MULTILINE | re.DOTALL)
# The target of an inline link or image, `[text](target)`, without a title.
_LINK = re.compile(r"(?<=\]\()(?P<path>[^)\s#?]+)(?P<rest>[^)\s]*)(?=[)\s])")
_TEST_WORDS = re.compile(r"^(```+[ \t]*(?:python|py|pycon))[ \t]+[^\n`]*$", re.MULTILINE)

# Each page's path in the repository (docs pages and copies), by its site path.
_REPO_PATHS: dict[str, str] = {}


def _root(config: MkDocsConfig) -> Path:
    return Path(config.config_file_path).resolve().parent


def _docs_prefix(config: MkDocsConfig) -> str:
    return Path(config.docs_dir).resolve().relative_to(_root(config)).as_posix()


def _site_path(repo_path: str, docs: str) -> str:
    """Where the repository file `repo_path` lives in the site."""
    if repo_path.startswith(docs + "/"):
        return repo_path[len(docs) + 1 :]
    return f"{MIRROR}/{repo_path}"


def _is_relative(path: str) -> bool:
    return not (re.match(r"^[A-Za-z][A-Za-z0-9+.-]*:", path) or path.startswith("/"))


def _outside_links(markdown: str) -> list[re.Match[str]]:
    """The relative link targets in `markdown`, outside code."""
    code = [m.span() for m in _CODE.finditer(markdown)]
    return [
        m
        for m in _LINK.finditer(markdown)
        if _is_relative(m["path"]) and not any(a <= m.start() < b for a, b in code)
    ]


def _target(page_repo_path: str, link: str, root: Path, where: str) -> str:
    """The repository path a link from `page_repo_path` points at (a directory
    resolved to its README.md); a `PluginError` if it does not exist."""
    target = posixpath.normpath(posixpath.join(posixpath.dirname(page_repo_path), link))
    if target == ".." or target.startswith("../"):
        msg = f"{where}: the link {link!r} points outside the repository."
        raise PluginError(msg)
    path = root / target
    if path.is_dir():
        if not (path / "README.md").is_file():
            msg = f"{where}: the link {link!r} is a directory without a README.md to show."
            raise PluginError(msg)
        target = posixpath.join(target, "README.md")
    elif not path.is_file():
        msg = f"{where}: the link {link!r} points to {target}, which does not exist."
        raise PluginError(msg)
    return target


def on_files(files: Files, config: MkDocsConfig) -> Files:
    root, docs = _root(config), _docs_prefix(config)
    _REPO_PATHS.clear()
    queue = [(f.src_uri, f"{docs}/{f.src_uri}") for f in files.documentation_pages()]
    for site, repo in queue:
        _REPO_PATHS[site] = repo
    while queue:
        site, repo = queue.pop()
        markdown = (root / repo).read_text(encoding="utf-8")
        for match in _outside_links(markdown):
            target = _target(repo, match["path"], root, repo)
            target_site = _site_path(target, docs)
            if target.startswith(docs + "/") or files.get_file_from_path(target_site):
                continue  # a docs file (MkDocs checks it), or copied already
            files.append(File.generated(config, target_site, abs_src_path=str(root / target)))
            if target.endswith(".md"):
                _REPO_PATHS[target_site] = target
                queue.append((target_site, target))
    return files


def on_page_markdown(markdown: str, page: Page, config: MkDocsConfig, **kwargs: Any) -> str:
    root, docs = _root(config), _docs_prefix(config)
    repo = _REPO_PATHS.get(page.file.src_uri)
    if repo is not None:
        here = posixpath.dirname(page.file.src_uri)
        # Replace from the end, so the earlier matches' offsets stay valid.
        for match in reversed(_outside_links(markdown)):
            target = _target(repo, match["path"], root, repo)
            if target.startswith(docs + "/") and repo.startswith(docs + "/"):
                continue  # a link between docs pages: MkDocs resolves it
            new = posixpath.relpath(_site_path(target, docs), here or ".")
            markdown = markdown[: match.start()] + new + match["rest"] + markdown[match.end() :]
    return _TEST_WORDS.sub(r"\1", markdown)
