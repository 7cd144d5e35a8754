"""NamedTuples used as tuples (the migration corpus, tests/migrate/test_migrate_corpus.py): the
converted class keeps the tuple protocol (`_replace`, unpacking, indexing), so Carry
converts; what a treeclass cannot keep (`isinstance(x, tuple)`) refuses Pair."""

from collections.abc import Iterable, Iterator
from typing import Any, ClassVar, NamedTuple

import jax
import treeclass as tc


class Carry(tc.TreeClass):
    h: jax.Array
    c: jax.Array

    # The NamedTuple's tuple protocol (unpacking, indexing, iteration, len, _replace,
    # _fields, _asdict, _make), kept by treeclass.migrate: remove what no code uses.
    def __iter__(self) -> Iterator[jax.Array]:
        return iter((self.h, self.c))

    def __getitem__(self, index: int | slice) -> Any:
        return (self.h, self.c)[index]

    def __len__(self) -> int:
        return 2

    _fields: ClassVar[tuple[str, ...]] = ("h", "c")

    def _replace(self, **changes: Any) -> "Carry":
        return self.replace(**changes)

    def _asdict(self) -> dict[str, Any]:
        return {"h": self.h, "c": self.c}

    @classmethod
    def _make(cls, iterable: Iterable[Any]) -> "Carry":
        return cls(*iterable)


def step(carry, x):
    h, c = carry
    return carry._replace(h=h + x + c * carry[1])


class Pair(NamedTuple):
    a: jax.Array
    b: jax.Array


def is_tuple(p: Pair) -> bool:
    return isinstance(p, tuple)
