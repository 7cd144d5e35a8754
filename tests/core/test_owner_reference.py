"""treeclass against equinox itself, over generated models that mix other libraries'
nodes in treeclass fields (the owner rule, docs/with-other-libraries.md).

Each test draws a chain of 1-3 treeclasses (both forms) holding equinox layers (Linear,
MLP, Conv, BatchNorm with its State, Dropout, LayerNorm, Embedding, GRUCell, Sequential,
Lambda), flax.struct and chex nodes, Python floats and arrays (tests/class_strategies.py
`MixedCase`), and compares one operation with equinox's filtered transforms on its
Modules and plain JAX elsewhere (tests/reference_checks.py `MIXED_CHECKS`). A few
examples per test here; `python -m benchmarks --only owner --cases N` runs the long
search and counts the disagreements by kind.
"""

import pytest
import reference_checks as checks
from class_strategies import MixedCase, mixed_cases
from hypothesis import HealthCheck, Phase, given, settings

pytest.importorskip("equinox")
pytest.importorskip("flax.struct")
pytest.importorskip("optax")

pytestmark = pytest.mark.usefixtures("jax_defaults")  # equinox's layers, JAX's defaults

# Each example builds and compiles a model: a few per check keep this file under a minute.
OWNER = settings(
    max_examples=6,
    deadline=None,
    phases=(Phase.explicit, Phase.reuse, Phase.generate),
    suppress_health_check=[
        HealthCheck.too_slow,
        HealthCheck.data_too_large,
        HealthCheck.function_scoped_fixture,
    ],
)


@OWNER
@given(mixed_cases())
def test_partition_is_eqx_partition(case: MixedCase):
    checks.mixed_check_partition(case)


@OWNER
@given(mixed_cases())
def test_grad_is_eqx_filter_grad(case: MixedCase):
    checks.mixed_check_grad(case)


@OWNER
@given(mixed_cases())
def test_jit_is_eqx_filter_jit(case: MixedCase):
    checks.mixed_check_jit(case)


@OWNER
@given(mixed_cases())
def test_apply_updates_is_eqx_apply_updates(case: MixedCase):
    checks.mixed_check_apply_updates(case)


@OWNER
@given(mixed_cases())
def test_summary_counts_the_parameters(case: MixedCase):
    checks.mixed_check_summary(case)


@OWNER
@given(mixed_cases())
def test_state_dict_round_trips(case: MixedCase):
    checks.mixed_check_state_dict(case)


@OWNER
@given(mixed_cases())
def test_save_load_is_eqx_serialisation(case: MixedCase):
    checks.mixed_check_save_load(case)


@OWNER
@given(mixed_cases())
def test_shardings_place_the_arrays_and_leave_the_configuration(case: MixedCase):
    checks.mixed_check_shardings(case)


@OWNER
@given(mixed_cases())
def test_stack_keeps_the_configuration_once(case: MixedCase):
    checks.mixed_check_stack(case)


def test_every_mixed_check_has_its_test():
    tested = {name for name in globals() if name.startswith("test_")}
    names = {
        "partition": "test_partition_is_eqx_partition",
        "grad": "test_grad_is_eqx_filter_grad",
        "jit": "test_jit_is_eqx_filter_jit",
        "apply_updates": "test_apply_updates_is_eqx_apply_updates",
        "summary": "test_summary_counts_the_parameters",
        "state_dict": "test_state_dict_round_trips",
        "save_load": "test_save_load_is_eqx_serialisation",
        "shardings": "test_shardings_place_the_arrays_and_leave_the_configuration",
        "stack": "test_stack_keeps_the_configuration_once",
    }
    assert {names[k] for k in checks.MIXED_CHECKS} <= tested
