"""NamedTuple states, converted only with --namedtuples (the migration corpus,
tests/migrate/test_migrate_corpus.py)."""

from collections.abc import Iterable, Iterator
from typing import Any, ClassVar, NamedTuple

import jax
import jax.numpy as jnp
import treeclass as tc


# converted: every field a child, in order.
class LoopState(tc.TreeClass):
    x: jax.Array
    i: jax.Array
    scale: float = 2.0

    # The NamedTuple's tuple protocol (unpacking, indexing, iteration, len, _replace,
    # _fields, _asdict, _make), kept by treeclass.migrate: remove what no code uses.
    def __iter__(self) -> Iterator[Any]:
        return iter((self.x, self.i, self.scale))

    def __getitem__(self, index: int | slice) -> Any:
        return (self.x, self.i, self.scale)[index]

    def __len__(self) -> int:
        return 3

    _fields: ClassVar[tuple[str, ...]] = ("x", "i", "scale")

    def _replace(self, **changes: Any) -> "LoopState":
        return self.replace(**changes)

    def _asdict(self) -> dict[str, Any]:
        return {"x": self.x, "i": self.i, "scale": self.scale}

    @classmethod
    def _make(cls, iterable: Iterable[Any]) -> "LoopState":
        return cls(*iterable)


def body(s):
    return LoopState(s.x * s.scale, s.i + 1)


# refused: an array default (a dataclass refuses it; one shared array today).
class Flags(NamedTuple):
    done: jax.Array = jnp.array(False)
