"""treeclass.migrate on real public packages it was not written for, where installed
(neither is in the `test` extra: CI skips these; `pip install jax-cosmo==0.1.0` and
`pip install gymnax==1.0.1` run them):

- jax-cosmo 0.1.0 (hand-written pytrees throughout): every pytree class is refused, each with its
  reason, and the files are left as they are. Two of the reasons are bugs of the
  package itself, pinned here too.
- gymnax 1.0.1: its flax.struct parameter classes convert, its state classes are
  refused; the migrated copy's environments give the same observations, rewards,
  states and parameter leaves as the installed package under `jit` and `vmap`.

The installed package is copied and the copy migrated; the installed one is untouched.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest

pytest.importorskip("libcst")

from treeclass.migrate import _engine


def _installed(name: str) -> Path:
    spec = importlib.util.find_spec(name)
    if spec is None or not spec.submodule_search_locations:
        pytest.skip(f"{name} is not installed")
    return Path(next(iter(spec.submodule_search_locations)))


def _migrate_copy(name: str, tmp_path: Path) -> tuple[Path, list[dict[str, object]]]:
    copy = tmp_path / name
    shutil.copytree(_installed(name), copy, ignore=shutil.ignore_patterns("__pycache__"))
    result = _engine.run([copy])
    assert not result.errors
    for file in result.files:
        if file.new_source is not None:
            Path(file.path).write_text(file.new_source, encoding="utf-8")
    return copy, [r.as_json() for r in result.reports]


def test_jax_cosmo_every_class_refused_with_its_reason(tmp_path: Path):
    before = {p.name: p.read_text(encoding="utf-8") for p in _installed("jax_cosmo").rglob("*.py")}
    copy, reports = _migrate_copy("jax_cosmo", tmp_path)
    assert {p.name: p.read_text(encoding="utf-8") for p in copy.rglob("*.py")} == before
    reasons = {r["class"]: r["reason"] for r in reports}
    assert all(r["status"] == "refused" for r in reports)
    container = "its children are `self.params` itself, a sequence of any length"
    expected = {
        "constant_linear_bias": container,
        "inverse_growth_linear_bias": container,
        "des_y1_ia_bias": container,
        "WeakLensing": container,
        "NumberCounts": container,
        "Cosmology": "its structure depends on values: an `if` in tree_flatten",
        "smail_nz": "its base class `redshift_distribution` is not a pytree class converted",
        "delta_nz": "its base class `redshift_distribution` is not a pytree class converted",
        "kde_nz": "its base class `redshift_distribution` is not a pytree class converted",
        "systematic_shift": "its base class `redshift_distribution` is not a pytree class converted",
        "InterpolatedUnivariateSpline": "tree_flatten reads `_endpoints`, which __init__ never sets",
    }
    assert set(reasons) == set(expected)
    for cls, piece in expected.items():
        assert str(reasons[cls]).startswith(piece), (cls, reasons[cls])


def test_jax_cosmo_bugs_behind_two_refusals():
    _installed("jax_cosmo")
    import jax_cosmo as jc
    from jax_cosmo.scipy.interpolate import InterpolatedUnivariateSpline

    # The spline's tree_flatten reads an attribute its __init__ never sets...
    spline = InterpolatedUnivariateSpline(jnp.linspace(0.0, 1.0, 5), jnp.linspace(0.0, 1.0, 5))
    with pytest.raises(AttributeError, match="_endpoints"):
        jax.tree.leaves(spline)
    # ...and Cosmology's unflatten crashes when gamma is set (`list(...).reverse()` is None).
    with pytest.raises(AttributeError, match="'NoneType' object has no attribute 'pop'"):
        jax.jit(lambda c: c.Omega_c)(jc.Planck15(gamma=0.55))


_ENVS = ("CartPole-v1", "Pendulum-v1", "Acrobot-v1", "MountainCar-v0", "Catch-bsuite", "Breakout-MinAtar")
_SCRIPT = """
import json, sys
import jax, jax.numpy as jnp, numpy as np
import gymnax

out = {}
for name in json.loads(sys.argv[1]):
    env, params = gymnax.make(name)
    keys = jax.random.split(jax.random.key(0), 4)
    obs, state = jax.jit(env.reset)(keys[0], params)
    step = jax.jit(env.step)
    for k in keys[1:]:
        action = env.action_space(params).sample(k)
        obs, state, reward, *done, _ = step(k, state, action, params)
    batch_obs, _ = jax.vmap(env.reset, in_axes=(0, None))(keys, params)
    leaves = [np.asarray(x).tolist() for x in jax.tree.leaves((obs, state, reward, done, batch_obs, params))]
    paths = [jax.tree_util.keystr(p) for p, _ in jax.tree_util.tree_flatten_with_path(params)[0]]
    out[name] = {"leaves": leaves, "paths": paths, "treeclass": any(c.__name__ == "TreeClass" for c in type(params).__mro__)}
print(json.dumps(out))
"""


def _gymnax_run(pythonpath: str | None) -> dict[str, dict[str, object]]:
    env = {**os.environ, "JAX_PLATFORMS": "cpu"}
    if pythonpath:
        env["PYTHONPATH"] = pythonpath
    result = subprocess.run(
        [sys.executable, "-c", _SCRIPT, json.dumps(_ENVS)], capture_output=True, text=True, env=env, check=False
    )
    assert result.returncode == 0, result.stderr[-3000:]
    return json.loads(result.stdout)


def test_gymnax_converts_params_and_behaves_the_same(tmp_path: Path):
    copy, reports = _migrate_copy("gymnax", tmp_path)
    converted = [str(r["class"]) for r in reports if r["status"] == "converted"]
    # The parameters of 27 environments, and two wrappers' states.
    assert sorted(set(converted)) == ["EnvParams", "LogEnvState", "StickyActionState"]
    assert len(converted) == 29
    refused = [str(r["reason"]) for r in reports if r["status"] == "refused"]
    assert len(refused) == 29
    # The states: one environment's visualiser assigns to an attribute named like a
    # state field (the tool cannot tell whose), so that class is refused, its base
    # with it, and every state class that extends the base.
    assert sum(r.startswith("its base class `EnvState` is refused") for r in refused) == 24
    assert "import treeclass as tc" in (copy / "environments" / "classic_control" / "cartpole.py").read_text()
    before, after = _gymnax_run(None), _gymnax_run(str(tmp_path))
    for name in _ENVS:
        assert after[name]["treeclass"]  # the migrated copy ran
        assert not before[name]["treeclass"]
        assert before[name]["paths"] == after[name]["paths"]  # flax keyed by name already
        for a, b in zip(before[name]["leaves"], after[name]["leaves"], strict=True):  # type: ignore[call-overload]
            np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
