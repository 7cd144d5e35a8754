"""Converted code type-checks as the code it replaces: pyright in strict mode reports on a
converted module what it reported on the module before, no more, but for one documented
rule (reportPrivateUsage on `x._replace(...)`, below). A converted NamedTuple's tuple
protocol is annotated (`__iter__ -> Iterator[...]`, `__len__ -> int`, `_fields:
ClassVar[...]`, `_replace` and `_make` return the class), so unpacking, iteration and
`_replace` keep their types.

One pyright run checks every module of these tests (pyright starts in seconds, not
milliseconds)."""

from __future__ import annotations

import collections
import importlib.util
import io
import json
import re
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

pytest.importorskip("libcst")

from treeclass.migrate._cli import main

pytestmark = [pytest.mark.typing, pytest.mark.newest_jax]  # not on the jax floor

ROOT = Path(__file__).resolve().parents[2]
CORPUS = ROOT / "tests" / "migrate" / "corpus"
# The corpus modules with NamedTuples: their after modules are the tool's output (the
# corpus tests pin that), so they are checked as they are.
NAMEDTUPLE_STEMS = ("namedtuple", "namedtuple_tuple_api")

# A module that uses a NamedTuple in every way its converted class keeps, fully
# annotated: pyright in strict mode reports nothing on it, before or after conversion.
TYPED = '''\
from typing import NamedTuple, assert_type

import jax
import jax.numpy as jnp


class MVN(NamedTuple):
    mean: jax.Array
    cov: jax.Array


class Sized(NamedTuple):
    n: int
    x: jax.Array


def step(s: MVN) -> MVN:
    m, P = s
    assert_type(m, jax.Array)
    for v in s:
        assert_type(v, jax.Array)
    new = s._replace(mean=m + 1.0, cov=P * 2.0)
    assert_type(new, MVN)
    return new


def shapes(s: MVN, z: Sized) -> list[int]:
    n, _ = z
    return [len(s), n, len(MVN._fields), len(s._asdict()), len(s[0].shape), len(z)]


def make(xs: list[jax.Array]) -> MVN:
    return MVN._make(xs)


print(step(MVN(jnp.zeros(2), jnp.eye(2))).mean, shapes(make([jnp.ones(1), jnp.ones(1)]), Sized(1, jnp.ones(1))))
'''

_CONFIG = {
    "typeCheckingMode": "strict",
    "pythonVersion": "3.11",
    "extraPaths": [str(ROOT)],
    # As the project's pyproject.toml: jaxlib ships no stubs (see the comment there).
    "reportUnknownMemberType": False,
    "reportUnknownArgumentType": False,
    "reportUnknownVariableType": False,
    "reportUnknownLambdaType": False,
    "reportMissingTypeStubs": False,
}


def _convert(source: Path, target: Path) -> None:
    """`source` converted with `--namedtuples`, written to `target`."""
    shutil.copy(source, target)
    out, err = io.StringIO(), io.StringIO()
    assert main(["--write", "--namedtuples", str(target)], out=out, err=err) == 0, err.getvalue()


@pytest.fixture(scope="module")
def diagnostics(tmp_path_factory: pytest.TempPathFactory) -> dict[str, collections.Counter[str]]:
    """Per checked module (by file name): pyright's diagnostics, as `rule: message`
    (the first line; no line numbers, which the conversion shifts), counted."""
    if importlib.util.find_spec("pyright") is None:
        pytest.skip("pyright is not installed")
    folder = tmp_path_factory.mktemp("types")
    (folder / "pyrightconfig.json").write_text(json.dumps(_CONFIG), encoding="utf-8")
    for stem in NAMEDTUPLE_STEMS:
        for side in ("before", "after"):
            shutil.copy(CORPUS / f"{side}_{stem}.py", folder / f"{side}_{stem}.py")
    (folder / "typed_before.py").write_text(TYPED, encoding="utf-8")
    _convert(folder / "typed_before.py", folder / "typed_after.py")
    command = [sys.executable, "-m", "pyright", "--outputjson", "--pythonpath", sys.executable]
    run = subprocess.run(
        [*command, "-p", str(folder / "pyrightconfig.json"), str(folder)],
        capture_output=True,
        text=True,
        check=False,
        timeout=600,
    )
    report = json.loads(run.stdout)
    found: dict[str, collections.Counter[str]] = collections.defaultdict(collections.Counter)
    for d in report["generalDiagnostics"]:
        found[Path(d["file"]).name][f"{d.get('rule', '')}: {d['message'].splitlines()[0]}"] += 1
    return found


@pytest.mark.parametrize("stem", NAMEDTUPLE_STEMS)
def test_a_converted_corpus_module_type_checks_as_before(
    diagnostics: dict[str, collections.Counter[str]], stem: str
) -> None:
    before, after = diagnostics[f"before_{stem}.py"], diagnostics[f"after_{stem}.py"]
    assert after - before == collections.Counter(), after - before  # nothing new
    assert after == before  # and nothing hidden (a method typed Any would hide uses)


# What strict pyright reports on the converted typed module, and not on the NamedTuple:
# its reportPrivateUsage exempts a class declared in a stub (typing.NamedTuple's
# `_replace`), never one the module declares. The conversion's reason says so.
# Pinned by rule and the name it quotes, not by pyright's wording (which its releases change).
PRIVATE_USES = collections.Counter(
    ("reportPrivateUsage", name) for name in ("_replace", "_fields", "_asdict", "_make")
)


def _rule_and_name(diagnostic: str) -> tuple[str, str]:
    """`("rule", "the first quoted name")` of a `rule: message` diagnostic."""
    rule, _, message = diagnostic.partition(": ")
    quoted = re.search(r'"([^"]+)"', message)
    return rule, quoted.group(1) if quoted else message


def test_a_typed_namedtuple_module_stays_clean_under_strict_pyright(
    diagnostics: dict[str, collections.Counter[str]],
) -> None:
    assert diagnostics["typed_before.py"] == collections.Counter()  # the reference is clean
    after = diagnostics["typed_after.py"]
    found: collections.Counter[tuple[str, str]] = collections.Counter()
    for diagnostic, n in after.items():
        found[_rule_and_name(diagnostic)] += n
    assert found == PRIVATE_USES, after


def test_the_typed_module_converts_and_runs_the_same(tmp_path: Path) -> None:
    # What the typing tests check is a conversion that happened, of a program that runs.
    before, after = tmp_path / "typed_before.py", tmp_path / "typed_after.py"
    before.write_text(textwrap.dedent(TYPED), encoding="utf-8")
    _convert(before, after)
    assert "class MVN(tc.TreeClass):" in after.read_text(encoding="utf-8")
    assert "def __iter__(self) -> Iterator[jax.Array]:" in after.read_text(encoding="utf-8")
    outputs = [
        subprocess.run(
            [sys.executable, str(path)],
            capture_output=True,
            text=True,
            check=True,
            timeout=300,
            env={"PYTHONPATH": str(ROOT), "JAX_PLATFORMS": "cpu", "PATH": ""},
        ).stdout
        for path in (before, after)
    ]
    assert outputs[0] == outputs[1], outputs
