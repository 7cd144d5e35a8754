"""The base-class form: frozen assignment, constructor and `replace()` misuse flagged.

Each intentional error carries the mypy code (`# type: ignore[...]`) and the pyright
rule (`# pyright: ignore[...]`) it must raise: both checkers reject an ignore that
hides nothing, and `tests/project/test_typing.py` pins the messages.
"""

import jax

import treeclass as tc


class Linear(tc.TreeClass):
    w: jax.Array
    act: tc.Static[str] = "relu"

    def reset(self) -> None:
        self.w = self.w * 0  # type: ignore[misc]  # pyright: ignore[reportAttributeAccessIssue]


class Config(tc.TreeClass, kw_only=True):
    lr: float


def misuse(layer: Linear, x: jax.Array) -> None:
    layer.w = x  # type: ignore[misc]  # pyright: ignore[reportAttributeAccessIssue]
    layer.act = "tanh"  # type: ignore[misc]  # pyright: ignore[reportAttributeAccessIssue]
    Linear()  # type: ignore[call-arg]  # pyright: ignore[reportCallIssue]
    Linear(x, act=1)  # type: ignore[arg-type]  # pyright: ignore[reportArgumentType]
    Config(0.1)  # type: ignore[call-arg]  # pyright: ignore[reportCallIssue]


def keeps_the_class(layer: Linear) -> Config:
    return layer.replace(act="tanh")  # type: ignore[return-value]  # pyright: ignore[reportReturnType]
