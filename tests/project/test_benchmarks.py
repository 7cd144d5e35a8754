"""`python -m benchmarks`: the command line parses, every section resolves, a tiny quick
section runs end to end and writes nothing, and only a full run (or an explicit --write
PATH) writes a results file, below the hand-written text. No timing is asserted: the
figures are the benchmarks' business; the run itself reports which speed targets its
figures meet (benchmarks/_targets.py)."""

import hashlib
import importlib
import pathlib
import sys
import types

import pytest

# Benchmarks are run on the newest jax with the `bench` extra; the jax-floor run skips them.
pytestmark = pytest.mark.newest_jax

ROOT = pathlib.Path(__file__).resolve().parents[2]
RESULTS = ROOT / "benchmarks" / "RESULTS.md"


@pytest.fixture
def bench(monkeypatch: pytest.MonkeyPatch) -> types.ModuleType:
    """`benchmarks.__main__`, imported from the repository root (benchmarks/ is not
    installed, and the suite does not put the root on sys.path)."""
    monkeypatch.syspath_prepend(str(ROOT))
    return importlib.import_module("benchmarks.__main__")


def digest(path: pathlib.Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_help_lists_every_section(bench: types.ModuleType, capsys: pytest.CaptureFixture[str]):
    with pytest.raises(SystemExit):
        bench.parse_args(["--help"])
    out = capsys.readouterr().out
    assert "python -m benchmarks" in out
    for key in bench.SECTIONS:
        assert key in out, key


def test_every_section_resolves_to_a_function(bench: types.ModuleType):
    for key in bench.SECTIONS:
        assert callable(bench.section(key)), key


def test_unknown_section_rejected(bench: types.ModuleType, capsys: pytest.CaptureFixture[str]):
    with pytest.raises(SystemExit):
        bench.parse_args(["--only", "nope"])
    assert "--only" in capsys.readouterr().err


def test_one_command_line():
    """Sections are reached through `python -m benchmarks --only KEY`, never through a
    command line of their own."""
    for path in (ROOT / "benchmarks").glob("*.py"):
        # migrate_packages also runs other packages' test suites (minutes each): its
        # options (cache folder, tool checkout, packages, tests on or off) have no place
        # on the common line, whose `--only migrate_packages` runs it without the tests.
        if path.name not in ("__main__.py", "migrate_packages.py"):
            source = path.read_text(encoding="utf-8")
            assert 'if __name__ == "__main__"' not in source, path.name
            assert "import argparse" not in source, path.name


@pytest.mark.parametrize("argv", [["--quick"], ["--only", "python"], ["--no-write"]])
def test_partial_runs_write_nothing(bench: types.ModuleType, argv: list[str]):
    assert bench.results_path(bench.parse_args(argv)) is None


def test_full_run_writes_results_md(bench: types.ModuleType):
    assert bench.results_path(bench.parse_args([])) == RESULTS


def test_write_names_the_path_in_any_mode(bench: types.ModuleType, tmp_path: pathlib.Path):
    target = tmp_path / "quick.md"
    args = bench.parse_args(["--quick", "--only", "jit", "--write", str(target)])
    assert bench.results_path(args) == target


def test_results_md_keeps_its_hand_written_text(bench: types.ModuleType):
    results = importlib.import_module("benchmarks._results")
    head, marker, _ = RESULTS.read_text(encoding="utf-8").partition(results.MARKER)
    assert marker, "RESULTS.md lost its marker line"
    assert "## Method" in head


def test_write_replaces_only_what_follows_the_marker(
    bench: types.ModuleType, tmp_path: pathlib.Path
):
    results = importlib.import_module("benchmarks._results")
    copy = tmp_path / "RESULTS.md"
    copy.write_text(f"# words\n\nwhy it is so\n\n{results.MARKER}\n\nold figures\n")
    results.write(copy, "new figures\n")
    assert copy.read_text() == f"# words\n\nwhy it is so\n\n{results.MARKER}\n\nnew figures\n"


def test_write_to_a_new_path_starts_with_the_marker(
    bench: types.ModuleType, tmp_path: pathlib.Path
):
    results = importlib.import_module("benchmarks._results")
    fresh = tmp_path / "fresh.md"
    results.write(fresh, "figures\n")
    assert fresh.read_text() == f"{results.MARKER}\n\nfigures\n"


def test_one_table_renders_text_and_markdown(bench: types.ModuleType):
    table = importlib.import_module("benchmarks._table")
    t = table.Table("t", ("contender", "note"), (("a|b", "x"),), note="n")
    assert t.markdown() == "### t\n\nn\n\n| contender | note |\n|---|---|\n| a\\|b | x |"
    assert t.text() == "== t\nn\ncontender  note\na|b        x"


def test_example_loaded_once_by_path(bench: types.ModuleType, monkeypatch: pytest.MonkeyPatch):
    """examples/ is not a package: `example(name)` loads examples/<name>.py under its own
    name once, and replaces a module of that name that came from elsewhere."""
    examples = importlib.import_module("benchmarks._examples")
    monkeypatch.setitem(sys.modules, "fit_logistic", types.ModuleType("fit_logistic"))
    first = examples.example("fit_logistic")
    assert first.__file__ == str(ROOT / "examples" / "fit_logistic.py")
    assert examples.example("fit_logistic") is first
    assert sys.modules["fit_logistic"] is first


def test_quick_section_runs_and_writes_nothing(
    bench: types.ModuleType, capsys: pytest.CaptureFixture[str]
):
    before = digest(RESULTS)
    bench.main(["--quick", "--only", "python"])
    out = capsys.readouterr().out
    for title in ("== construction (10 keyword args) [61 rounds]", "== replace one dynamic"):
        assert title in out
    assert "\ntreeclass  " in out
    assert "\ntreeclass: TreeClass base  " in out  # the base-class form, beside the decorator
    assert "x tuple" in out  # ratios to the same-round baseline
    # The targets of the tables this run measured, last; none of the tables it did not.
    targets = out[out.index("\n== Targets\n") :]
    assert "\nconstruction  " in targets
    assert "\nreplace  " in targets
    assert "unflatten" not in targets
    assert "wrote" not in out
    assert digest(RESULTS) == before


def fake_section(quick: bool) -> list:
    table = importlib.import_module("benchmarks._table")
    return [table.Table(f"fake, quick={quick}", ("contender",), (("tuple",),))]


def test_write_puts_the_tables_where_asked(
    bench: types.ModuleType,
    tmp_path: pathlib.Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
):
    monkeypatch.setitem(bench.SECTIONS, "fake", f"{__name__}:fake_section")
    before = digest(RESULTS)
    target = tmp_path / "out.md"
    bench.main(["--quick", "--only", "fake", "--write", str(target)])
    written = target.read_text()
    assert f"Generated by `python -m benchmarks --quick --only fake --write {target}`" in written
    assert "### fake, quick=True\n\n| contender |\n|---|\n| tuple |\n" in written
    assert f"wrote {target}" in capsys.readouterr().out
    assert digest(RESULTS) == before


def test_targets_are_checked_against_the_rows_of_the_same_run(bench: types.ModuleType):
    targets = importlib.import_module("benchmarks._targets")
    table = importlib.import_module("benchmarks._table")
    header = ("contender", "median us", "IQR us", "x tuple", "ratio IQR", "note")

    def rows(**ratios: float) -> tuple[tuple[str, ...], ...]:
        return tuple((name, "1", "1-1", f"{r:.2f}", "1-1", "") for name, r in ratios.items())

    measured = [
        table.Table("unflatten [61 rounds]", header, rows(tuple=1, NamedTuple=3, treeclass=3.9)),
        table.Table("jit dispatch (returns one leaf) [61 rounds]", header, rows(tuple=1, treeclass=1.04)),
        # Another table whose title contains a target's: only a title that starts with it counts.
        table.Table("100 nodes: unflatten [61 rounds]", header, rows(tuple=1, treeclass=9)),
    ]
    summary = targets.targets_table(measured)
    by_name = {row[0]: row for row in summary.rows}
    assert set(by_name) == {"unflatten", "jit dispatch"}
    assert by_name["unflatten"][2:] == ("<= 1.20", "1.30", "no")  # 3.9 / 3 against NamedTuple
    assert by_name["jit dispatch"][2:] == ("<= 1.05", "1.04", "yes")
    assert targets.targets_table(measured[2:]) is None


@pytest.fixture
def packages(bench: types.ModuleType) -> types.ModuleType:
    """`benchmarks.migrate_packages` (its own command line; nothing here downloads)."""
    return importlib.import_module("benchmarks.migrate_packages")


def test_every_package_has_one_entry(packages: types.ModuleType):
    """`--only NAME` picks by name: a second entry of a name would run twice."""
    names = [p.name for p in packages.PACKAGES]
    assert len(names) == len(set(names))


def one_result(**changes: object) -> dict[str, object]:
    """A package's result as `measure` returns it, the figures made up."""
    result: dict[str, object] = {
        "package": "pkg 1.0",
        "name": "pkg",
        "version": "1.0",
        "tool": "abc1234 (main)",
        "flags": ["--namedtuples"],
        "date": "2026-12-08 01:00 UTC",
        "found": 5,
        "status": {"converted": 2, "refused": 3},
        "refused": {
            "code uses an instance as a tuple": {"count": 2, "classes": ["a.py:1 A", "a.py:5 C"]},
            "`…` is mutated in place at `…`": {"count": 1, "classes": ["b.py:2 B"]},
        },
        "tests": ("tests",),
        "tests_note": "every test",
        "tests_before": "4 passed",
        "tests_after": "3 passed, 1 failed",
        "passed_before_failed_after": ["tests.test_a::test_one"],
        "probe": "not run",
        "unparsable_after": [],
        "second_run_changes": False,
        "errors": [],
        "command": "python -m benchmarks.migrate_packages --only pkg",
    }
    return {**result, **changes}


def test_packages_table_reports_a_package_that_broke(packages: types.ModuleType):
    table = packages.packages_table([one_result()])
    assert table.header[:4] == ("package", "version", "found", "converted")
    ((name, version, found, converted, refused, tests, note),) = table.rows
    assert (name, version, found, converted) == ("pkg", "1.0", "5", "2")
    assert refused == ("3 (2: code uses an instance as a tuple; 1: `…` is mutated in place at `…`)")
    assert tests == "4 passed → 3 passed, 1 failed"
    assert note.startswith("**1 passed before, fail after** (test_a::test_one).")
    assert note.endswith("every test")
    assert "abc1234 (main)" in table.note


def test_packages_table_says_a_probe_differs_and_no_tests(packages: types.ModuleType):
    probe = one_result(
        tests=(), tests_before="not run", tests_after="not run", probe="DIFFERENT: a, b"
    )
    assert packages.packages_table([probe]).rows[0][5] == "probe: DIFFERENT: a, b"
    none = one_result(tests=(), tests_before="not run", tests_after="not run")
    assert packages.packages_table([none]).rows[0][5] == "no tests"


def test_packages_md_names_the_commands(packages: types.ModuleType):
    md = packages.packages_md([one_result(), one_result(name="jaxlie", command="cmd two")])
    assert "| pkg | 1.0 | 5 | 2 |" in md
    assert md.endswith(
        "Produced by:\n\n    cmd two\n    python -m benchmarks.migrate_packages --only pkg\n"
    )


def test_append_keeps_the_other_packages_in_the_order_of_packages(packages: types.ModuleType):
    kept = [one_result(name="jaxlie", found=1), one_result(name="navix", found=2)]
    merged = packages._merged(kept, [one_result(name="jaxlie", found=3)])
    assert [(r["name"], r["found"]) for r in merged] == [("jaxlie", 3), ("navix", 2)]


def test_append_needs_out(packages: types.ModuleType, capsys: pytest.CaptureFixture[str]):
    with pytest.raises(SystemExit):
        packages.main(["--append", "--only", "jaxlie"])
    assert "--append needs --out" in capsys.readouterr().err


def test_a_probe_that_failed_before_judges_nothing(packages: types.ModuleType):
    failed = "failed (ModuleNotFoundError: No module named 'x')"
    assert packages.probe_verdict(failed, failed).startswith("FAILED BEFORE the migration")
    assert packages.probe_verdict("a 1\n", "a 1\n") == "same output"
    assert packages.probe_verdict("a 1\n", "a 2\n").startswith("DIFFERENT")
    assert packages.probe_verdict(None, None) == "not run"


def test_reasons_that_share_their_first_clause_are_one(packages: types.ModuleType):
    tuple_use = "code uses an instance as a tuple where a treeclass cannot be one"
    refused = {
        f"{tuple_use} (3 site; the converted class keeps": {"count": 1, "classes": ["a.py:1 A"]},
        f"{tuple_use} (6 site; the converted class keeps": {"count": 1, "classes": ["b.py:2 B"]},
    }
    result = one_result(status={"refused": 2}, refused=refused)
    assert packages.packages_table([result]).rows[0][4] == f"2 (2: {tuple_use})"
    assert packages.reason_key(f"{tuple_use} (3 site(s); keeps these): (1) `x`") == tuple_use


def test_split_reasons_keeps_a_reasons_own_numbered_sites(packages: types.ModuleType):
    reason = (
        "2 reasons: (1) code uses an instance as a tuple (2 site(s)): (1) `a` at m.py:1;"
        " (2) `b` at m.py:2. docs/migration.md#namedtuple (2) `nodes` is mutated in place"
        " at `g.nodes.append(n)`. docs/migration.md#derived-attributes-and-caches"
    )
    assert packages.split_reasons(reason) == [
        "code uses an instance as a tuple (2 site(s)): (1) `a` at m.py:1;"
        " (2) `b` at m.py:2. docs/migration.md#namedtuple",
        "`nodes` is mutated in place at `g.nodes.append(n)`."
        " docs/migration.md#derived-attributes-and-caches",
    ]
    assert packages.split_reasons("2 reasons: (1) a (2) b") == ["a", "b"]
    assert packages.split_reasons("one reason") == ["one reason"]


def test_results_name_the_checkout_when_treeclass_is_not_installed(
    bench: types.ModuleType, monkeypatch: pytest.MonkeyPatch
):
    results = importlib.import_module("benchmarks._results")
    real = results.metadata.version

    def version(dist: str) -> str:
        if dist == "treeclass":
            raise results.metadata.PackageNotFoundError(dist)
        return real(dist)

    monkeypatch.setattr(results.metadata, "version", version)
    monkeypatch.setattr(results, "checkout_commit", lambda: "abc1234")
    assert results.machine()["treeclass"].endswith(", the checkout at abc1234")
