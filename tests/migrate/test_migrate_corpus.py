"""The migration corpus (tests/migrate/corpus/, tests/migrate_corpus.py): the tool converts
and refuses what it must, its output is the checked-in after module, and each
converted class behaves as the class it replaces, built through the same call sites,
under eager, `jit`, `grad` and `vmap`, and `treeclass.migrate.check` finds no
difference."""

from __future__ import annotations

import ast
import importlib.util
import os
import traceback

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from migrate_corpus import CASES, CORPUS, Module, load

pytest.importorskip("libcst")

from treeclass.migrate import _engine, check

# The before module of the dataclass families imports flax and chex (the `bench`
# extra); the tool itself only reads it, so only its behaviour tests need them.
_NEEDS = {"dataclasses": ("flax", "chex"), "flax_serialization": ("flax",)}

REGENERATE = os.environ.get("TREECLASS_MIGRATE_REGENERATE") == "1"


def _run(module: Module) -> _engine.Result:
    return _engine.run([module.before], namedtuples=module.namedtuples)


@pytest.fixture(scope="module", params=CORPUS, ids=lambda m: m.stem)
def ran(request: pytest.FixtureRequest) -> tuple[Module, _engine.Result]:
    return request.param, _run(request.param)


def test_corpus_size():
    # A corpus worth the name: at least 30 classes over every family and trap.
    assert sum(len(m.converted) + len(m.refused) for m in CORPUS) >= 30


def test_converts_and_refuses_what_it_must(ran):
    module, result = ran
    assert not result.errors
    converted = [r.cls for r in result.reports if r.status == "converted"]
    refused = {r.cls: r.reason for r in result.reports if r.status == "refused"}
    assert converted == list(module.converted)
    assert set(refused) == set(module.refused)
    for cls, piece in module.refused.items():
        assert piece in refused[cls], (cls, refused[cls])
        assert "docs/migration.md#" in refused[cls]  # every refusal points to its recipe


def test_after_module_is_the_output(ran):
    module, result = ran
    (file,) = result.files
    if not module.converted:
        assert file.new_source is None  # nothing to convert: the file is not touched
        assert not module.after.exists()
        return
    assert file.new_source is not None
    if REGENERATE:
        module.after.write_text(file.new_source, encoding="utf-8")
    assert module.after.read_text(encoding="utf-8") == file.new_source


def test_refused_classes_are_left_byte_for_byte(ran):
    module, result = ran
    (file,) = result.files
    after = file.new_source or file.source
    tree = ast.parse(file.source)
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and node.name in module.refused:
            start = node.decorator_list[0].lineno if node.decorator_list else node.lineno
            text = "".join(file.source.splitlines(keepends=True)[start - 1 : node.end_lineno])
            assert text in after, node.name


def test_second_run_changes_nothing(ran, tmp_path):
    module, _ = ran
    if not module.converted:
        return
    copy = tmp_path / module.after.name
    copy.write_text(module.after.read_text(encoding="utf-8"), encoding="utf-8")
    result = _engine.run([copy], namedtuples=module.namedtuples)
    assert result.files[0].new_source is None
    assert [r.status for r in result.reports] == ["refused"] * len(module.refused)


# --- behaviour: before vs after ---------------------------------------------------------

_MODULES: dict[str, tuple[object, object]] = {}


def _pair(stem: str):
    if stem not in _MODULES:
        module = next(m for m in CORPUS if m.stem == stem)
        _MODULES[stem] = (
            load(module.before, f"corpus_before_{stem}"),
            load(module.after, f"corpus_after_{stem}"),
        )
    return _MODULES[stem]


def _inexact(tree):
    leaves, treedef = jax.tree.flatten(tree)
    where = [i for i, leaf in enumerate(leaves) if jnp.issubdtype(jnp.result_type(leaf), jnp.inexact)]
    return leaves, treedef, where


def _grad(apply, module, obj):
    """d apply / d (every float leaf), as a list in leaf order: one route for the old
    class and the new, whatever other leaves they hold."""
    leaves, treedef, where = _inexact(obj)

    def f(floats):
        merged = list(leaves)
        for i, x in zip(where, floats, strict=True):
            merged[i] = x
        return apply(module, jax.tree.unflatten(treedef, merged))

    return jax.grad(f)([leaves[i] for i in where])


def _same(a, b):
    np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("case", list(CASES), ids=lambda c: "-".join(filter(None, c)))
def test_same_behaviour_before_and_after(case):
    stem, cls, _ = case
    for name in _NEEDS.get(stem, ()):
        if importlib.util.find_spec(name) is None:
            pytest.skip(f"{name} is not installed (the bench extra)")
    build, apply = CASES[case]
    old_module, new_module = _pair(stem)
    old, new = build(old_module), build(new_module)
    assert type(new).__name__ == cls
    assert type(old).__name__ == cls
    check(old, new)
    _same(apply(old_module, old), apply(new_module, new))
    _same(jax.jit(lambda o: apply(old_module, o))(old), jax.jit(lambda o: apply(new_module, o))(new))
    for g_old, g_new in zip(_grad(apply, old_module, old), _grad(apply, new_module, new), strict=True):
        _same(g_old, g_new)
    stack = lambda o: jax.tree.map(lambda *x: jnp.stack([jnp.asarray(v) for v in x]), o, o)  # noqa: E731
    got = jax.vmap(lambda o: apply(new_module, o))(stack(new))
    raised: TypeError | None = None
    try:
        expected = jax.vmap(lambda o: apply(old_module, o))(stack(old))
    except TypeError as error:
        raised = error
    if raised is not None:
        # Older jax (0.7) rebuilds the batched argument's axis spec with placeholder
        # leaves; an unflatten that calls the hand-written __init__ then runs it on them
        # and fails: the trap treeclass removes (its unflatten runs no user code).
        frames = [frame.f_code.co_filename for frame, _ in traceback.walk_tb(raised.__traceback__)]
        assert any(name == old_module.__file__ for name in frames), raised
        return
    _same(expected, got)


def test_every_converted_class_has_a_case():
    covered = {(stem, cls) for stem, cls, _ in CASES}
    for module in CORPUS:
        for cls in module.converted:
            assert (module.stem, cls) in covered, cls


def test_every_reason_points_to_a_section_of_the_guide():
    # The anchors the messages end with are headings of docs/migration.md (as the
    # documentation site and GitHub slug them).
    import re
    from pathlib import Path

    from markdown.extensions.toc import slugify

    from treeclass.migrate import _messages

    guide = (Path(__file__).parents[2] / "docs" / "migration.md").read_text(encoding="utf-8")
    headings = {slugify(re.sub(r"[`*]", "", h), "-") for h in re.findall(r"^#+ (.*)$", guide, re.MULTILINE)}
    anchors = {
        value.rsplit("#", 1)[1]
        for name, value in vars(_messages).items()
        if name.isupper() and not name.startswith("_") and isinstance(value, str) and "docs/migration.md#" in value
    }
    assert len(anchors) >= 15
    assert anchors <= headings, anchors - headings


@pytest.mark.parametrize("module", [m for m in CORPUS if m.converted], ids=lambda m: m.stem)
def test_decorator_form_behaves_the_same(module: Module, tmp_path):
    for name in _NEEDS.get(module.stem, ()):
        if importlib.util.find_spec(name) is None:
            pytest.skip(f"{name} is not installed (the bench extra)")
    result = _engine.run([module.before], form="decorator", namedtuples=module.namedtuples)
    (file,) = result.files
    assert file.new_source is not None
    assert "TreeClass" not in file.new_source
    path = tmp_path / f"decorated_{module.stem}.py"
    path.write_text(file.new_source, encoding="utf-8")
    old_module, _ = _pair(module.stem)
    new_module = load(path, f"corpus_decorated_{module.stem}")
    for (stem, _cls, _), (build, apply) in CASES.items():
        if stem == module.stem:
            old, new = build(old_module), build(new_module)
            check(old, new)
            _same(jax.jit(lambda o, f=apply: f(old_module, o))(old), jax.jit(lambda o, f=apply: f(new_module, o))(new))
