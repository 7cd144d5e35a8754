"""The documentation site builds: `mkdocs build --strict`, as `mkdocs.yml` configures it.

Strict fails on any warning, and mkdocs.yml turns the checks up to warnings: a broken
link or anchor, a page missing from the nav, a docstring mkdocstrings cannot render.
Links from the docs to files outside docs/ are checked by the site's own hook
(docs/_ext/repo_files.py). The build takes a few seconds; the code blocks themselves
run in tests/docs/test_docs.py.
"""

from __future__ import annotations

import html
import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

import treeclass

pytestmark = pytest.mark.newest_jax  # not run on the jax floor (.ci/run)
ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
MAX_FIGURE_BYTES = 200_000


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    missing = [
        m for m in ("mkdocs", "material", "mkdocstrings") if importlib.util.find_spec(m) is None
    ]
    if missing:
        pytest.skip(
            f"{', '.join(missing)} not installed (the 'docs' and 'test' extras install them)"
        )
    site = tmp_path_factory.mktemp("site") / "site"
    result = subprocess.run(  # our own mkdocs.yml, built with this interpreter
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(site)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        # Material prints a banner about MkDocs 2.0 on every build; it is not ours to act on.
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    return site


def test_site_builds_strict(site: Path) -> None:
    api = (site / "api" / "index.html").read_text(encoding="utf-8")
    for name in treeclass.__all__:
        assert f'id="treeclass.{name}"' in api, f"treeclass.{name} is not rendered on the API page"
    # The hook copied the repository files the docs link to.
    assert (site / "repo" / "benchmarks" / "RESULTS" / "index.html").is_file()
    assert (site / "repo" / "examples" / "pln.py").is_file()


def _signatures(api: str, name: str) -> list[str]:
    """The signature code blocks of `treeclass.<name>`'s entry, as text."""
    start = api.index(f'id="treeclass.{name}"')
    end = api.find('<h2 id="treeclass.', start + 1)
    entry = api[start : end if end > 0 else len(api)]
    blocks = re.findall(r'class="doc-signature[^"]*">(.*?)</code></pre>', entry, re.DOTALL)
    return [html.unescape(re.sub(r"<[^>]+>", "", block)) for block in blocks]


@pytest.mark.parametrize("name", ["jit", "grad", "field", "static", "replace_at", "treeclass"])
def test_api_page_shows_one_formatted_signature(site: Path, name: str) -> None:
    # One signature, the implementation's (mkdocs.yml: show_overloads: false), with a
    # parameter per line as ruff formats it (the `docs` extra installs ruff; without a
    # formatter the signature is one long line), and none of the overloads' ParamSpecs.
    api = (site / "api" / "index.html").read_text(encoding="utf-8")
    signatures = _signatures(api, name)
    assert len(signatures) == 1, signatures
    (signature,) = signatures
    assert signature.startswith(f"{name}(\n    "), signature
    assert "_P" not in signature, signature


def test_api_page_lists_every_public_name() -> None:
    documented = re.findall(
        r"^::: treeclass\.(\w+)\s*$", (DOCS / "api.md").read_text(), re.MULTILINE
    )
    assert sorted(documented) == sorted(treeclass.__all__)
    assert len(documented) == len(set(documented)), "a name is documented twice"


def test_figures_are_small_and_shown() -> None:
    pages = "\n".join(p.read_text(encoding="utf-8") for p in DOCS.rglob("*.md"))
    figures = sorted(DOCS.rglob("*.png"))
    assert figures, "docs/img/ holds the examples' plots"
    for png in figures:
        size = png.stat().st_size
        assert size < MAX_FIGURE_BYTES, f"{png.relative_to(ROOT)} is {size} bytes"
        assert f"({png.relative_to(DOCS).as_posix()})" in pages, f"no page shows {png.name}"


def _code_blocks(page: str) -> list[tuple[bool, str]]:
    """The code blocks of a built page, in order: (is an output block, text)."""
    blocks = re.findall(
        r'<div class="highlight">(<span class="filename">[^<]*</span>)?<pre[^>]*>(.*?)</pre>',
        page,
        re.DOTALL,
    )
    return [
        ("Output" in title, html.unescape(re.sub(r"<[^>]+>", "", body))) for title, body in blocks
    ]


def test_code_blocks_show_code_as_written_and_output_as_output(site: Path) -> None:
    # The copy button gives code as users write it (no `>>>`/`...` prompts,
    # no output lines, no doctest directives); the output is shown in a block of its own.
    pages = sorted(site.rglob("*.html"))
    outputs = 0
    for page in pages:
        for is_output, text in _code_blocks(page.read_text(encoding="utf-8")):
            where = f"{page.relative_to(site)}: {text[:200]!r}"
            if not is_output:
                assert ">>> " not in text, where
                assert not re.search(r"^\.\.\. ", text, re.MULTILINE), where
            assert "doctest:" not in text, where
            outputs += is_output
    assert outputs > 100
    # A page's block and its output, and a docstring's on the API page.
    quickstart = _code_blocks((site / "quickstart" / "index.html").read_text(encoding="utf-8"))
    assert (False, "model(jnp.ones(3)).shape\n") in quickstart
    assert quickstart[quickstart.index((False, "model(jnp.ones(3)).shape\n")) + 1] == (
        True,
        "(2,)\n",
    )
    api = _code_blocks((site / "api" / "index.html").read_text(encoding="utf-8"))
    assert (True, "Linear(w=f32[4,3], act='relu')\n") in api


def test_doctest_blocks_split_into_code_and_output() -> None:
    # The rewrite itself, without a build: prompts and directives go, outputs get their
    # own block, a blank line between examples stays, an indented block stays indented.
    pytest.importorskip("griffe")
    spec = importlib.util.spec_from_file_location(
        "doctest_fences", DOCS / "_ext" / "doctest_fences.py"
    )
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    page = (
        "Text.\n\n"
        "  ```python requires=optax\n"
        "  >>> def f(x):  # doctest: +SKIP\n"
        "  ...     return x\n"
        "\n"
        "  >>> f(1)\n"
        "  1\n"
        "  >>> print('a\\n')\n"
        "  a\n"
        "  <BLANKLINE>\n"
        "  ```\n"
        "```python\nx = 1\n```\n"
    )
    assert module.split_doctests(page) == (
        "Text.\n\n"
        "  ```python requires=optax\n"
        "  def f(x):\n"
        "      return x\n"
        "\n"
        "  f(1)\n"
        "  ```\n"
        "\n"
        '  ```text title="Output"\n'
        "  1\n"
        "  ```\n"
        "\n"
        "  ```python requires=optax\n"
        "  print('a\\n')\n"
        "  ```\n"
        "\n"
        '  ```text title="Output"\n'
        "  a\n"
        "\n"
        "  ```\n"
        "```python\nx = 1\n```\n"
    )
