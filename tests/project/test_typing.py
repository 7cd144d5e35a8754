"""Type-checker behaviour is part of the contract: what pyright and mypy see of a class
and of every public function is pinned here, as its runtime behaviour is elsewhere.

pyright and mypy run once each, side by side, over:

- the `treeclass` package, under the strict settings in pyproject.toml: no diagnostic;
- `tests/typing/*.py` as written: no diagnostic either. The `pass_*` files use
  `assert_type` (a wrong inferred type is an error) and `reveal_type`, whose output is
  pinned below. Every intentional error in the `fail_*` files carries its mypy code
  (`# type: ignore[code]`) and pyright rule (`# pyright: ignore[rule]`); both checkers
  report an ignore that hides nothing, so a marker cannot outlive its error;
- copies of the `fail_*` files with those markers stripped, whose diagnostics must be
  exactly the expected sets below: same lines, same rules or codes, and the messages
  contain the pinned text.

Updating a checker (both are pinned in the `test` extra) can change a message: update
the expected text here, and say in CHANGELOG.md when what users see changes.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import json
import re
import runpy
import subprocess
import sys
from pathlib import Path

import jax
import pytest

pytestmark = [pytest.mark.typing, pytest.mark.newest_jax]  # not on the jax floor

ROOT = Path(__file__).resolve().parents[2]
TYPING = ROOT / "tests" / "typing"
BARE = "bare_"  # prefix of the marker-stripped copies of the fail_* files
# `# type: ignore[...]` and `# pyright: ignore[...]`, with whatever follows them.
_MARKERS = re.compile(r"\s+# (?:type|pyright): ignore\[[^\]]*\].*$")


def _files(pattern: str) -> list[Path]:
    return sorted(TYPING.glob(pattern))


# (file, a snippet that picks out one line of it, pyright rule, text in the message)
PYRIGHT_ERRORS = {
    ("fail_frozen.py", "self.v = self.v * 0", "reportAttributeAccessIssue",
     'Cannot assign to attribute "v" for class "Neuron*"'),
    ("fail_frozen.py", "n.v = x", "reportAttributeAccessIssue",
     'Cannot assign to attribute "v" for class "Neuron"'),
    ("fail_frozen.py", "n.tau = 5.0", "reportAttributeAccessIssue",
     'Attribute "tau" is read-only'),
    ("fail_frozen.py", "del n.v", "reportAttributeAccessIssue",
     'Cannot delete attribute "v" for class "Neuron"'),
    ("fail_constructor.py", "Neuron()", "reportCallIssue",
     'Argument missing for parameter "v"'),
    ("fail_constructor.py", "Neuron(x, bogus=1)", "reportCallIssue",
     'No parameter named "bogus"'),
    ("fail_constructor.py", "Neuron(x, 20.0, 0.1, 0)", "reportCallIssue",
     "Expected 3 positional arguments"),
    ("fail_constructor.py", "Neuron(x, count=1)", "reportCallIssue",
     'No parameter named "count"'),
    ("fail_constructor.py", 'Neuron(x, tau="slow")', "reportArgumentType",
     'parameter "tau" of type "float"'),
    ("fail_constructor.py", 'Neuron(x, dt="fast")', "reportArgumentType",
     'parameter "dt" of type "Static[float]"'),
    ("fail_constructor.py", "Neuron(v=1.0)", "reportArgumentType",
     'parameter "v" of type "Array"'),
    ("fail_constructor.py", "Config(0.1)", "reportCallIssue",
     "Expected 0 positional arguments"),
    ("fail_constructor.py", "Positional()", "reportCallIssue",
     'Argument missing for parameter "tau"'),
    ("fail_jit.py", 'c.inc("one")', "reportArgumentType",
     'parameter "by" of type "Array" in function "__call__"'),
    ("fail_jit.py", "Counter.inc(x, x)", "reportArgumentType",
     'parameter "self" of type "Counter"'),
    ("fail_jit.py", "total(x)", "reportArgumentType", 'parameter "c" of type "Counter"'),
    ("fail_jit.py", "total.lower(c, x)", "reportCallIssue", "Expected 1 positional argument"),
    ("fail_jit.py", "c.inc.trace_log.count = 0", "reportAttributeAccessIssue",
     'Cannot assign to attribute "count" for class "TraceLog"'),
    ("fail_jit.py", 'tc.bind(c.inc)(by="one")', "reportArgumentType",
     'parameter "by" of type "Array" in function "__call__"'),
    ("fail_converter.py", 'Gaussian("wide")', "reportArgumentType",
     'parameter "mean" of type "float | list[float] | Array"'),
    # The base-class form.
    ("fail_base.py", "self.w = self.w * 0", "reportAttributeAccessIssue",
     'Cannot assign to attribute "w" for class "Linear*"'),
    ("fail_base.py", "layer.w = x", "reportAttributeAccessIssue", 'Attribute "w" is read-only'),
    ("fail_base.py", 'layer.act = "tanh"', "reportAttributeAccessIssue",
     'Attribute "act" is read-only'),
    ("fail_base.py", "Linear()", "reportCallIssue", 'Argument missing for parameter "w"'),
    ("fail_base.py", "Linear(x, act=1)", "reportArgumentType", 'parameter "act" of type "Static[str]"'),
    ("fail_base.py", "Config(0.1)", "reportCallIssue", "Expected 0 positional arguments"),
    ("fail_base.py", 'return layer.replace(act="tanh")', "reportReturnType",
     'Type "Linear" is not assignable to return type "Config"'),
    # where= is typed by the tree (docs/training.md): a typo in a selector is flagged.
    ("fail_where.py", "tc.partition(net, lambda n: n.haed)", "reportAttributeAccessIssue",
     'Cannot access attribute "haed" for class "Net"'),
    ("fail_where.py", "tc.grad(loss, where=lambda n: n.haed)", "reportAttributeAccessIssue",
     'Cannot access attribute "haed" for class "Net"'),
    ("fail_where.py", "where=lambda n: n.encodr", "reportAttributeAccessIssue",
     'Cannot access attribute "encodr" for class "Net"'),
    # The known limitation: the runtime-added `replace` method is invisible.
    ("fail_replace_method.py", "n.replace(v=x)", "reportAttributeAccessIssue",
     'Cannot access attribute "replace" for class "Neuron"'),
    # `self.w = ...` in __init__ of a frozen class (pass_init.py: frozen=False), and the
    # hand-written __init__ a subclass without fields inherits, which checkers miss.
    ("fail_init.py", "self.w = jnp.ones(size)", "reportAttributeAccessIssue",
     'Cannot assign to attribute "w" for class "Linear*"'),
    ("fail_init.py", "self.size = size", "reportAttributeAccessIssue",
     'Cannot assign to attribute "size" for class "Linear*"'),
    ("fail_init.py", "same = Same(3)", "reportCallIssue", 'Argument missing for parameter "size"'),
}

# (file, snippet, mypy error code, text in the message)
MYPY_ERRORS = {
    ("fail_frozen.py", "self.v = self.v * 0", "misc",
     'Property "v" defined in "Neuron" is read-only'),
    ("fail_frozen.py", "n.v = x", "misc", 'Property "v" defined in "Neuron" is read-only'),
    ("fail_frozen.py", "n.tau = 5.0", "misc", 'Property "tau" defined in "Neuron" is read-only'),
    # mypy does not flag `del n.v` on a frozen dataclass: no entry for that line.
    ("fail_constructor.py", "Neuron()", "call-arg", 'Missing positional argument "v"'),
    ("fail_constructor.py", "Neuron(x, bogus=1)", "call-arg",
     'Unexpected keyword argument "bogus"'),
    ("fail_constructor.py", "Neuron(x, 20.0, 0.1, 0)", "call-arg",
     'Too many arguments for "Neuron"'),
    ("fail_constructor.py", "Neuron(x, count=1)", "call-arg",
     'Unexpected keyword argument "count"'),
    ("fail_constructor.py", 'Neuron(x, tau="slow")', "arg-type",
     'Argument "tau" to "Neuron" has incompatible type "str"; expected "float"'),
    ("fail_constructor.py", 'Neuron(x, dt="fast")', "arg-type",
     'Argument "dt" to "Neuron" has incompatible type "str"; expected "float"'),
    ("fail_constructor.py", "Neuron(v=1.0)", "arg-type",
     'Argument "v" to "Neuron" has incompatible type "float"; expected "Array"'),
    ("fail_constructor.py", "Config(0.1)", "call-arg",
     'Too many positional arguments for "Config"'),
    ("fail_constructor.py", "Positional()", "call-arg",
     'Missing positional argument "tau" in call to "Positional"'),
    ("fail_jit.py", 'c.inc("one")', "arg-type",
     'Argument 1 to "__call__" of "JitMethod" has incompatible type "str"; expected "Array"'),
    ("fail_jit.py", "Counter.inc(x, x)", "arg-type",
     'Argument 1 to "__call__" of "JitFunction" has incompatible type "Array"; expected "Counter"'),
    ("fail_jit.py", "total(x)", "arg-type",
     'Argument 1 to "__call__" of "JitFunction" has incompatible type "Array"; expected "Counter"'),
    ("fail_jit.py", "total.lower(c, x)", "call-arg", 'Too many arguments for "lower" of "JitFunction"'),
    ("fail_jit.py", "c.inc.trace_log.count = 0", "misc",
     'Property "count" defined in "TraceLog" is read-only'),
    # mypy keeps the annotation as the parameter type: a converter's input is refused.
    ("fail_converter.py", "Gaussian([0.0, 1.0])", "arg-type",
     'Argument 1 to "Gaussian" has incompatible type "list[float]"; expected "Array"'),
    ("fail_converter.py", 'Gaussian("wide")', "arg-type",
     'Argument 1 to "Gaussian" has incompatible type "str"; expected "Array"'),
    ("fail_base.py", "self.w = self.w * 0", "misc", 'Property "w" defined in "Linear" is read-only'),
    ("fail_base.py", "layer.w = x", "misc", 'Property "w" defined in "Linear" is read-only'),
    ("fail_base.py", 'layer.act = "tanh"', "misc", 'Property "act" defined in "Linear" is read-only'),
    ("fail_base.py", "Linear()", "call-arg", 'Missing positional argument "w" in call to "Linear"'),
    ("fail_base.py", "Linear(x, act=1)", "arg-type",
     'Argument "act" to "Linear" has incompatible type "int"; expected "str"'),
    ("fail_base.py", "Config(0.1)", "call-arg", 'Too many positional arguments for "Config"'),
    ("fail_base.py", 'return layer.replace(act="tanh")', "return-value",
     'Incompatible return value type (got "Linear", expected "Config")'),
    ("fail_jit.py", 'tc.bind(c.inc)(by="one")', "arg-type",
     'Argument "by" to "__call__" of "BoundMethod" has incompatible type "str"'),
    ("fail_where.py", "tc.partition(net, lambda n: n.haed)", "attr-defined", '"Net" has no attribute "haed"'),
    ("fail_where.py", "tc.grad(loss, where=lambda n: n.haed)", "attr-defined", '"Net" has no attribute "haed"'),
    ("fail_where.py", "where=lambda n: n.encodr", "attr-defined", '"Net" has no attribute "encodr"'),
    ("fail_replace_method.py", "n.replace(v=x)", "attr-defined",
     '"Neuron" has no attribute "replace"'),
    ("fail_init.py", "self.w = jnp.ones(size)", "misc", 'Property "w" defined in "Linear" is read-only'),
    ("fail_init.py", "self.size = size", "misc", 'Property "size" defined in "Linear" is read-only'),
    ("fail_init.py", "same = Same(3)", "call-arg", 'Missing positional argument "size" in call to "Same"'),
    ("fail_init.py", "same = Same(3)", "arg-type", 'Argument 1 to "Same" has incompatible type "int"'),
}

# The inferred constructor signatures, as each checker prints them.
PYRIGHT_REVEALS = {
    ("pass_basic.py", "reveal_type(Neuron.__init__)",
     'Type of "Neuron.__init__" is "(self: Neuron, v: Array, w: Array = lambda : jnp.zeros(3), '
     'tau: float = 20, dt: float = 0.1, label: str = "n") -> None"'),
    ("pass_classes.py", "reveal_type(Config.__init__)",
     'Type of "Config.__init__" is "(self: Config, *, lr: Array, steps: int = 10) -> None"'),
    ("pass_classes.py", "reveal_type(Mixed.__init__)",
     'Type of "Mixed.__init__" is "(self: Mixed, x: Array, *, scale: float = 1) -> None"'),
    ("pass_classes.py", "reveal_type(Child.__init__)",
     'Type of "Child.__init__" is "(self: Child, x: Array, tau: float = 1, '
     'y: Array = lambda : jnp.zeros(0), name: str = "child") -> None"'),
    ("pass_jit.py", "reveal_type(Counter.inc)",
     'Type of "Counter.inc" is "JitFunction[(self: Counter, by: Array), Counter]"'),
    ("pass_jit.py", "reveal_type(Counter(jnp.zeros(3)).inc)",
     'Type of "Counter(jnp.zeros(3)).inc" is "JitMethod[(by: Array), Counter]"'),
    # pyright types each parameter as the converter's input.
    ("pass_converter.py", "reveal_type(Gaussian.__init__)",
     'Type of "Gaussian.__init__" is "(self: Gaussian, mean: float | list[float] | Array, '
     'std: float | list[float] | Array = 1, scale: float | list[float] | Array = lambda : [1]) '
     '-> None"'),
    ("pass_base.py", "reveal_type(Linear.__init__)",
     'Type of "Linear.__init__" is "(self: Linear, w: Array, b: Array, act: str = \"relu\") -> None"'),
    ("pass_base.py", "reveal_type(MLP.__init__)",
     'Type of "MLP.__init__" is "(self: MLP, *, layers: tuple[Linear, ...], lr: float = 0.1) -> None"'),
    ("pass_base.py", "reveal_type(m.replace(lr=0.01))", 'Type of "m.replace(lr=0.01)" is "MLP"'),
    # The whole-model functions return their argument's type.
    ("pass_whole_models.py", "reveal_type(tc.replace_at(",
     'Type of "tc.replace_at(m, lambda t: t.layers[0].w, jnp.zeros((2, 2)))" is "MLP"'),
    ("pass_whole_models.py", "reveal_type(params)", 'Type of "params" is "MLP"'),
    ("pass_whole_models.py", "reveal_type(grads)", 'Type of "grads" is "MLP"'),
    # A training loop with optax and model state: optax's updates do not widen the model.
    ("pass_training.py", "reveal_type(new)", 'Type of "new" is "Net"'),
    ("pass_training.py", "reveal_type(head_grads)", 'Type of "head_grads" is "Net"'),
}

_ARRAY = "jax._src.basearray.Array"
MYPY_REVEALS = {
    ("pass_basic.py", "reveal_type(Neuron.__init__)",
     f'Revealed type is "def (self: pass_basic.Neuron, v: {_ARRAY}, w: {_ARRAY} =, '
     'tau: float =, dt: float =, label: str =)"'),
    ("pass_classes.py", "reveal_type(Config.__init__)",
     f'Revealed type is "def (self: pass_classes.Config, *, lr: {_ARRAY}, steps: int =)"'),
    ("pass_classes.py", "reveal_type(Mixed.__init__)",
     f'Revealed type is "def (self: pass_classes.Mixed, x: {_ARRAY}, *, scale: float =)"'),
    ("pass_classes.py", "reveal_type(Child.__init__)",
     f'Revealed type is "def (self: pass_classes.Child, x: {_ARRAY}, tau: float =, '
     f'y: {_ARRAY} =, name: str =)"'),
    ("pass_jit.py", "reveal_type(Counter.inc)",
     'Revealed type is "treeclass._jit.protocols.JitFunction[[self: pass_jit.Counter, '
     f'by: {_ARRAY}], pass_jit.Counter]"'),
    ("pass_jit.py", "reveal_type(Counter(jnp.zeros(3)).inc)",
     f'Revealed type is "treeclass._jit.protocols.JitMethod[[by: {_ARRAY}], pass_jit.Counter]"'),
    # mypy types each parameter as the field's annotation.
    ("pass_converter.py", "reveal_type(Gaussian.__init__)",
     f'Revealed type is "def (self: pass_converter.Gaussian, mean: {_ARRAY}, std: {_ARRAY} =, '
     f'scale: {_ARRAY} =)"'),
    ("pass_base.py", "reveal_type(Linear.__init__)",
     f'Revealed type is "def (self: pass_base.Linear, w: {_ARRAY}, b: {_ARRAY}, act: str =)"'),
    ("pass_base.py", "reveal_type(MLP.__init__)",
     'Revealed type is "def (self: pass_base.MLP, *, layers: tuple[pass_base.Linear, ...], '
     'lr: float =)"'),
    ("pass_base.py", "reveal_type(m.replace(lr=0.01))", 'Revealed type is "pass_base.MLP"'),
    ("pass_whole_models.py", "reveal_type(tc.replace_at(", 'Revealed type is "pass_whole_models.MLP"'),
    ("pass_whole_models.py", "reveal_type(params)", 'Revealed type is "pass_whole_models.MLP"'),
    ("pass_whole_models.py", "reveal_type(grads)", 'Revealed type is "pass_whole_models.MLP"'),
    ("pass_training.py", "reveal_type(new)", 'Revealed type is "pass_training.Net"'),
    ("pass_training.py", "reveal_type(head_grads)", 'Revealed type is "pass_training.Net"'),
}


@dataclasses.dataclass(frozen=True)
class Diagnostic:
    path: Path  # as the checker reported it
    line: int  # 1-based
    rule: str  # pyright rule or mypy error code ("" when there is none)
    severity: str  # "error", "warning", "information" (pyright) / "note" (mypy)
    message: str

    @property
    def file(self) -> str:
        """The typing file's name; a stripped copy maps back to its original."""
        return self.path.name.removeprefix(BARE)

    @property
    def in_package(self) -> bool:
        return (ROOT / "treeclass") in self.path.resolve().parents

    @property
    def bare(self) -> bool:
        return self.path.name.startswith(BARE)

    def __str__(self) -> str:
        return f"{self.path}:{self.line}: {self.severity} [{self.rule}] {self.message}"


def _line(file: str, snippet: str) -> int:
    lines = (TYPING / file).read_text().splitlines()
    found = [i for i, text in enumerate(lines, 1) if snippet in text]
    assert len(found) == 1, f"{snippet!r} must pick out one line of {file}; found {found}"
    return found[0]


def _pyright_command(bare: list[Path]) -> list[str]:
    # --pythonpath: resolve imports (jax, treeclass) in this interpreter's environment.
    paths = ["treeclass", *map(str, _files("*.py")), *map(str, bare)]
    return [sys.executable, "-m", "pyright", "--outputjson", "--pythonpath", sys.executable, *paths]


def _mypy_command(bare: list[Path]) -> list[str]:
    files = list(map(str, _files("*.py")))
    return [sys.executable, "-m", "mypy", "--strict", "--output", "json", "treeclass",
            *files, *map(str, bare)]


def _parse_pyright(stdout: str) -> list[Diagnostic]:
    report = json.loads(stdout)
    return [
        Diagnostic(
            path=Path(d["file"]),
            line=d["range"]["start"]["line"] + 1,
            rule=d.get("rule", ""),
            severity=d["severity"],
            message=d["message"],
        )
        for d in report["generalDiagnostics"]
    ]


def _parse_mypy(stdout: str) -> list[Diagnostic]:
    out = []
    for line in stdout.splitlines():
        if not line.startswith("{"):
            continue  # mypy may print a line of its own (a crash, a config warning)
        d = json.loads(line)
        out.append(Diagnostic(
            path=(ROOT / d["file"]), line=d["line"], rule=d["code"] or "",
            severity=d["severity"], message=d["message"],
        ))
    return out


@pytest.fixture(scope="module")
def reports(tmp_path_factory: pytest.TempPathFactory) -> dict[str, list[Diagnostic]]:
    """Runs each installed checker once (concurrently) and returns its diagnostics."""
    bare_dir = tmp_path_factory.mktemp("typing")
    bare = []
    for path in _files("fail_*.py"):
        copy = bare_dir / f"{BARE}{path.name}"
        lines = path.read_text().splitlines()
        copy.write_text("".join(_MARKERS.sub("", line) + "\n" for line in lines))
        bare.append(copy)
    commands = {"pyright": _pyright_command(bare), "mypy": _mypy_command(bare)}
    running = {
        name: subprocess.Popen(
            command, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        for name, command in commands.items()
        if importlib.util.find_spec(name) is not None
    }
    parse = {"pyright": _parse_pyright, "mypy": _parse_mypy}
    results = {}
    for name, proc in running.items():
        stdout, stderr = proc.communicate(timeout=300)
        # Both exit 0 (clean) or 1 (diagnostics); anything else is a crash or bad usage.
        if proc.returncode not in (0, 1):
            pytest.fail(f"{name} exited {proc.returncode}:\n{stderr}\n{stdout[-2000:]}")
        results[name] = parse[name](stdout)
    return results


def _report(reports: dict[str, list[Diagnostic]], checker: str) -> list[Diagnostic]:
    if checker not in reports:
        pytest.skip(f"{checker} is not installed (pip install -e '.[test]')")
    return reports[checker]


def _show(diagnostics: list[Diagnostic]) -> str:
    return "\n".join(map(str, diagnostics)) or "(none)"


def _check_expected(found: list[Diagnostic], expected: set[tuple[str, str, str, str]]) -> None:
    want = {(file, _line(file, snippet), rule): text for file, snippet, rule, text in expected}
    got: dict[tuple[str, int, str], list[str]] = {}
    for d in found:
        got.setdefault((d.file, d.line, d.rule), []).append(d.message)
    missing = sorted(set(want) - set(got))
    unexpected = sorted(set(got) - set(want))
    assert not missing, f"missing: {missing}\nall found:\n{_show(found)}"
    assert not unexpected, f"unexpected: {unexpected}\nall found:\n{_show(found)}"
    for key, text in want.items():
        assert any(text in message for message in got[key]), f"{key}: {text!r} not in {got[key]}"


@pytest.mark.parametrize("checker", ["pyright", "mypy"])
def test_package_is_clean_under_strict_checking(reports, checker):
    found = [d for d in _report(reports, checker) if d.in_package]
    assert not found, f"{checker} on treeclass/:\n{_show(found)}"


@pytest.mark.parametrize("checker", ["pyright", "mypy"])
def test_typing_files_as_written_are_clean(reports, checker):
    # Reveals (pyright "information", mypy "note") are pinned below. An error here is
    # an unmarked one, or a marker whose error has gone (an unused ignore).
    found = [
        d for d in _report(reports, checker)
        if not d.in_package and not d.bare and d.severity in ("error", "warning")
    ]
    assert not found, f"{checker} on tests/typing/:\n{_show(found)}"


def test_pyright_flags_the_intentional_errors(reports):
    _check_expected([d for d in _report(reports, "pyright") if d.bare], PYRIGHT_ERRORS)


def test_mypy_flags_the_intentional_errors(reports):
    _check_expected([d for d in _report(reports, "mypy") if d.bare], MYPY_ERRORS)


def test_pyright_infers_the_constructor_signatures(reports):
    reveals = [d for d in _report(reports, "pyright") if d.severity == "information" and not d.bare]
    assert {(d.file, d.line, d.message) for d in reveals} == {
        (file, _line(file, snippet), text) for file, snippet, text in PYRIGHT_REVEALS
    }, _show(reveals)


def test_mypy_infers_the_constructor_signatures(reports):
    reveals = [d for d in _report(reports, "mypy") if d.severity == "note" and not d.bare]
    assert {(d.file, d.line, d.message) for d in reveals} == {
        (file, _line(file, snippet), text) for file, snippet, text in MYPY_REVEALS
    }, _show(reveals)


@pytest.mark.parametrize("path", _files("pass_*.py"), ids=lambda p: p.name)
def test_pass_files_run(path, jax_defaults):
    # What the checkers accept also works: the pass files run as they are (reveal_type
    # and assert_type exist at runtime too, and return their argument), under JAX's
    # defaults, as users' code runs.
    runpy.run_path(str(path))



def _declared(protocol: type) -> set[str]:
    """The attributes a protocol in treeclass/_jit/protocols.py promises (its own and those
    of the protocols there it extends)."""
    names = {n for k in protocol.__mro__ if k.__module__ == protocol.__module__ for n in vars(k)}
    return {n for n in names if not n.startswith("_")} | {"__call__", "__get__"} & names


def test_jit_protocols_describe_the_runtime():
    # JitFunction and JitMethod exist only for the checkers; what they declare must
    # exist at runtime: on a function, a method read from its class, a bound method.
    import jax.numpy as jnp

    import treeclass as tc
    from treeclass._jit.protocols import JitFunction, JitMethod

    class Counter(tc.TreeClass):
        count: jax.Array

        @tc.jit
        def inc(self) -> Counter:
            return self.replace(count=self.count + 1)

    @tc.jit
    def double(x: jax.Array) -> jax.Array:
        return 2 * x

    assert _declared(JitFunction) == {
        "trace_log", "lower", "trace", "eval_shape", "clear_cache", "__call__", "__get__"
    }
    assert _declared(JitMethod) == {"trace_log", "__call__"}
    bound = Counter(jnp.zeros(())).inc
    for obj, protocol in ((double, JitFunction), (Counter.inc, JitFunction), (bound, JitMethod)):
        missing = {n for n in _declared(protocol) if not hasattr(obj, n)}
        assert not missing, f"{obj!r} lacks {missing}"
    assert bound.trace_log is Counter.inc.trace_log
    assert double.lower(jnp.ones(2)).as_text()
