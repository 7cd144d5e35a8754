"""treeclass: classes that are JAX pytrees, with static fields, `replace()` and jit-safe methods."""

from treeclass._checkpoint.npz import load as load, save as save
from treeclass._checkpoint.state_dict import (
    from_state_dict as from_state_dict,
    to_state_dict as to_state_dict,
)
from treeclass._checkpoint.template import CheckpointError as CheckpointError
from treeclass._core.checks import RecompileWarning as RecompileWarning
from treeclass._core.decorator import TreeClass as TreeClass, treeclass as treeclass
from treeclass._core.fields import Static as Static, field as field, static as static
from treeclass._core.flatten import prefix as prefix
from treeclass._core.replace import replace as replace
from treeclass._core.stack import stack as stack, unstack as unstack
from treeclass._core.tree import (
    fields as fields,
    is_treeclass as is_treeclass,
    tree_equal as tree_equal,
)
from treeclass._jit.bind import BoundMethod as BoundMethod, bind as bind
from treeclass._jit.jit import jit as jit
from treeclass._jit.retrace import RetraceError as RetraceError, RetraceWarning as RetraceWarning
from treeclass._paths.replace_at import replace_all as replace_all, replace_at as replace_at
from treeclass._sharding.shardings import partition_specs as partition_specs, shardings as shardings
from treeclass._train.grad import (
    apply_updates as apply_updates,
    grad as grad,
    value_and_grad as value_and_grad,
)
from treeclass._train.select import (
    SharedArrayWarning as SharedArrayWarning,
    combine as combine,
    is_inexact_array as is_inexact_array,
    partition as partition,
)
from treeclass._train.summary import summary as summary

__version__ = "0.1.0.dev0"

__all__ = [
    "BoundMethod",
    "CheckpointError",
    "RecompileWarning",
    "RetraceError",
    "RetraceWarning",
    "SharedArrayWarning",
    "Static",
    "TreeClass",
    "apply_updates",
    "bind",
    "combine",
    "field",
    "fields",
    "from_state_dict",
    "grad",
    "is_inexact_array",
    "is_treeclass",
    "jit",
    "load",
    "partition",
    "partition_specs",
    "prefix",
    "replace",
    "replace_all",
    "replace_at",
    "save",
    "shardings",
    "stack",
    "static",
    "summary",
    "to_state_dict",
    "tree_equal",
    "treeclass",
    "unstack",
    "value_and_grad",
]
