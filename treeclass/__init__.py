"""treeclass: classes that are JAX pytrees, with static fields, `replace()` and jit-safe methods."""

from treeclass._bind import BoundMethod as BoundMethod
from treeclass._bind import bind as bind
from treeclass._checks import RecompileWarning as RecompileWarning
from treeclass._field import Static as Static
from treeclass._field import field as field
from treeclass._field import static as static
from treeclass._flatten import prefix as prefix
from treeclass._grad import apply_updates as apply_updates
from treeclass._grad import grad as grad
from treeclass._grad import value_and_grad as value_and_grad
from treeclass._jit import jit as jit
from treeclass._npz import load as load
from treeclass._npz import save as save
from treeclass._partition import combine as combine
from treeclass._partition import partition as partition
from treeclass._replace import replace as replace
from treeclass._replace_at import replace_at as replace_at
from treeclass._retrace import RetraceError as RetraceError
from treeclass._retrace import RetraceWarning as RetraceWarning
from treeclass._serialization import CheckpointError as CheckpointError
from treeclass._serialization import from_state_dict as from_state_dict
from treeclass._serialization import to_state_dict as to_state_dict
from treeclass._sharding import partition_specs as partition_specs
from treeclass._sharding import shardings as shardings
from treeclass._summary import summary as summary
from treeclass._trainable import is_inexact_array as is_inexact_array
from treeclass._tree import fields as fields
from treeclass._tree import is_treeclass as is_treeclass
from treeclass._tree import tree_equal as tree_equal
from treeclass._treeclass import TreeClass as TreeClass
from treeclass._treeclass import treeclass as treeclass

__version__ = "0.1.0.dev0"

__all__ = [
    "BoundMethod",
    "CheckpointError",
    "RecompileWarning",
    "RetraceError",
    "RetraceWarning",
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
    "replace_at",
    "save",
    "shardings",
    "static",
    "summary",
    "to_state_dict",
    "tree_equal",
    "treeclass",
    "value_and_grad",
]
