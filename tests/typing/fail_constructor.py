"""The generated `__init__` is typed: missing, unknown, surplus and mistyped arguments
are flagged, `Static[T]` fields included.

Each intentional error carries the mypy code (`# type: ignore[...]`) and the pyright
rule (`# pyright: ignore[...]`) it must raise: both checkers reject an ignore that
hides nothing, and `tests/project/test_typing.py` pins the messages.
"""

import jax

import treeclass as tc


@tc.treeclass
class Neuron:
    v: jax.Array
    tau: float = tc.static(default=20.0)
    dt: tc.Static[float] = 0.1
    count: int = tc.field(init=False, default=0)


@tc.treeclass
class Positional:
    # A default passed positionally works at runtime, but dataclass_transform reads
    # only the `default=` keyword: to the checkers `tau` has none (docs/faq.md).
    tau: float = tc.static(20.0)


@tc.treeclass(kw_only=True)
class Config:
    lr: float
    steps: int = tc.static(default=10)


def misuse(x: jax.Array) -> None:
    Neuron()  # type: ignore[call-arg]  # pyright: ignore[reportCallIssue]
    Neuron(x, bogus=1)  # type: ignore[call-arg]  # pyright: ignore[reportCallIssue]
    Neuron(x, 20.0, 0.1, 0)  # type: ignore[call-arg]  # pyright: ignore[reportCallIssue]
    Neuron(x, count=1)  # type: ignore[call-arg]  # pyright: ignore[reportCallIssue]
    Neuron(x, tau="slow")  # type: ignore[arg-type]  # pyright: ignore[reportArgumentType]
    Neuron(x, dt="fast")  # type: ignore[arg-type]  # pyright: ignore[reportArgumentType]
    Neuron(v=1.0)  # type: ignore[arg-type]  # pyright: ignore[reportArgumentType]
    Config(0.1)  # type: ignore[call-arg]  # pyright: ignore[reportCallIssue]
    Positional()  # type: ignore[call-arg]  # pyright: ignore[reportCallIssue]
