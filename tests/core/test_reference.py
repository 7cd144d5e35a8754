"""treeclass against a reference model of its contract, over generated class declarations.

Each test draws whole modules of treeclasses (tests/class_strategies.py: every static
spelling and place of `Static`, converters, defaults, `init=False`, `__post_init__`,
`__check_init__`, hand-written `__init__`s, inheritance, both forms, `from __future__
import annotations`), builds an instance with treeclass and with the model
(tests/reference.py), and compares one public operation (tests/reference_checks.py).
A failure prints the module's source and the construction, ready to paste next to
tests/class_strategies.py and run.

A few examples per test here; `python -m benchmarks --only reference --cases N` runs
the long search and counts the disagreements by kind.
"""

import reference_checks as checks
from class_source import in_new_process
from class_strategies import Case, cases
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

# Shrinking a generated module takes minutes; the drawn source is readable as it is.
REFERENCE = settings(
    max_examples=15, deadline=None, phases=(Phase.explicit, Phase.reuse, Phase.generate),
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


@REFERENCE
@given(cases())
def test_leaves_and_key_paths(case: Case):
    checks.check_leaves_and_key_paths(case)


@REFERENCE
@given(cases())
def test_treedef_holds_the_statics(case: Case):
    checks.check_treedef_statics(case)


@REFERENCE
@given(cases())
def test_attribute_is_the_leaf(case: Case):
    checks.check_attribute_is_leaf(case)


@REFERENCE
@given(cases())
def test_construction_runs_each_hook_once(case: Case):
    checks.check_construction_calls(case)


@REFERENCE
@given(cases())
def test_replace(case: Case):
    checks.check_replace(case)


@REFERENCE
@given(cases())
def test_jit_round_trip(case: Case):
    checks.check_jit_round_trip(case)


@REFERENCE
@given(cases())
def test_device_put(case: Case):
    checks.check_device_put(case)


@REFERENCE
@given(cases())
def test_pickle(case: Case):
    checks.check_pickle(case)


@REFERENCE
@given(cases())
def test_deepcopy(case: Case):
    checks.check_deepcopy(case)


@REFERENCE
@given(cases())
def test_cloudpickle(case: Case):
    checks.check_cloudpickle(case)


@settings(REFERENCE, max_examples=1)
@given(st.lists(cases(), min_size=3, max_size=3))
def test_cloudpickle_carries_no_trace_history(batch: list[Case]):
    # One new process for the batch: in this process cloudpickle hands back the class
    # it already has, with its trace log.
    outcomes = in_new_process([(case.module, case.call) for case in batch])
    for case, outcome in zip(batch, outcomes, strict=True):
        if not outcome.startswith("in this process"):  # the other tests report those
            assert outcome == "ok", f"in a new process, obj.same() raised {outcome}\n{case!r}"


@REFERENCE
@given(cases())
def test_state_dict(case: Case):
    checks.check_state_dict(case)


@REFERENCE
@given(cases())
def test_save_load(case: Case):
    checks.check_save_load(case)


@REFERENCE
@given(cases())
def test_partition(case: Case):
    checks.check_partition(case)


@REFERENCE
@given(cases())
def test_grad(case: Case):
    checks.check_grad(case)


@REFERENCE
@given(cases())
def test_stack_unstack(case: Case):
    checks.check_stack_unstack(case)


@REFERENCE
@given(cases())
def test_replace_at(case: Case):
    checks.check_replace_at(case)


def test_every_check_has_its_test():
    tested = {name.removeprefix("test_") for name in globals() if name.startswith("test_")}
    names = {
        "treedef_statics": "treedef_holds_the_statics",
        "attribute_is_leaf": "attribute_is_the_leaf",
        "construction_calls": "construction_runs_each_hook_once",
    }
    assert {names.get(k, k) for k in checks.CHECKS} <= tested
