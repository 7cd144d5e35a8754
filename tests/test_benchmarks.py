"""`python -m benchmarks`: a tiny quick subset runs end to end, and only a full run (or
an explicit --write PATH) writes a results file. No timing is asserted: the figures
are the benchmarks' business, not the suite's."""

import hashlib
import importlib
import pathlib
from types import ModuleType

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent
RESULTS = ROOT / "benchmarks" / "RESULTS.md"


@pytest.fixture
def cli(monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    """`benchmarks.__main__`, imported from the repository root (not installed)."""
    monkeypatch.syspath_prepend(str(ROOT))
    return importlib.import_module("benchmarks.__main__")


def digest(path: pathlib.Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.mark.parametrize(
    "argv",
    [["--quick"], ["--rounds", "5"], ["--only", "construct"], ["--no-write"]],
)
def test_partial_runs_write_nothing(cli: ModuleType, argv: list[str]):
    assert cli.results_path(cli.parse_args(argv)) is None


def test_full_run_writes_results_md(cli: ModuleType):
    assert cli.results_path(cli.parse_args([])) == RESULTS


def test_write_names_the_path_in_any_mode(cli: ModuleType, tmp_path: pathlib.Path):
    target = tmp_path / "quick.md"
    args = cli.parse_args(["--quick", "--write", str(target)])
    assert cli.results_path(args) == target


def test_quick_subset_runs_and_leaves_results_md_alone(
    cli: ModuleType, capsys: pytest.CaptureFixture[str]
):
    before = digest(RESULTS)
    cli.main(["--quick", "--only", "construct", "--no-examples"])
    out = capsys.readouterr().out
    assert "construction (10 keyword args)" in out
    assert "treeclass" in out
    assert "wrote" not in out
    assert digest(RESULTS) == before
