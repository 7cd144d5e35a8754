"""treeclass.migrate on real public packages, whole package folders at a time: for each package, its sdist from PyPI is unpacked into a temporary folder, its
own tests run, the migration runs on the package folder (`--json`, then `--write`),
every file must still parse and a second run must change nothing, and the tests run
again. Per package: classes found, converted, refused by reason (one example each),
the tests before and after (by test id: a test that passed before and fails after is
a change of behaviour), lines, the run's time and the slowest file run alone.

Nothing of the packages is kept in the repository: the sdists, one virtual environment
per package and the unpacked copies live under --cache (default: a folder in the
system's temporary directory). A package's environment is the running one (its
site-packages through a .pth file, its versions pinned by `pip freeze`, so jax stays at
the version installed here) plus the package's own dependencies from PyPI.

    python -m benchmarks.migrate_packages                  # every package, tests included
    python -m benchmarks.migrate_packages --only blackjax --no-tests
    python -m benchmarks.migrate_packages --tool /path/to/checkout --out /tmp/corpus-run

`--tool` is the checkout whose treeclass runs (default: this one); `--out` keeps, per
package, the JSON lines of the run, the diff, the test logs and a summary (report.json,
report.md, and packages.md: the packages table of RESULTS.md, one row per package, under
the commands that made its rows); `--append` keeps the packages of --out's report.json
that this run does not run, so one package at a time builds one table:

    python -m benchmarks.migrate_packages --only navix --out /tmp/run --append --mirrors DIR

`--mirrors DIR` holds git clones (DIR/owner+name/repo) for the packages whose
tests only their repository ships. The tests run only where the migration changes a
file, and a package's run before is kept in the cache for the next run. A package PyPI
does not have (parsmooth) is judged the same way from a folder of this repository
(`Package.local`: benchmarks/parsmooth_like), copied fresh for each run.

The section `migrate_packages` of `python -m benchmarks` runs the migration without the
tests (they take an hour here); with --quick, on the first two packages only.
"""

from __future__ import annotations

import argparse
import ast
import contextlib
import dataclasses
import hashlib
import io
import json
import os
import pathlib
import re
import shutil
import subprocess
import sys
import sysconfig
import tarfile
import tempfile
import time
import xml.etree.ElementTree as ET
from collections.abc import Sequence

from benchmarks._table import Table

REPO = pathlib.Path(__file__).resolve().parent.parent


@dataclasses.dataclass(frozen=True)
class Package:
    """One public package: where its code and tests are inside the sdist."""

    name: str
    """The PyPI name."""
    version: str
    folder: str
    """The package folder inside the unpacked sdist: migrated whole."""
    deps: tuple[str, ...]
    """Installed from PyPI into the package's environment (beside the running one's)."""
    tests: tuple[str, ...] = ()
    """pytest arguments, run from the sdist's root; empty: the sdist ships no tests."""
    path: str = "."
    """What goes on PYTHONPATH (relative to the sdist's root) to import the package."""
    note: str = ""
    """Which tests are left out, and why."""
    probe: str = ""
    """Python code run before and after the migration (its stdout must not change):
    for packages whose tests do not reach the classes that convert."""
    tests_repo: tuple[str, str, str] | None = None
    """(owner/name, commit, folder) when the tests come from the repository, not the
    sdist: read from a local mirror of it (--mirrors DIR holds DIR/owner+name/repo, a
    bare git directory) and laid into the sdist's root."""
    local: str = ""
    """A folder of this repository (relative to its root) that stands for the sdist's
    root, for a package PyPI does not have: copied fresh for each run, never changed
    in place. Its version is then only a label."""


# Chosen for their hand-written pytree classes (register_pytree_node_class, flax.struct,
# chex.dataclass, NamedTuple states) and for sdists that install beside jax 0.10.2.
# Tests: the sdist's own, less what needs what cannot be installed here or takes long on
# 2 cores (each note says which).
_DIGEST = """
import hashlib
import jax
import numpy as np

def digest(tree):
    h = hashlib.sha256()
    for leaf in jax.tree.leaves(tree):
        h.update(np.asarray(leaf).tobytes())
    return f"{len(jax.tree.leaves(tree))} leaves {h.hexdigest()[:16]}"
"""

_EVOJAX_PROBE = (
    _DIGEST
    + """
from evojax.policy.mlp_pi import PermutationInvariantPolicy
from evojax.task.ma_waterworld import MultiAgentWaterWorld
from evojax.task.slimevolley import SlimeVolley

for task in (SlimeVolley(test=False, max_steps=50), MultiAgentWaterWorld(test=False)):
    state = task.reset(jax.random.split(jax.random.PRNGKey(0), 2))
    for i in range(3):
        action = jax.random.uniform(jax.random.PRNGKey(i), (2, *task.act_shape))
        state, reward, done = task.step(state, action)
    print(type(task).__name__, digest(state), digest(reward), digest(done))
policy = PermutationInvariantPolicy(act_dim=3, hidden_dim=8)
state = SlimeVolley(test=False, max_steps=50).reset(jax.random.split(jax.random.PRNGKey(0), 2))
params = jax.random.normal(jax.random.PRNGKey(2), (2, policy.num_params)) * 0.1
actions, p_state = policy.get_actions(state, params, policy.reset(state))
print("PermutationInvariantPolicy", digest(actions), digest(p_state))
"""
)

_JAXOPT_PROBE = (
    _DIGEST
    + """
import jax.numpy as jnp
import jaxopt

def fun(w):
    return jnp.sum((w - jnp.arange(3.0)) ** 2) + 0.1 * jnp.sum(w**4)

for solver in (jaxopt.LBFGS(fun, maxiter=20), jaxopt.BFGS(fun, maxiter=20), jaxopt.GradientDescent(fun, maxiter=20),
               jaxopt.NonlinearCG(fun, maxiter=20), jaxopt.ScipyMinimize(fun=fun, maxiter=20)):
    params, state = solver.run(jnp.zeros(3))
    print(type(solver).__name__, digest(params), digest(state))
ls = jaxopt.BacktrackingLineSearch(fun=fun, maxiter=10)
print("BacktrackingLineSearch", digest(ls.run(init_stepsize=1.0, params=jnp.zeros(3))))
"""
)

_CRAFTAX_PROBE = (
    _DIGEST
    + """
from craftax.craftax_env import make_craftax_env_from_name

# Both games: their states, params and the static params (a jit static argument, so
# hashed) are the flax.struct classes that convert; the full game's world generation
# reads SmoothGenConfig and DungeonConfig.
for name in ("Craftax-Classic-Symbolic-v1", "Craftax-Symbolic-v1"):
    env = make_craftax_env_from_name(name, auto_reset=True)
    params = env.default_params
    obs, state = jax.jit(env.reset)(jax.random.PRNGKey(0), params)
    step = jax.jit(env.step)
    for i in range(4):
        obs, state, reward, done, info = step(jax.random.PRNGKey(i + 1), state, i % 5, params)
    print(name, digest(obs), digest(state), digest(reward), digest(params), hash(env.static_env_params) == hash(type(env.static_env_params)()))
"""
)

_PARSMOOTH_LIKE_PROBE = (
    _DIGEST
    + """
from parsmooth_like.example import run_all

for name, value in run_all().items():
    print(name, digest(value))
"""
)

_TORAX_PROBE = (
    _DIGEST
    + """
import numpy as np
import torax
from torax.examples.basic_config import CONFIG

# Eight steps of the basic configuration: its runtime params, geometry, profiles and
# solver states are among the classes that convert; every output variable digested.
config = torax.ToraxConfig.from_dict(CONFIG)
data_tree, history = torax.run_simulation(config, progress_bar=False, max_steps=8)
for node in data_tree.subtree:
    for name, var in sorted(node.data_vars.items()):
        print(node.path, name, digest(np.asarray(var.values)))
print("sim_error", history.sim_error)
"""
)

PACKAGES: tuple[Package, ...] = (
    Package(
        "flashbax",
        "0.1.3",
        "flashbax",
        ("chex", "flax"),
        (
            "flashbax/buffers/sum_tree_test.py",
            "flashbax/vault/vault_test.py",
            "-k",
            "vault or [32] or [100]",
        ),
        note="the vault and the sum tree at capacities 32 and 100, where the classes that convert are used (the buffers' tests and the other capacities left out: they take over 15 min here)",
    ),
    Package(
        "evojax",
        "0.2.17",
        "evojax",
        ("flax", "cma", "opencv-python-headless"),
        ("tests",),
        note="every test in the sdist (they only construct tasks and policies), and a probe: SlimeVolley and MultiAgentWaterWorld stepped under jit, the permutation-invariant policy, leaves digested",
        probe=_EVOJAX_PROBE,
    ),
    Package(
        "jax-cfd",
        "0.2.1",
        "jax_cfd",
        ("tree-math",),
        tuple(
            f"jax_cfd/base/{t}_test.py"
            for t in (
                "grids",
                "boundaries",
                "finite_differences",
                "interpolation",
                "advection",
            )
        ),
        note="five test files of jax_cfd/base, where GridArray and GridVariable live (the rest left out for time; array_utils needs scikit-image; ml, data and spectral need haiku, gin, xarray)",
    ),
    Package(
        "blackjax",
        "1.7.1",
        "blackjax",
        ("chex",),
        ("tests/mcmc", "tests/adaptation", "tests/smc", "tests/test_util.py"),
        note="tests/mcmc, adaptation, smc and test_util.py (vi, sgmcmc, ns, optimizers and the benchmarks left out for time)",
    ),
    Package(
        "jax-galsim",
        "2026.7.0",
        "jax_galsim",
        ("galsim", "astropy", "quadax", "equinox"),
        ("--noconftest", "tests/jax/test_interpolant_jax.py", "tests/jax/test_api.py"),
        note="--noconftest (its conftest.py is written for pytest 8, here is 9); the interpolant tests (ClenshawCurtisQuad, the one class that converts, integrates their kernels) and test_api (every object's pickling, repr, pytree round trip, jit); the rest of tests/jax left out for time",
    ),
    Package(
        "ott-jax",
        "0.6.0",
        "src/ott",
        ("jaxopt", "lineax", "chex", "networkx", "scikit-learn"),
        (
            "-m",
            "fast",
            "tests/tools/k_means_test.py",
            "tests/solvers/linear/univariate_test.py",
            "tests/solvers/linear/discrete_barycenter_test.py",
            "tests/solvers/linear/sinkhorn_test.py",
            "tests/solvers/quadratic/gw_test.py",
        ),
        path="src",
        note="the repository's tests at tag 0.6.0 marked fast, of k-means, the univariate solver, the discrete barycenter, Sinkhorn and Gromov-Wasserstein (where the NamedTuple states and outputs that convert, SinkhornState, GWState, KMeansState..., are carried through the solvers' loops; the fast tests of solvers/linear, tools and problems together take over 13 min here); two of Sinkhorn's online tests fail before too (jax 0.12 has no `batching.is_vmappable`)",
        tests_repo=("ott-jax/ott", "5aa6da0fbd8fe9c255b749ac5fb49f3092860cc4", "tests"),
    ),
    Package("flax", "0.12.8", "flax", (), note="for size: the sdist ships no tests"),
    Package(
        "jax", "0.10.2", "jax", (), note="for size (305k lines): its tests are not in the sdist"
    ),
    Package(
        "jaxopt",
        "0.8.5",
        "jaxopt",
        (),
        note="the sdist ships no tests: a probe runs LBFGS, BFGS, GradientDescent, NonlinearCG, ScipyMinimize and the backtracking line search, leaves digested",
        probe=_JAXOPT_PROBE,
    ),
    Package(
        "torax",
        "1.4.3",
        "torax",
        (
            "jaxopt",
            "fusion_surrogates[tglfnnukaea]==0.4.6",
            "imas-python==2.1.0",
            "typeguard==2.13.3",
            "immutabledict",
            "xarray",
            "netcdf4",
            "h5netcdf",
            "h5py<3.15.0",
            "eqdsk",
            "pydantic",
            "treelib",
            "plotly",
            "jaxtyping",
            "matplotlib",
        ),
        note="the sdist's one test file (plotruns_lib_test) errors at collection before the migration (its parameters come from test data the sdist leaves out) and the repository's tests (900 MB with their data) are not mirrored here: a probe instead, eight steps of its basic configuration, its 191 output variables digested",
        probe=_TORAX_PROBE,
    ),
    Package(
        "jaxlie",
        "1.5.0",
        "jaxlie",
        ("jax_dataclasses",),
        ("tests/test_operations.py", "tests/test_serialization.py", "tests/test_broadcast.py"),
        note="three test files of the repository at v1.5.0 (the sdist leaves out their tests/utils.py): operations, serialization, broadcasting, every group built, composed, flattened (the autodiff, manifold and example tests left out for time)",
        tests_repo=("brentyi/jaxlie", "0b6655fbadd8ea10b0d1640912a6b07cc4f576d8", "tests"),
    ),
    Package(
        "numpyro",
        "0.22.0",
        "numpyro",
        ("multipledispatch", "tqdm"),
        ("test/test_util.py", "test/test_optimizers.py", "test/test_pickle.py"),
        note="test_util, test_optimizers and test_pickle (its Distribution, Constraint and Transform subclasses, registered by __init_subclass__, are reported and left as they are; the distribution and inference tests left out for time)",
    ),
    Package(
        "optax",
        "0.2.8",
        "optax",
        ("absl-py",),
        (
            "optax/tree_utils/_state_utils_test.py",
            "optax/_src/linesearch_test.py",
            "optax/contrib/_reduce_on_plateau_test.py",
        ),
        note="the state utilities (tree_get / tree_set walk every NamedTuple state through `_fields`), the line search and reduce_on_plateau tests (alias_test and the rest left out for time)",
    ),
    Package(
        "dynamax",
        "1.0.3",
        "dynamax",
        (),
        note="for the receivers: its tests need tensorflow-probability, not installed here",
    ),
    Package(
        "jax-md",
        "0.2.29",
        "jax_md",
        (),
        note="the tool's run only (tests not run yet: they need haiku, e3nn-jax and jraph): its own `dataclasses.dataclass` wrapper, in a checkout whose root has an __init__.py, was a silent `converted 0, refused 0`",
    ),
    Package(
        "vbjax",
        "0.0.19",
        "vbjax",
        (),
        note="the tool's run only (tests not run yet): a `namedtuple(...)` given to register_pytree_node, once a silent miss",
    ),
    Package(
        "mujoco-mjx",
        "3.17.0",
        "mujoco/mjx",
        (),
        note="the tool's run only (tests not run yet: they need mujoco): 25 subclasses registered by PyTreeNode.__init_subclass__ through a helper, once a silent miss",
    ),
    Package(
        "jaxsim",
        "0.9.0",
        "src/jaxsim",
        (),
        path="src",
        note="the tool's run only (tests not run yet): jax_dataclasses classes with their own __eq__ / __hash__",
    ),
    Package(
        "evosax",
        "0.3.1",
        "evosax",
        ("flax", "dotmap"),
        (
            "tests/test_core",
            "tests/test_algorithms/test_distribution_based.py",
            "tests/test_algorithms/test_population_based.py",
            "-k",
            "test_run_scan or not (test_run or test_base_api)",
        ),
        note="the repository's tests at the 0.3.1 release (the sdist ships none): core, and every algorithm run under lax.scan with its state as the carry, plus the algorithms' specific tests (test_run and test_base_api per algorithm, the learned algorithms, problems and examples left out for time)",
        tests_repo=("RobertTLange/evosax", "d4b4127708cb2cd0cc906b910ddcd091013153a9", "tests"),
    ),
    Package(
        "qdax",
        "0.5.0",
        "qdax",
        ("scikit-learn", "pytest-assume"),
        (
            "tests/core_test/containers_test",
            "tests/core_test/neuroevolution_test",
            "tests/core_test/emitters_test",
            "tests/utils_test/metrics_test.py",
            "tests/default_tasks_test/standard_functions_test.py",
            "tests/default_tasks_test/qd_suite_test.py",
        ),
        note="the repertoires (MAP-Elites, MELS, archive, unstructured: flax.struct classes filled and carried through jax.lax loops), the replay and trajectory buffers, the multi-emitter, the metrics, the standard functions and the QD suite; pytest-assume is what its tests import; every test that needs brax, jumanji or tensorflow-probability (the RL baselines, the brax tasks, AURORA, DADS, sampling) left out (brax pulls mujoco and a jax of its own), and MOME, CMA-ES, the GA and arm too: with those the run took over 10 min here",
    ),
    Package(
        "navix",
        "4.0.0",
        "navix",
        ("rlax", "distrax", "tyro", "pyyaml", "pillow", "wandb"),
        (
            "tests/test_entities.py",
            "tests/test_grid.py",
            "tests/test_actions.py",
            "tests/test_observations.py",
            "tests/test_terminations.py",
            "tests/test_events.py",
        ),
        note="entities, grid, actions, observations, terminations, events: the entity and component classes built, stepped and observed under jit (wandb installed only because navix imports it at import time; test_rgb_first_person fails before too: it needs gymnasium and minigrid; the agents' training tests (ppo, pqn, dreamer), the benchmarks and the per-environment tests left out for time)",
    ),
    Package(
        "jaxmarl",
        "0.2.0",
        "jaxmarl",
        ("safetensors", "jaxtyping", "gymnax", "pillow"),
        (
            "tests/test_jaxmarl_api.py",
            "tests/test_envs_implement_base_api.py",
            "-k",
            "step_returns or reset_returns or auto_reset or inherits or space_definition",
        ),
        note="every registered environment made, reset and stepped once (its State classes built and replaced under jit), and the auto-reset test; test_envs (every environment run for many steps: 280 s of the 470 s the whole sdist's tests took here, over 10 min on a loaded machine) left out; the MuJoCo environments need brax and are skipped by the tests themselves",
    ),
    Package(
        "dm-haiku",
        "0.0.17",
        "haiku",
        ("jmp", "tabulate", "dm-tree", "cloudpickle", "dill", "mock"),
        (
            "haiku/_src/multi_transform_test.py",
            "haiku/_src/recurrent_test.py",
            "haiku/_src/data_structures_test.py",
        ),
        note="multi_transform (MultiTransformedWithState and Box, which the tool finds), recurrent (LSTMState, a NamedTuple carried through the unrolls) and data_structures (FlatMap, frozendict); transform_test imports tensorflow (2 GB, not installed), the rest left out for time",
    ),
    Package(
        "craftax",
        "1.6.1",
        "craftax",
        ("pygame", "imageio"),
        note="the sdist ships no tests: a probe resets and steps Craftax-Classic and Craftax under jit, leaves digested (compiling the full game's world generation took over 10 min on a loaded 2-core machine: give it --timeout 1200)",
        probe=_CRAFTAX_PROBE,
    ),
    Package(
        "parsmooth-like",
        "local",
        "parsmooth_like",
        (),
        ("tests",),
        local="benchmarks/parsmooth_like",
        note="parsmooth is not on PyPI: a package in its style in this repository (5 NamedTuples through lax.scan, associative_scan and while_loop, unpacked as tuples); its tests, and a probe whose digests must stay bit-identical",
        probe=_PARSMOOTH_LIKE_PROBE,
    ),
)


def _default_cache() -> pathlib.Path:
    return pathlib.Path(tempfile.gettempdir()) / "treeclass-migrate-corpus"


def _sh(cmd: Sequence[str | os.PathLike[str]], **kw: object) -> subprocess.CompletedProcess[str]:
    # Every command here is this interpreter, a venv's python, or git: nothing from input.
    return subprocess.run([str(c) for c in cmd], text=True, capture_output=True, **kw)  # type: ignore[call-overload, no-any-return]  # noqa: S603


def _failed(what: str, stderr: str) -> RuntimeError:
    return RuntimeError(f"{what} failed:\n{stderr[-3000:]}")


def sdist(package: Package, cache: pathlib.Path) -> pathlib.Path:
    """The package's sdist, downloaded once into cache/dl."""
    dl = cache / "dl"
    dl.mkdir(parents=True, exist_ok=True)
    stem = re.sub(r"[-_.]+", "[-_.]", package.name)
    found = [
        p
        for p in dl.glob("*.tar.gz")
        if re.fullmatch(rf"(?i){stem}-{re.escape(package.version)}\.tar\.gz", p.name)
    ]
    if not found:
        cmd = [sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--no-binary", ":all:"]
        done = _sh([*cmd, f"{package.name}=={package.version}", "-d", dl])
        if done.returncode:
            what = f"pip download {package.name}=={package.version}"
            raise _failed(what, done.stderr)
        return sdist(package, cache)
    return found[0]


def environment(package: Package, cache: pathlib.Path) -> pathlib.Path:
    """The python of the package's virtual environment: the running environment's
    packages at their versions, plus the package's dependencies."""
    venv = cache / "venv" / package.name
    python = venv / "bin" / "python"
    ready = venv / "ready"  # holds the dependencies it was built with: a change rebuilds it
    if ready.exists() and ready.read_text() in ("", json.dumps(package.deps)):
        return python
    shutil.rmtree(venv, ignore_errors=True)
    base = (
        pathlib.Path(sys.base_prefix)
        / "bin"
        / f"python{sys.version_info.major}.{sys.version_info.minor}"
    )
    done = _sh([base if base.exists() else sys.executable, "-m", "venv", venv])
    if done.returncode:
        what = f"venv for {package.name}"
        raise _failed(what, done.stderr)
    site = pathlib.Path(
        _sh(
            [python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"]
        ).stdout.strip()
    )
    (site / "running-environment.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    freeze = _sh([sys.executable, "-m", "pip", "freeze"]).stdout.splitlines()
    constraints = venv / "constraints.txt"
    constraints.write_text(
        "".join(f"{line}\n" for line in freeze if "==" in line and not line.startswith("-e"))
    )
    done = (
        _sh([python, "-m", "pip", "install", "-q", "-c", constraints, *package.deps])
        if package.deps
        else None
    )
    if done is not None and done.returncode:
        what = f"pip install {' '.join(package.deps)} for {package.name}"
        raise _failed(what, done.stderr)
    ready.write_text(json.dumps(package.deps))
    return python


def unpack(archive: pathlib.Path, into: pathlib.Path) -> pathlib.Path:
    """The sdist's root folder, unpacked fresh under `into`."""
    with tarfile.open(archive) as tar:
        tar.extractall(into, filter="data")
    (root,) = into.iterdir()
    return root


def source_root(package: Package, cache: pathlib.Path, into: pathlib.Path) -> pathlib.Path:
    """The package's root, fresh under `into`: its sdist unpacked, or for a local
    package a copy of its folder of this repository."""
    if not package.local:
        return unpack(sdist(package, cache), into)
    root = into / package.name
    shutil.copytree(
        REPO / package.local, root, ignore=shutil.ignore_patterns("__pycache__", "*.pyc")
    )
    return root


def version_key(package: Package) -> str:
    """What the tests and the probe kept in the cache are keyed by: the version, and
    for a local package the digest of its files too (they change with this repository)."""
    if not package.local:
        return package.version
    h = hashlib.sha256()
    for path in sorted((REPO / package.local).rglob("*.py")):
        h.update(path.relative_to(REPO).as_posix().encode())
        h.update(path.read_bytes())
    return f"{package.version}-{h.hexdigest()[:12]}"


@dataclasses.dataclass
class Tests:
    outcome: dict[str, str]
    """test id -> passed / failed / error / skipped."""
    seconds: float
    timed_out: bool = False

    def counts(self) -> str:
        if self.timed_out:
            return "timed out"
        by = {
            k: sum(v == k for v in self.outcome.values())
            for k in ("passed", "failed", "error", "skipped")
        }
        return ", ".join(f"{n} {k}" for k, n in by.items() if n) or "none ran"


def run_tests(
    package: Package,
    python: pathlib.Path,
    root: pathlib.Path,
    env: dict[str, str],
    log: pathlib.Path,
    timeout: float,
    cache: pathlib.Path | None = None,
) -> Tests:
    """The package's tests (package.tests) from the sdist's root, outcome by test id.
    With `cache` (a JSON file), a finished run is kept there and read back instead of
    running again: the tests of the unchanged package do not depend on the tool."""
    if cache is not None and cache.exists():
        kept = json.loads(cache.read_text())
        log.write_text(f"(kept from {cache})\n")
        return Tests(kept["outcome"], kept["seconds"])
    tests = _run_tests(package, python, root, env, log, timeout)
    if cache is not None and not tests.timed_out and tests.outcome:
        cache.parent.mkdir(parents=True, exist_ok=True)
        cache.write_text(json.dumps({"outcome": tests.outcome, "seconds": tests.seconds}))
    return tests


def _run_tests(
    package: Package,
    python: pathlib.Path,
    root: pathlib.Path,
    env: dict[str, str],
    log: pathlib.Path,
    timeout: float,
) -> Tests:
    junit = log.with_suffix(".xml")
    cmd = [
        python,
        "-m",
        "pytest",
        "-q",
        "-p",
        "no:randomly",
        "-p",
        "no:cacheprovider",
        "-p",
        "no:xdist",
    ]
    cmd += [f"--junitxml={junit}", "-o", "junit_family=xunit1", *package.tests]
    start = time.perf_counter()
    try:
        done = subprocess.run(  # noqa: S603 (the package's python running pytest)
            [str(c) for c in cmd],
            cwd=root,
            env=env,
            text=True,
            capture_output=True,
            timeout=timeout,
        )
        log.write_text(done.stdout + done.stderr)
    except subprocess.TimeoutExpired as e:
        log.write_text(f"timed out after {timeout} s\n{e.stdout or ''}")
        return Tests({}, time.perf_counter() - start, timed_out=True)
    outcome: dict[str, str] = {}
    if junit.exists():
        for case in ET.parse(junit).iter("testcase"):  # noqa: S314 (pytest's own junit file)
            key = f"{case.get('classname')}::{case.get('name')}"
            kinds = {child.tag for child in case}
            outcome[key] = next(
                (
                    k
                    for k, tag in (
                        ("failed", "failure"),
                        ("error", "error"),
                        ("skipped", "skipped"),
                    )
                    if tag in kinds
                ),
                "passed",
            )
    return Tests(outcome, time.perf_counter() - start)


# Runs treeclass.migrate in-process in the package's environment and times it: one run
# over the package folder, then (with --per-file) each file alone.
_DRIVER = r"""
import io, json, sys, time
from pathlib import Path
from treeclass.migrate._cli import main
args, per_file = json.loads(sys.argv[1]), sys.argv[2] == "1"
out, err = io.StringIO(), io.StringIO()
start, cpu = time.perf_counter(), time.process_time()
code = main(args, out=out, err=err)
seconds, cpu = time.perf_counter() - start, time.process_time() - cpu
files = {}
if per_file:
    flags = [a for a in args if a.startswith("--")]
    for path in sorted(p for a in args if not a.startswith("--") for p in ([Path(a)] if a.endswith(".py") else Path(a).rglob("*.py"))):
        t, c = time.perf_counter(), time.process_time()
        main([str(path), *[f for f in flags if f != "--write"]], out=io.StringIO(), err=io.StringIO())
        files[str(path)] = (time.perf_counter() - t, time.process_time() - c)
print(json.dumps({"code": code, "seconds": seconds, "cpu": cpu, "out": out.getvalue(), "err": err.getvalue(), "files": files}))
"""


def migrate(
    python: pathlib.Path,
    folder: pathlib.Path,
    flags: Sequence[str],
    env: dict[str, str],
    *,
    per_file: bool = False,
) -> dict[str, object]:
    done = _sh(
        [python, "-c", _DRIVER, json.dumps([str(folder), *flags]), "1" if per_file else "0"],
        env=env,
    )
    if done.returncode:
        what = f"treeclass.migrate on {folder}"
        raise _failed(what, done.stderr)
    return json.loads(done.stdout.splitlines()[-1])  # type: ignore[no-any-return]


def reason_key(reason: str) -> str:
    """A refusal reason without its particulars (names in backticks, places in
    parentheses), cut at its first colon: refusals that share it share a cause."""
    text = re.sub(r"`[^`]*`", "`…`", reason)
    text = re.sub(
        r"^[A-Za-z_]\w* is ", "the class is ", text
    )  # `Beta is a pytree class ...`: one row for all
    while re.search(r"\([^()]*\)", text):  # nested ones too: `(3 site(s); ...)`
        text = re.sub(r"\([^()]*\)", "", text)
    text = re.sub(r" at [\w./-]+\.py:\d+", "", text)
    text = re.sub(r"(; `…`)+", "", text)  # every blocking site listed: one row for all
    text = re.sub(r"\s+", " ", text).strip()
    return text.split(": ")[0].split(". ")[0][:120].strip()


def split_reasons(reason: str) -> list[str]:
    """One refusal's reasons: the tool gives several as `N reasons: (1) ... (2) ...`.
    A reason may number its own sites `(1) ... (2) ...` inside, so the reasons are cut
    where one ends with its docs link; where that does not give N, at every number."""
    header = re.match(r"(\d+) reasons: \(1\) ", reason)
    if header is None:
        return [reason]
    pieces = re.split(r"(docs/migration\.md#[\w-]+) \(\d+\) ", reason[header.end() :])
    # re.split keeps each link as its own piece: join it back to the reason it ends
    parts = [a + b for a, b in zip(pieces[0::2], [*pieces[1::2], ""], strict=True)]
    if len(parts) == int(header.group(1)):
        return [p.strip() for p in parts]
    return [p.strip() for p in re.split(r"(?:^\d+ reasons: |\s)\(\d+\) ", reason) if p.strip()]


def parses(folder: pathlib.Path) -> list[str]:
    """The .py files under folder that do not parse."""
    bad = []
    for path in sorted(folder.rglob("*.py")):
        try:
            ast.parse(path.read_bytes(), filename=str(path))
        except (SyntaxError, ValueError) as e:
            bad.append(f"{path}: {e}")
    return bad


_PYTREE_DECORATORS = {
    "register_pytree_node_class",
    "register_pytree_with_keys_class",
    "register_dataclass",
    "pytree_dataclass",
}
_PYTREE_BASES = {"NamedTuple", "PyTreeNode"}


def candidates(folder: pathlib.Path, root: pathlib.Path) -> dict[str, str]:
    """A rough census of the hand-written pytree classes under folder, to show what the
    tool did not find: `path:line Class` -> why it counts (a pytree decorator, a
    NamedTuple / PyTreeNode base, a `dataclass` decorator in a file that imports chex
    or flax.struct, a tree_flatten method, or `register_pytree_node(Class, ...)`)."""
    found: dict[str, str] = {}
    for path in sorted(folder.rglob("*.py")):
        text = path.read_text(encoding="utf-8", errors="replace")
        try:
            tree = ast.parse(text)
        except SyntaxError:
            continue
        flax_or_chex = "chex" in text or "flax" in text
        registered = {
            a.id
            for n in ast.walk(tree)
            if isinstance(n, ast.Call)
            and _last(n.func)
            in ("register_pytree_node", "register_pytree_with_keys", "register_static")
            for a in n.args[:1]
            if isinstance(a, ast.Name)
        }
        for node in ast.walk(tree):
            if not isinstance(node, ast.ClassDef):
                continue
            decorators = {
                _last(d.func if isinstance(d, ast.Call) else d) for d in node.decorator_list
            }
            bases = {_last(b.value if isinstance(b, ast.Subscript) else b) for b in node.bases}
            why = (
                next(iter(decorators & _PYTREE_DECORATORS), None)
                or next(iter(bases & _PYTREE_BASES), None)
                or (
                    "dataclass (chex/flax file)"
                    if "dataclass" in decorators and flax_or_chex
                    else None
                )
                or (
                    "tree_flatten method"
                    if any(
                        isinstance(b, ast.FunctionDef) and b.name == "tree_flatten"
                        for b in node.body
                    )
                    else None
                )
                or ("register_pytree_node call" if node.name in registered else None)
            )
            if why:
                found[f"{path.relative_to(root)}:{node.lineno} {node.name}"] = why
    return found


def _last(node: ast.expr) -> str:
    return (
        node.attr
        if isinstance(node, ast.Attribute)
        else node.id
        if isinstance(node, ast.Name)
        else ""
    )


def count_lines(folder: pathlib.Path) -> tuple[int, int]:
    files = list(folder.rglob("*.py"))
    return sum(len(p.read_bytes().splitlines()) for p in files), len(files)


def run_probe(
    package: Package,
    python: pathlib.Path,
    root: pathlib.Path,
    env: dict[str, str],
    log: pathlib.Path,
    timeout: float,
    cache: pathlib.Path | None = None,
) -> str:
    """The probe's stdout (or its failure); the one before is kept in `cache`."""
    if cache is not None and cache.exists():
        return cache.read_text()
    try:
        done = subprocess.run(  # noqa: S603 (the package's python running the probe)
            [str(python), "-c", package.probe],
            cwd=root,
            env=env,
            text=True,
            capture_output=True,
            timeout=timeout,
        )
        log.write_text(done.stdout + done.stderr)
        result = (
            done.stdout
            if done.returncode == 0
            else f"failed ({done.stderr.strip().splitlines()[-1] if done.stderr.strip() else done.returncode})"
        )
    except subprocess.TimeoutExpired:
        return f"timed out after {timeout} s"
    if cache is not None and done.returncode == 0:
        cache.parent.mkdir(parents=True, exist_ok=True)
        cache.write_text(result)
    return result


def repository_tests(package: Package, mirrors: pathlib.Path | None, root: pathlib.Path) -> str:
    """Lays the repository's test folder into root; "" when done, else why not."""
    if package.tests_repo is None:
        return ""
    repo, commit, folder = package.tests_repo
    git_dir = mirrors / repo.replace("/", "+") / "repo" if mirrors else None
    if git_dir is None or not git_dir.exists():
        return f"its tests are in the repository {repo}: pass --mirrors with a clone of it"
    archive = subprocess.run(  # noqa: S603
        ["git", "--git-dir", str(git_dir), "archive", "--format=tar", commit, folder],  # noqa: S607
        capture_output=True,
    )
    if archive.returncode:
        return (
            f"git archive {commit} {folder} failed in {git_dir}: {archive.stderr.decode()[-300:]}"
        )
    with tarfile.open(fileobj=io.BytesIO(archive.stdout)) as tar:
        tar.extractall(root, filter="data")
    return ""


def measure(
    package: Package,
    cache: pathlib.Path,
    *,
    tool: pathlib.Path,
    flags: Sequence[str],
    tests: bool,
    per_file: bool,
    timeout: float,
    out: pathlib.Path | None,
    mirrors: pathlib.Path | None = None,
) -> dict[str, object]:
    """One package, start to end; the figures and the per-class records. The tests run
    only when the migration changes a file (else after = before by construction), and
    the run before is kept in cache/tests for the next run."""
    run_tests_here = tests and bool(package.tests or package.probe)  # jaxopt: a probe, no tests
    python = environment(package, cache) if run_tests_here else pathlib.Path(sys.executable)
    work = cache / "work"
    work.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=work) as tmp:
        root = source_root(package, cache, pathlib.Path(tmp))
        folder = root / package.folder
        env = {
            **os.environ,
            "PYTHONPATH": os.pathsep.join([str(tool), str(root / package.path)]),
            "JAX_PLATFORMS": "cpu",
        }
        env.pop("PYTHONSAFEPATH", None)
        logs = out / package.name if out else pathlib.Path(tmp) / "logs"
        logs.mkdir(parents=True, exist_ok=True)
        lines, files = count_lines(folder)
        census = candidates(folder, root)
        bad_before = set(parses(folder))
        tests_skipped = repository_tests(package, mirrors, root) if run_tests_here else ""
        run_tests_here = run_tests_here and not tests_skipped
        changes = _in(
            root,
            lambda: migrate(
                pathlib.Path(sys.executable), folder.relative_to(root), ["--check", *flags], env
            ),
        )
        if run_tests_here and changes["code"] != 1:
            run_tests_here, tests_skipped = False, "no file changed"
        key = re.sub(
            r"\W+", "_", f"{package.name}-{version_key(package)}-{'-'.join(package.tests)}"
        )
        before = (
            run_tests(
                package,
                python,
                root,
                env,
                logs / "tests_before.log",
                timeout,
                cache / "tests" / f"{key}.json",
            )
            if run_tests_here and package.tests
            else None
        )
        probe_key = f"{package.name}-{version_key(package)}-probe-{hashlib.sha256(package.probe.encode()).hexdigest()[:12]}"
        probe_before = (
            run_probe(
                package,
                python,
                root,
                env,
                logs / "probe_before.log",
                timeout,
                cache / "tests" / probe_key,
            )
            if run_tests_here and package.probe
            else None
        )

        rel = folder.relative_to(root)
        # run from the sdist's root so that paths in the records are relative to it
        first = _in(root, lambda: migrate(python, rel, ["--json", *flags], env, per_file=per_file))
        records = [
            json.loads(line) for line in str(first["out"]).splitlines() if line.startswith("{")
        ]
        diff = _in(root, lambda: migrate(python, rel, list(flags), env))
        written = _in(root, lambda: migrate(python, rel, ["--write", *flags], env))
        bad_after = [b for b in parses(folder) if b not in bad_before]
        second = _in(root, lambda: migrate(python, rel, ["--check", *flags], env))
        after = (
            run_tests(package, python, root, env, logs / "tests_after.log", timeout)
            if before is not None and not before.timed_out
            else None
        )
        probe_after = (
            run_probe(package, python, root, env, logs / "probe_after.log", timeout)
            if probe_before is not None
            else None
        )
        if out:
            (logs / "records.jsonl").write_text(str(first["out"]))
            (logs / "diff.patch").write_text(str(diff["out"]))
            (logs / "errors.txt").write_text(
                str(first["err"]) + str(written["err"]) + str(second["err"])
            )

    refused: dict[str, list[dict[str, object]]] = {}
    for r in records:
        if r["status"] != "converted":
            parts = {reason_key(part): part for part in reversed(split_reasons(str(r["reason"])))}
            for key, part in parts.items():  # a class counts once per reason
                refused.setdefault(key, []).append({**r, "reason": part})
    changed: list[str] = []
    if before and after:
        changed = sorted(
            t
            for t, o in before.outcome.items()
            if o == "passed" and after.outcome.get(t, "missing") not in ("passed", "skipped")
        )
    slowest = max(dict(first["files"]).items(), key=lambda kv: kv[1][1], default=("", (0.0, 0.0)))  # type: ignore[arg-type]
    return {
        "package": f"{package.name} {package.version}",
        "name": package.name,
        "version": package.version,
        "tool": tool_commit(tool),
        "flags": list(flags),
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "folder": package.folder,
        "lines": lines,
        "files": files,
        "found": len(records),
        "status": {
            s: sum(r["status"] == s for r in records)
            for s in sorted({str(r["status"]) for r in records})
        },
        "not_found": {
            k: v
            for k, v in census.items()
            if k not in {f"{r['path']}:{r['line']} {r['class']}" for r in records}
        },
        "converted": [
            f"{r['path']}:{r['line']} {r['class']}" for r in records if r["status"] == "converted"
        ],
        "converted_notes": sorted(
            {str(r["reason"]) for r in records if r["status"] == "converted" and r["reason"]}
        ),
        "refused": {
            k: {
                "count": len(v),
                "example": f"{v[0]['path']}:{v[0]['line']} {v[0]['class']}",
                "reason": v[0]["reason"],
                "classes": [f"{x['path']}:{x['line']} {x['class']}" for x in v],
            }
            for k, v in sorted(refused.items(), key=lambda kv: -len(kv[1]))
        },
        "seconds": first["seconds"],
        "cpu_seconds": first["cpu"],
        "slowest_file": {
            "path": slowest[0],
            "seconds": slowest[1][0],
            "cpu_seconds": slowest[1][1],
        },
        "exit": {
            "json": first["code"],
            "write": written["code"],
            "second_run_check": second["code"],
        },
        "errors": [e for e in (str(first["err"]) + str(written["err"])).splitlines() if e],
        "unparsable_after": bad_after,
        "second_run_changes": second["code"] == 1,
        "tests": package.tests,
        "tests_note": package.note,
        "tests_before": before.counts()
        if before
        else f"not run ({tests_skipped})"
        if tests_skipped
        else "not run",
        "tests_after": after.counts() if after else "not run",
        "tests_seconds": [before.seconds if before else None, after.seconds if after else None],
        "passed_before_failed_after": changed,
        "probe": probe_verdict(probe_before, probe_after),
    }


def probe_verdict(before: str | None, after: str | None) -> str:
    """The probe's outputs compared: a probe that failed before judges nothing, even
    when it fails the same way after."""
    if before is None:
        return "not run"
    if before.startswith(("failed (", "timed out after ")):
        return f"FAILED BEFORE the migration: {before}"
    if before == after:
        return "same output"
    return f"DIFFERENT: before {before!r}, after {after!r}"


def _in(folder: pathlib.Path, fn):  # type: ignore[no-untyped-def]
    with contextlib.chdir(folder):
        return fn()


def tables(results: Sequence[dict[str, object]]) -> list[Table]:
    rows = []
    for r in results:
        status = dict(r["status"])  # type: ignore[call-overload]
        conv = status.pop("converted", 0)
        tests = (
            f"{r['tests_before']} -> {r['tests_after']}"
            if r["tests_after"] != "not run"
            else str(r["tests_before"])
            if r["tests"]
            else "no tests"
        )
        broke = len(r["passed_before_failed_after"])  # type: ignore[arg-type]
        slow = r["slowest_file"]
        rows.append(
            (
                str(r["package"]),
                f"{r['lines']:,} / {r['files']}",
                str(r["found"]),
                str(conv),
                str(sum(status.values())),
                tests
                + (f" ({broke} passed before, not after)" if broke else "")
                + ("" if r["probe"] == "not run" else f"; probe: {str(r['probe']).split(':')[0]}"),
                f"{r['seconds']:.1f} s ({r['cpu_seconds']:.1f} s CPU)",
                f"{slow['cpu_seconds']:.2f} s CPU" if slow["path"] else "",  # type: ignore[index]
                "ok"
                if not r["unparsable_after"] and not r["second_run_changes"] and not r["errors"]
                else "NO",
            )
        )
    header = (
        "package",
        "lines / files",
        "found",
        "converted",
        "refused",
        "tests before -> after",
        "run",
        "slowest file alone",
        "parses, idempotent",
    )
    note = (
        "whole package folders, one run each (--namedtuples); 'run': the --json run over the"
        " folder, in-process, wall and CPU time (CPU is what counts on a loaded machine)"
    )
    main = Table("treeclass.migrate on public packages", header, tuple(rows), note=note)
    reasons = []
    for r in results:
        for key, v in dict(r["refused"]).items():  # type: ignore[call-overload]
            reasons.append((str(r["package"]), str(v["count"]), key, v["example"]))
    return [
        main,
        Table(
            "refusals by reason (one example each)",
            ("package", "classes", "reason", "example"),
            tuple(reasons),
        ),
    ]


def tool_commit(tool: pathlib.Path) -> str:
    """The checkout the run used: the last commit that changed its treeclass/ (a
    commit of the benchmarks alone does not change what ran), its branch, and whether
    treeclass/ has changes not committed."""
    git = ["git", "-C", str(tool)]
    head = _sh([*git, "log", "-1", "--format=%h", "--", "treeclass"]).stdout.strip()
    branch = _sh([*git, "rev-parse", "--abbrev-ref", "HEAD"]).stdout.strip()
    dirty = _sh([*git, "status", "--porcelain", "--", "treeclass"]).stdout.strip()
    if not head:
        return str(tool)
    return f"{head} ({branch}{', treeclass/ modified' if dirty else ''})"


def _tests_cell(r: dict[str, object]) -> str:
    """Tests before -> after, and the probe's verdict, as the packages table shows them."""
    if not r["tests"] and r["probe"] == "not run":
        return "no tests"
    cell = (
        f"{r['tests_before']} → {r['tests_after']}"
        if r["tests_after"] != "not run"
        else str(r["tests_before"])
        if r["tests"]
        else ""
    )
    if r["probe"] != "not run":
        verdict = "same output" if r["probe"] == "same output" else str(r["probe"])[:300]
        cell += ("; " if cell else "") + f"probe: {verdict}"
    return cell


def short_reason(key: str) -> str:
    """A refusal's reason key (`reason_key`) cut to its first clause, for the packages
    table: a parenthesis and the advice after `;` go."""
    text = re.split(r" \(|;", key)[0].strip()
    return text if len(text) <= 100 else text[:99] + "…"


def _main_reasons(r: dict[str, object], most: int = 3) -> str:
    """The refused count, then the commonest reasons with their counts (a class refused
    for several reasons counts under each; reasons that share their first clause are one)."""
    status = dict(r["status"])  # type: ignore[call-overload]
    refused = sum(n for s, n in status.items() if s != "converted")
    classes: dict[str, set[str]] = {}
    for key, v in dict(r["refused"]).items():  # type: ignore[call-overload]
        classes.setdefault(short_reason(key), set()).update(v["classes"])
    reasons = sorted(classes.items(), key=lambda kv: -len(kv[1]))
    parts = [f"{len(names)}: {key}" for key, names in reasons[:most]]
    more = f"; {len(reasons) - most} more reasons" if len(reasons) > most else ""
    return f"{refused}" + (f" ({'; '.join(parts)}{more})" if parts else "")


def _run_note(r: dict[str, object]) -> str:
    """What the run found wrong, first, then which tests were chosen and why."""
    found = []
    broke = list(r["passed_before_failed_after"])  # type: ignore[call-overload]
    if broke:
        shown = ", ".join(str(t).rsplit(".", 1)[-1] for t in broke[:4])
        found.append(
            f"**{len(broke)} passed before, fail after** ({shown}{', …' if len(broke) > 4 else ''})"
        )
    if r["unparsable_after"]:
        found.append(f"**{len(r['unparsable_after'])} files do not parse after**")  # type: ignore[arg-type]
    if r["second_run_changes"]:
        found.append("**a second run changes files**")
    if r["errors"]:
        found.append(f"**tool errors**: {'; '.join(r['errors'])[:200]}")  # type: ignore[arg-type]
    if r["flags"] != ["--namedtuples"]:
        found.append(f"flags: {' '.join(r['flags']) or 'none'}")  # type: ignore[arg-type]
    return " ".join(f"{f}." for f in found) + (" " if found else "") + str(r["tests_note"])


def packages_table(results: Sequence[dict[str, object]]) -> Table:
    """One row per package: what the tool found, converted and refused (the main
    reasons), the package's own tests (and probe) before and after --write, and a note:
    what the run found wrong, and which tests ran."""
    header = (
        "package",
        "version",
        "found",
        "converted",
        "refused (main reasons)",
        "tests before → after",
        "note",
    )
    rows = tuple(
        (
            str(r["name"]),
            str(r["version"]),
            str(r["found"]),
            str(dict(r["status"]).get("converted", 0)),  # type: ignore[call-overload]
            _main_reasons(r),
            _tests_cell(r),
            _run_note(r),
        )
        for r in results
    )
    tools = sorted({str(r["tool"]) for r in results})
    dates = sorted(str(r["date"]) for r in results)
    note = f"tool: {', '.join(tools)}; run {dates[0]} to {dates[-1]}" if dates else "no package ran"
    return Table("treeclass.migrate judged by the packages' own tests", header, rows, note=note)


def report_md(results: Sequence[dict[str, object]], tool: str) -> str:
    lines = [
        f"# treeclass.migrate on public packages ({time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())})",
        "",
        f"tool: {tool}",
        "",
    ]
    lines += [t.markdown() + "\n" for t in tables(results)]
    for r in results:
        lines += [
            f"## {r['package']} ({r['folder']}, {r['lines']:,} lines in {r['files']} files)",
            "",
        ]
        lines.append(
            f"- found {r['found']}: {r['status']}; run {r['seconds']:.2f} s; slowest file alone {r['slowest_file']}"
        )  # type: ignore[index]
        lines.append(
            f"- tests ({r['tests_note']}): before {r['tests_before']}; after {r['tests_after']}; probe: {r['probe']}"
        )
        if r["passed_before_failed_after"]:
            lines.append(
                "- **passed before, fail after**: " + ", ".join(r["passed_before_failed_after"])
            )  # type: ignore[arg-type]
        for problem in ("errors", "unparsable_after"):
            if r[problem]:
                lines.append(f"- **{problem}**: " + "; ".join(r[problem]))  # type: ignore[arg-type]
        if r["second_run_changes"]:
            lines.append("- **a second run changes files**")
        if r["not_found"]:
            lines.append(
                f"- not found (a rough census, by decorator, base or tree_flatten): {len(r['not_found'])}: "
                + ", ".join(f"{k} ({v})" for k, v in dict(r["not_found"]).items())
            )  # type: ignore[call-overload]
        lines.append("- converted: " + (", ".join(r["converted"]) or "none"))  # type: ignore[arg-type]
        for note in r["converted_notes"]:  # type: ignore[attr-defined]
            lines.append(f"  - conversion note: {note}")
        for key, v in dict(r["refused"]).items():  # type: ignore[call-overload]
            lines.append(f"- refused {v['count']}: {key} — e.g. {v['example']}: {v['reason']}")
        lines.append("")
    return "\n".join(lines)


def run(quick: bool) -> list[Table]:
    """The `migrate_packages` section of `python -m benchmarks`: the migration and its
    times, without the packages' tests (those take an hour: run this module for them);
    --quick: the first two packages, no per-file times. A package whose sdist cannot be
    downloaded (no network) is left out, and the table's note says so."""
    cache, results, missing = _default_cache(), [], []
    for package in PACKAGES[:2] if quick else PACKAGES:
        try:
            results.append(
                measure(
                    package,
                    cache,
                    tool=REPO,
                    flags=["--namedtuples"],
                    tests=False,
                    per_file=not quick,
                    timeout=900,
                    out=None,
                )
            )
        except RuntimeError as e:
            missing.append(f"{package.name} ({str(e).splitlines()[0]})")
    found = tables(results)
    if missing:
        found[0] = dataclasses.replace(
            found[0], note=f"{found[0].note}; left out: {', '.join(missing)}"
        )
    return found


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.migrate_packages",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--only", nargs="+", default=[], choices=[p.name for p in PACKAGES], metavar="NAME"
    )
    parser.add_argument(
        "--tool",
        type=pathlib.Path,
        default=REPO,
        help="the checkout whose treeclass runs (default: this one)",
    )
    parser.add_argument(
        "--cache",
        type=pathlib.Path,
        default=_default_cache(),
        help="sdists, environments, work folders",
    )
    parser.add_argument(
        "--out",
        type=pathlib.Path,
        help="keep records, diffs, test logs and report.md/report.json here",
    )
    parser.add_argument("--no-tests", action="store_true", help="skip the packages' tests")
    parser.add_argument("--no-per-file", action="store_true", help="skip timing each file alone")
    parser.add_argument("--no-namedtuples", action="store_true", help="run without --namedtuples")
    parser.add_argument("--timeout", type=float, default=900, help="seconds for one test run")
    parser.add_argument(
        "--mirrors",
        type=pathlib.Path,
        help="DIR/owner+name/repo: git clones, for tests that only the repository ships",
    )
    parser.add_argument(
        "--append",
        action="store_true",
        help="keep the packages of --out's report.json that this run does not run (one"
        " package per run, one table for all)",
    )
    args = parser.parse_args(argv)
    if args.append and not args.out:
        parser.error("--append needs --out (the report.json it adds to)")
    flags = [] if args.no_namedtuples else ["--namedtuples"]
    command = "python -m benchmarks.migrate_packages " + " ".join(
        sys.argv[1:] if argv is None else argv
    )
    kept: list[dict[str, object]] = []
    if args.append and (args.out / "report.json").exists():
        kept = json.loads((args.out / "report.json").read_text())
    results: list[dict[str, object]] = []
    for package in (p for p in PACKAGES if not args.only or p.name in args.only):
        print(f"# {package.name} {package.version}", file=sys.stderr, flush=True)
        start = time.perf_counter()
        results.append(
            measure(
                package,
                args.cache,
                tool=args.tool.resolve(),
                flags=flags,
                tests=not args.no_tests,
                per_file=not args.no_per_file,
                timeout=args.timeout,
                out=args.out,
                mirrors=args.mirrors,
            )
        )
        r = results[-1]
        print(
            f"# {package.name}: found {r['found']} {r['status']}, tests {r['tests_before']} -> {r['tests_after']}, {time.perf_counter() - start:.0f} s",
            file=sys.stderr,
            flush=True,
        )
        r["command"] = command
        if args.out:
            write_reports(args.out, _merged(kept, results), str(args.tool))
    every = _merged(kept, results)
    for table in tables(results):
        print(f"\n{table.text()}")
    print(f"\n{packages_md(every)}")


def _merged(
    kept: Sequence[dict[str, object]], results: Sequence[dict[str, object]]
) -> list[dict[str, object]]:
    """The packages kept from an earlier report, in the order of PACKAGES, each replaced
    by this run's result where this run ran it."""
    by_name = {str(r.get("name", r["package"])): r for r in [*kept, *results]}
    order = [p.name for p in PACKAGES]
    return sorted(by_name.values(), key=lambda r: order.index(str(r["name"])))


def write_reports(out: pathlib.Path, results: Sequence[dict[str, object]], tool: str) -> None:
    """report.json (every figure), report.md (the tables and every class) and
    packages.md (the packages table with the commands that made it)."""
    out.mkdir(parents=True, exist_ok=True)
    (out / "report.json").write_text(json.dumps(list(results), indent=1))
    (out / "report.md").write_text(report_md(results, tool))
    (out / "packages.md").write_text(packages_md(results))


def packages_md(results: Sequence[dict[str, object]]) -> str:
    """The packages table in Markdown, under the commands that produced its rows."""
    commands = sorted({str(r.get("command", "")) for r in results} - {""})
    lines = [packages_table(results).markdown(), "", "Produced by:", ""]
    lines += [f"    {c}" for c in commands]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()
