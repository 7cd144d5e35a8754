"""The benchmark class in peer libraries, each only if it imports.

`peers()` returns the contenders it could build and a note for each library it skipped.
`replace` uses each library's own one-field change: `.replace()` for flax and chex,
`jdc.replace()` (which is `dataclasses.replace`) for jax_dataclasses, and
`dataclasses.replace()` for equinox (its `eqx.tree_at` is a general tree-surgery tool:
the `whole_models` section times it).

chex dataclasses have no static fields, so the chex class carries the 8 arrays only,
like the raw containers in `contenders.py`.
"""

# No `from __future__ import annotations`: jax_dataclasses resolves `jdc.Static[...]`
# with `typing.get_type_hints`, which cannot see names local to the builder functions.
from collections.abc import Callable

import jax

from benchmarks.contenders import DC_REPLACE, Contender, all_kwargs, array_kwargs


def _equinox() -> Contender:
    import equinox as eqx

    class EqxModule(eqx.Module):
        a0: jax.Array
        a1: jax.Array
        a2: jax.Array
        a3: jax.Array
        a4: jax.Array
        a5: jax.Array
        a6: jax.Array
        a7: jax.Array
        n: int = eqx.field(static=True)
        name: str = eqx.field(static=True)

    return Contender("equinox.Module", EqxModule, all_kwargs(), DC_REPLACE)


def _equinox_init() -> Contender:
    import equinox as eqx

    class EqxInit(eqx.Module):
        a0: jax.Array
        a1: jax.Array
        a2: jax.Array
        a3: jax.Array
        a4: jax.Array
        a5: jax.Array
        a6: jax.Array
        a7: jax.Array
        n: int = eqx.field(static=True)
        name: str = eqx.field(static=True)

        def __init__(self, a0, a1, a2, a3, a4, a5, a6, a7, n, name):
            self.a0, self.a1, self.a2, self.a3 = a0, a1, a2, a3
            self.a4, self.a5, self.a6, self.a7 = a4, a5, a6, a7
            self.n, self.name = n, name

    return Contender("equinox: hand-written __init__", EqxInit, all_kwargs(), DC_REPLACE)


def _flax() -> Contender:
    from flax import struct

    @struct.dataclass
    class FlaxStruct:
        a0: jax.Array
        a1: jax.Array
        a2: jax.Array
        a3: jax.Array
        a4: jax.Array
        a5: jax.Array
        a6: jax.Array
        a7: jax.Array
        n: int = struct.field(pytree_node=False)
        name: str = struct.field(pytree_node=False)

    return Contender("flax.struct.dataclass", FlaxStruct, all_kwargs(), "obj.replace(a3=x)")


def _chex() -> Contender:
    import chex

    @chex.dataclass(frozen=True)
    class ChexDataclass:
        a0: jax.Array
        a1: jax.Array
        a2: jax.Array
        a3: jax.Array
        a4: jax.Array
        a5: jax.Array
        a6: jax.Array
        a7: jax.Array

    return Contender(
        "chex.dataclass",
        ChexDataclass,
        array_kwargs(),
        "obj.replace(a3=x)",
        note="8 arrays only: chex has no static fields",
    )


def _jax_dataclasses() -> Contender:
    import jax_dataclasses as jdc

    @jdc.pytree_dataclass
    class JdcDataclass:
        a0: jax.Array
        a1: jax.Array
        a2: jax.Array
        a3: jax.Array
        a4: jax.Array
        a5: jax.Array
        a6: jax.Array
        a7: jax.Array
        n: jdc.Static[int]
        name: jdc.Static[str]

    return Contender("jax_dataclasses", JdcDataclass, all_kwargs(), DC_REPLACE)


_BUILDERS: dict[str, Callable[[], Contender]] = {
    "equinox": _equinox,
    "equinox (hand-written __init__)": _equinox_init,
    "flax": _flax,
    "chex": _chex,
    "jax_dataclasses": _jax_dataclasses,
}


def build(library: str) -> Contender:
    """The contender for one library ("equinox", "flax", ...); ImportError if missing."""
    return _BUILDERS[library]()


def peers() -> tuple[list[Contender], list[str]]:
    """The peer contenders that import, and one note per library skipped."""
    found, skipped = [], []
    for library, build in _BUILDERS.items():
        try:
            found.append(build())
        except ImportError as e:
            skipped.append(f"{library}: skipped ({e})")
    return found, skipped
