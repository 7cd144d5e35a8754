"""The linter runs with the tests, from the same pyproject.toml config, so a lint error
fails CI the way it fails a developer's run."""

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.newest_jax  # not run on the jax floor (.ci/run)
ROOT = Path(__file__).resolve().parents[2]


def test_ruff_is_clean():
    # This environment's ruff (the version the 'test' extra pins), never another one
    # found first on PATH.
    if importlib.util.find_spec("ruff") is None:
        pytest.skip("ruff is not installed (it comes with the 'test' extra)")
    result = subprocess.run(
        [sys.executable, "-m", "ruff", "check", "--output-format", "concise", "."],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_ruff_format_lays_out_the_package_and_benchmarks():
    # The formatter, not a line budget, decides the layout: `ruff format` changes nothing,
    # and nothing opts out of it.
    if importlib.util.find_spec("ruff") is None:
        pytest.skip("ruff is not installed (it comes with the 'test' extra)")
    result = subprocess.run(
        [sys.executable, "-m", "ruff", "format", "--check", "treeclass", "benchmarks"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    skipped = [
        f"{path.relative_to(ROOT)}:{n}"
        for folder in ("treeclass", "benchmarks")
        for path in sorted((ROOT / folder).rglob("*.py"))
        for n, line in enumerate(path.read_text().splitlines(), 1)
        if "fmt: " + "skip" in line or "fmt: " + "off" in line
    ]
    assert skipped == []
