"""`python -m treeclass.migrate`: output (diff, class lines, --json, the summary),
--write, --check, --form decorator, imports, comments and formatting, and bad input
(a missing path, a file that does not parse or is not UTF-8, a read-only file)."""

from __future__ import annotations

import io
import json
import stat
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

import jax
import jax.numpy as jnp
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from migrate_corpus import load

pytest.importorskip("libcst")

from treeclass import migrate
from treeclass.migrate._cli import main

SIMPLE = textwrap.dedent(
    '''\
    """A module."""

    import jax.numpy as jnp
    from jax.tree_util import register_pytree_node_class


    # a layer  (a comment above the class stays)
    @register_pytree_node_class
    class Linear:
        """A linear layer."""

        def __init__(self, w, b, act="relu"):
            self.w = w
            self.b = b
            self.act = act

        def tree_flatten(self):
            return (self.w, self.b), self.act

        @classmethod
        def tree_unflatten(cls, act, children):
            return cls(*children, act=act)

        def __call__(self, x):
            return x @ self.w + self.b  # the forward pass


    def   untouched( x ) :   # odd formatting, kept
        return x
    '''
)

REFUSED = textwrap.dedent(
    """\
    from jax.tree_util import register_pytree_node_class


    @register_pytree_node_class
    class Steps:
        def __init__(self, x, n):
            self.x, self.n = x, n

        def tree_flatten(self):
            if isinstance(self.n, int):
                return (self.x,), self.n
            return (self.x, self.n), None

        @classmethod
        def tree_unflatten(cls, aux, children):
            return cls(children[0], aux)
    """
)


def run(*args: str | Path) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main([str(a) for a in args], out=out, err=err)
    return code, out.getvalue(), err.getvalue()


@pytest.fixture
def simple(tmp_path: Path) -> Path:
    path = tmp_path / "model.py"
    path.write_text(SIMPLE, encoding="utf-8")
    return path


def test_diff_by_default_and_nothing_written(simple: Path):
    code, out, _ = run(simple)
    assert code == 0
    assert simple.read_text(encoding="utf-8") == SIMPLE
    assert out.startswith(f"--- {simple}\n+++ {simple}\n@@ ")
    assert "-@register_pytree_node_class\n-class Linear:\n+class Linear(tc.TreeClass, eq=False):\n" in out
    assert f"{simple}:9: Linear: converted: instances are frozen now" in out
    assert "key paths change from flat indices to field names" in out
    assert out.endswith("converted 1, refused 0\n")


def test_write_rewrites_in_place(simple: Path):
    code, _, _ = run("--write", simple)
    assert code == 0
    new = simple.read_text(encoding="utf-8")
    assert new == textwrap.dedent(
        '''\
        """A module."""

        from typing import Any

        import jax.numpy as jnp
        import treeclass as tc


        # a layer  (a comment above the class stays)
        class Linear(tc.TreeClass, eq=False):
            """A linear layer."""

            w: Any
            b: Any
            act: tc.Static[Any] = "relu"

            def __call__(self, x):
                return x @ self.w + self.b  # the forward pass


        def   untouched( x ) :   # odd formatting, kept
            return x
        '''
    )
    # ... and a second run changes nothing.
    assert run("--check", simple)[0] == 0
    assert run("--write", simple)[0] == 0
    assert simple.read_text(encoding="utf-8") == new


def test_converted_module_behaves_as_before(simple: Path, tmp_path: Path):
    old = load(simple, "cli_before")
    run("--write", simple)
    new = load(simple, "cli_after")
    a, b = old.Linear(jnp.ones((3, 2)), jnp.zeros(2)), new.Linear(jnp.ones((3, 2)), jnp.zeros(2))
    migrate.check(a, b)
    x = jnp.arange(3.0)
    assert jax.jit(lambda m: m(x))(a).tolist() == jax.jit(lambda m: m(x))(b).tolist()


def test_check_exit_codes(simple: Path, tmp_path: Path):
    assert run("--check", simple)[0] == 1  # would change
    refused = tmp_path / "refused.py"
    refused.write_text(REFUSED, encoding="utf-8")
    code, out, _ = run("--check", refused)
    assert code == 0  # a refusal changes nothing
    assert out.endswith("converted 0, refused 1\n")
    assert refused.read_text(encoding="utf-8") == REFUSED


def test_json_one_object_per_class(simple: Path, tmp_path: Path):
    refused = tmp_path / "refused.py"
    refused.write_text(REFUSED, encoding="utf-8")
    code, out, _ = run("--json", simple, refused)
    assert code == 0
    *lines, summary = out.splitlines()
    objects = [json.loads(line) for line in lines]
    assert [set(o) for o in objects] == [{"path", "line", "class", "status", "reason"}] * 2
    assert objects[0] == {
        "path": str(simple),
        "line": 9,
        "class": "Linear",
        "status": "converted",
        "reason": objects[0]["reason"],
    }
    assert "[<flat index 0>] -> .w" in objects[0]["reason"]
    assert objects[1]["class"] == "Steps"
    assert objects[1]["status"] == "refused"
    assert objects[1]["reason"].startswith("its structure depends on values: an `if` in tree_flatten (line 10)")
    assert summary == "converted 1, refused 1"


def test_decorator_form(simple: Path):
    old = load(simple, "cli_before_decorator")
    code, _, _ = run("--write", "--form", "decorator", simple)
    assert code == 0
    text = simple.read_text(encoding="utf-8")
    assert "@tc.treeclass(eq=False)\nclass Linear:\n" in text
    new = load(simple, "cli_after_decorator")
    migrate.check(old.Linear(jnp.ones(2), jnp.ones(2), "tanh"), new.Linear(jnp.ones(2), jnp.ones(2), "tanh"))


def test_directories_are_searched(tmp_path: Path):
    package = tmp_path / "pkg"
    (package / "sub").mkdir(parents=True)
    (package / "sub" / "model.py").write_text(SIMPLE, encoding="utf-8")
    (package / ".hidden").mkdir()
    (package / ".hidden" / "model.py").write_text(SIMPLE, encoding="utf-8")
    code, out, _ = run("--json", package)
    assert code == 0
    assert [json.loads(line)["path"] for line in out.splitlines()[:-1]] == [str(package / "sub" / "model.py")]


def test_imports_kept_where_still_used(tmp_path: Path):
    path = tmp_path / "two.py"
    path.write_text(SIMPLE + "\n\n" + REFUSED.split("\n\n\n", 1)[1], encoding="utf-8")
    run("--write", path)
    text = path.read_text(encoding="utf-8")
    assert "from jax.tree_util import register_pytree_node_class\n" in text  # Steps still uses it
    assert "import treeclass as tc\n" in text


def test_existing_treeclass_import_is_reused(tmp_path: Path):
    path = tmp_path / "m.py"
    path.write_text(SIMPLE.replace("import jax.numpy as jnp\n", "import jax.numpy as jnp\nimport treeclass\n"), encoding="utf-8")
    run("--write", path)
    text = path.read_text(encoding="utf-8")
    assert "class Linear(treeclass.TreeClass, eq=False):" in text
    assert "import treeclass as tc" not in text


# --- bad input: a clear message, nothing changed on disk ----------------------------------


def test_missing_path_changes_nothing(simple: Path, tmp_path: Path):
    code, out, err = run("--write", simple, tmp_path / "nope.py")
    assert code == 2
    assert err == f"treeclass.migrate: {tmp_path / 'nope.py'}: no such file or directory; nothing was changed\n"
    assert out == ""
    assert simple.read_text(encoding="utf-8") == SIMPLE


def test_file_that_does_not_parse_is_reported_others_processed(simple: Path, tmp_path: Path):
    broken = tmp_path / "broken.py"
    broken.write_text("def f(:\n    pass\n", encoding="utf-8")
    code, out, err = run("--write", broken, simple)
    assert code == 2
    assert err == f"treeclass.migrate: {broken}:1: does not parse (invalid syntax); left unchanged\n"
    assert out.endswith("converted 1, refused 0\n")
    assert broken.read_text(encoding="utf-8") == "def f(:\n    pass\n"
    assert "tc.TreeClass" in simple.read_text(encoding="utf-8")


def test_file_that_is_not_utf8_is_reported(simple: Path, tmp_path: Path):
    latin = tmp_path / "latin.py"
    latin.write_bytes(b"# caf\xe9\nx = 1\n")
    code, _, err = run("--write", latin, simple)
    assert code == 2
    assert err == f"treeclass.migrate: {latin}: not UTF-8 (invalid continuation byte at byte 5); left unchanged\n"
    assert latin.read_bytes() == b"# caf\xe9\nx = 1\n"


def test_read_only_file_is_not_written(simple: Path):
    simple.chmod(stat.S_IRUSR | stat.S_IRGRP)
    try:
        code, _, err = run("--write", simple)
    finally:
        simple.chmod(stat.S_IRUSR | stat.S_IWUSR)
    assert code == 2
    assert err == f"treeclass.migrate: {simple}: read-only; left unchanged\n"
    assert simple.read_text(encoding="utf-8") == SIMPLE


def test_crlf_line_endings_are_kept(tmp_path: Path):
    path = tmp_path / "dos.py"
    path.write_bytes(SIMPLE.replace("\n", "\r\n").encode())
    run("--write", path)
    data = path.read_bytes()
    assert b"class Linear(tc.TreeClass, eq=False):\r\n" in data
    assert b"\n" not in data.replace(b"\r\n", b"")


def test_module_and_console_script(simple: Path):
    result = subprocess.run(
        [sys.executable, "-m", "treeclass.migrate", "--check", str(simple)],
        capture_output=True, text=True, check=False,
    )
    assert result.returncode == 1
    assert result.stdout.endswith("converted 1, refused 0\n")
    script = Path(sys.executable).with_name("treeclass-migrate")
    if script.exists():  # installed with the package (pyproject's [project.scripts])
        help_text = subprocess.run([str(script), "--help"], capture_output=True, text=True, check=True).stdout
        assert "--namedtuples" in help_text


def test_core_imports_without_libcst():
    # `import treeclass` never loads the migration tool, and check() needs only jax.
    code = (
        "import sys; sys.modules['libcst'] = None\n"
        "import treeclass, treeclass.migrate\n"
        "assert 'treeclass.migrate._cli' not in sys.modules\n"
        "from treeclass.migrate import check\n"
        "import jax.numpy as jnp\n"
        "class A(treeclass.TreeClass):\n    x: object\n"
        "check(A(jnp.ones(2)), A(jnp.ones(2)))\n"
        "print('ok')\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert result.stdout == "ok\n", result.stderr
    plain = subprocess.run(
        [sys.executable, "-c", "import sys, treeclass; print('libcst' in sys.modules, 'treeclass.migrate' in sys.modules)"],
        capture_output=True, text=True, check=True,
    )
    assert plain.stdout == "False False\n"


def test_code_left_alone_keeps_its_blank_lines_when_an_import_goes(tmp_path: Path):
    # Only the statements a plan touches go through libcst; the rest comes back as it
    # was, its blank lines included.
    path = tmp_path / "m.py"
    path.write_text(
        "from jax.tree_util import register_pytree_node_class\n\n"
        "X = 1  # a constant\n\n\n"
        "@register_pytree_node_class\nclass P:\n"
        "    def __init__(self, w: float):\n        self.w = w\n\n"
        "    def tree_flatten(self):\n        return (self.w,), None\n\n"
        "    @classmethod\n    def tree_unflatten(cls, aux, children):\n        return cls(*children)\n\n\n"
        "def   f( ): return P(1); x = 2\n",
        encoding="utf-8",
    )
    assert run("--write", path)[0] == 0
    assert path.read_text(encoding="utf-8") == (
        "import treeclass as tc\n\n"
        "X = 1  # a constant\n\n\n"
        "class P(tc.TreeClass, eq=False):\n    w: float\n\n\n"
        "def   f( ): return P(1); x = 2\n"
    )


# --- an import replaced above a class keeps the blank lines before it ----------------------
_FLAX_AFTER = "import treeclass as tc\n\n\nclass S(tc.TreeClass):\n    x: float\n"
_NAMEDTUPLE_AFTER = '''\
from collections.abc import Iterable, Iterator
from typing import Any, ClassVar

import treeclass as tc


class S(tc.TreeClass):
    x: float

    # The NamedTuple's tuple protocol (unpacking, indexing, iteration, len, _replace,
    # _fields, _asdict, _make), kept by treeclass.migrate: remove what no code uses.
    def __iter__(self) -> Iterator[float]:
        return iter((self.x,))

    def __getitem__(self, index: int | slice) -> Any:
        return (self.x,)[index]

    def __len__(self) -> int:
        return 1

    _fields: ClassVar[tuple[str, ...]] = ("x",)

    def _replace(self, **changes: Any) -> "S":
        return self.replace(**changes)

    def _asdict(self) -> dict[str, Any]:
        return {"x": self.x}

    @classmethod
    def _make(cls, iterable: Iterable[Any]) -> "S":
        return cls(*iterable)
'''


@pytest.mark.parametrize(
    ("before", "after"),
    [
        pytest.param(
            "import flax.struct\n\n\n@flax.struct.dataclass\nclass S:\n    x: float\n",
            _FLAX_AFTER,
            id="import-flax.struct",
        ),
        pytest.param(
            "from flax import struct\n\n\nclass S(struct.PyTreeNode):\n    x: float\n",
            _FLAX_AFTER,
            id="from-flax-import-struct",
        ),
        pytest.param(
            "from typing import NamedTuple\n\n\nclass S(NamedTuple):\n    x: float\n",
            _NAMEDTUPLE_AFTER,
            id="from-typing-import-namedtuple",
        ),
    ],
)
def test_an_import_replaced_above_a_class_keeps_its_blank_lines(
    tmp_path: Path, before: str, after: str
):
    # The only import went, and treeclass's came in its place: the class kept one of its
    # two blank lines (the file must not start with one, which was stripped first).
    path = tmp_path / "m.py"
    path.write_text(before, encoding="utf-8")
    assert run("--write", "--namedtuples", path)[0] == 0
    assert path.read_text(encoding="utf-8") == after


def test_an_import_added_above_its_group_takes_the_groups_place(tmp_path: Path):
    # `from collections.abc import ...` sorts before `import os`: it takes the header
    # comment and the blank line above, and the standard library's group stays together.
    path = tmp_path / "m.py"
    path.write_text(
        '"""Doc."""\n\n# header\nimport os\nfrom typing import NamedTuple\n\nimport jax\n\n\n'
        "class S(NamedTuple):\n    x: jax.Array\n\n\nSEP = os.sep\n",
        encoding="utf-8",
    )
    assert run("--write", "--namedtuples", path)[0] == 0
    assert path.read_text(encoding="utf-8").startswith(
        '"""Doc."""\n\n# header\nfrom collections.abc import Iterable, Iterator\nimport os\n'
        "from typing import Any, ClassVar\n\nimport jax\nimport treeclass as tc\n\n\n"
        "class S(tc.TreeClass):\n    x: jax.Array\n\n    # The NamedTuple's"
    )


# The generator for the two cases above: a module head (an optional docstring, imports of
# the standard library and of third parties, the family's import among them) and a class
# of each family after one or two blank lines. Converted, the class keeps its blank lines,
# the file starts with no blank line, and no blank line splits a group of imports.
_HEADS = {
    "flax": ("import flax.struct", "@flax.struct.dataclass\nclass S:\n    x: float\n"),
    "namedtuple": ("from typing import NamedTuple", "class S(NamedTuple):\n    x: float\n"),
}


@settings(max_examples=40, deadline=None, database=None, suppress_health_check=list(HealthCheck))
@given(
    family=st.sampled_from(sorted(_HEADS)),
    docstring=st.booleans(),
    stdlib=st.lists(st.sampled_from(["import os", "import sys", "from typing import cast"]), unique=True, max_size=2),
    third=st.lists(st.sampled_from(["import jax", "import numpy as np"]), unique=True, max_size=2),
    blank=st.integers(1, 2),
)
def test_a_converted_module_keeps_its_layout(
    family: str, docstring: bool, stdlib: list[str], third: list[str], blank: int
) -> None:
    family_import, cls = _HEADS[family]
    groups = [sorted([*stdlib, *([family_import] if family == "namedtuple" else [])]),
              sorted([*third, *([family_import] if family == "flax" else [])])]
    head = "\n\n".join("\n".join(g) for g in groups if g)
    source = ('"""Doc."""\n\n' if docstring else "") + head + "\n" * (blank + 1) + cls
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "m.py"
        path.write_text(source, encoding="utf-8")
        assert run("--write", "--namedtuples", path)[0] == 0
        text = path.read_text(encoding="utf-8")
    assert not text.startswith("\n"), text
    assert "class S(tc.TreeClass):" in text, text
    above = text.split("class S(tc.TreeClass):")[0]
    assert above.endswith("\n" * (blank + 1)), (source, text)
    assert not above.endswith("\n" * (blank + 2)), (source, text)
    imports = above.rstrip("\n").split("\n\n")[1 if docstring else 0:]
    for group in imports:  # each group one kind: the standard library's, or the others'
        kinds = {line.split()[1].split(".")[0] in sys.stdlib_module_names for line in group.split("\n")}
        assert len(kinds) == 1, (source, text)
    assert len(imports) == len({frozenset(g.split("\n")) for g in imports}), text
