"""`@treeclass` and `TreeClass`: both run `process()` on the class itself (no metaclass,
no wrapper): prepare, `dataclasses.dataclass`, layout, generate, install, register."""

import dataclasses
import functools
import inspect
import sys
import types
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Final, Self, TypeVar, cast, overload

from typing_extensions import dataclass_transform

from treeclass._core import checks, codegen, flatten, init, replace, show, tree
from treeclass._core.fields import STATIC, TRAINABLE, field, static
from treeclass._core.layout import BUILDING, LAYOUT, analyse, layout_of
from treeclass._core.prepare import prepare

_T = TypeVar("_T")

# Called with each new treeclass, so layers above `_core` subscribe without an import cycle.
ON_CLASS: Final[list[Callable[[type], object]]] = []

# Names the generated code or the instance dict use; a field may not take them.
_RESERVED: Final = {
    "replace": "the replace() method",
    LAYOUT: "the class's record",
}
# Methods treeclass must own; a class body that defines them is refused, not overridden.
_OWNED: Final = {
    "replace": "use a converter or __post_init__ to customise construction",
    "__replace__": "copy.replace() calls replace()",
    "tree_flatten": "treeclass registers the class with JAX itself",
    "tree_unflatten": "treeclass registers the class with JAX itself",
}


def _check_fields(cls: type) -> None:
    for f in dataclasses.fields(cls):
        static = f.metadata.get(STATIC, False)
        trainable = f.metadata.get(TRAINABLE, True)
        # Every field gets both keys (a plain annotation has empty metadata); a static
        # field holds no leaves, so none of it is trainable.
        f.metadata = types.MappingProxyType(
            {**f.metadata, STATIC: static, TRAINABLE: trainable and not static}
        )
        if f.name in _RESERVED or f.name.startswith("_tc_"):
            why = _RESERVED.get(f.name, "generated code uses the _tc_ prefix")
            msg = checks.MSG_RESERVED_NAME.format(
                cls=cls.__name__, name=f.name, why=why, what="field"
            )
            raise TypeError(msg)


_MSG_BASE_FORM_OPTIONS: Final = """\
{cls} subclasses tc.TreeClass, so it is a treeclass already, built with the class
keywords ({built}); the decorator's options would be ignored. Pass them as class
keywords instead:

    class {cls}({bases}, kw_only=True):
        ..."""

_MSG_OPTIONS_AGAIN: Final = """\
{cls} is a treeclass already, built with {built}; decorating it again with other
options would not apply them. Decorate the class once, with the options you want."""


def _frozen_error(self: object, name: str, verb: str) -> dataclasses.FrozenInstanceError:
    cls = type(self).__name__
    msg = checks.MSG_FROZEN.format(verb=verb, cls=cls, name=name)
    layout = layout_of(self)
    if layout is None or name not in layout.names:
        msg += f"\n\n{name!r} is not a field of {cls}; declare it in the class to store it."
    return dataclasses.FrozenInstanceError(msg)


def _setattr(self: Any, name: str, value: Any) -> None:
    # Allowed: `self.w = ...` in the instance's own hand-written `__init__` (init.py marks
    # it), and `Box[int](1)`, whose alias typing records (metadata, not a field).
    if name not in BUILDING.get(id(self), ()) and name != "__orig_class__":
        raise _frozen_error(self, name, "assign to")
    self.__dict__[name] = value  # a dict of its own replaces it when `__init__` returns


def _delattr(self: Any, name: str) -> None:
    raise _frozen_error(self, name, "delete")


def _install_dunders(cls: type, *, repr: bool, eq: bool) -> None:  # noqa: A002
    """As dataclasses does, where the body has none (`__eq__` alone sets `__hash__ = None`)."""
    own = set(vars(cls))
    if "__eq__" in own and vars(cls).get("__hash__") is None:
        own.discard("__hash__")  # Python's None for the body's `__eq__`: ours goes in
    ours = {"__repr__": show.tree_repr, "__treescope_repr__": show.treescope_repr} if repr else {}
    ours |= {"__eq__": tree.eq, "__hash__": tree.hash_} if eq else {}
    _install(cls, **{name: method for name, method in ours.items() if name not in own})


def _install(cls: type, **methods: object) -> None:
    # setattr: checkers read `cls.__eq__ = ...` as assigning to `type`, an error per line.
    for name, method in methods.items():
        setattr(cls, name, method)


def _inherited_init(cls: type) -> Callable[..., None] | None:
    """A fieldless subclass inherits its nearest treeclass base's hand-written `__init__`."""
    own = inspect.get_annotations(cls)
    if any(f.name in own for f in dataclasses.fields(cls)):
        return None
    parent = next((layout_of(b) for b in cls.__mro__[1:] if layout_of(b) is not None), None)
    return None if parent is None else parent.user_init


def _mark_abstract(cls: type) -> None:
    """Sets `__abstractmethods__` as `abc.ABCMeta` does; `__init__` repeats the check 3.13 skips."""
    names = {name for k in cls.__mro__ for name in vars(k)}
    abstract = {
        n
        for n in names
        if getattr(inspect.getattr_static(cls, n, None), "__isabstractmethod__", False)
    }
    if not abstract:
        return
    _install(cls, __abstractmethods__=frozenset(abstract))
    init = cast("Callable[..., None]", vars(cls)["__init__"])

    @functools.wraps(init)
    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:  # noqa: N807
        if type(self) is cls:
            object.__new__(cls)  # raises CPython's own "Can't instantiate abstract class"
        init(self, *args, **kwargs)

    _install(cls, __init__=__init__)


def process(cls: type, *, kw_only: bool, repr: bool, eq: bool) -> type:  # noqa: A002
    """Makes `cls` a treeclass: the one path for the decorator and `TreeClass`."""
    user_init = cls.__dict__.get("__init__")
    for name, why in _OWNED.items():
        if name in cls.__dict__:
            msg = checks.MSG_RESERVED_NAME.format(
                cls=cls.__name__, name=name, why=why, what="method"
            )
            raise TypeError(msg)
    restore = prepare(cls)
    # eq/repr=False: ours are installed below; init=True still checks the argument order.
    dataclasses.dataclass(cls, frozen=True, eq=False, repr=False, kw_only=kw_only)
    restore()
    _check_fields(cls)
    user_init = user_init or _inherited_init(cls)
    layout = analyse(cls, user_init, {"kw_only": kw_only, "repr": repr, "eq": eq})
    construct = init.init_source(layout) if user_init is None else init.finalize_source(layout)
    sources = [construct, replace.source(layout), *flatten.sources(layout)]
    ns = codegen.compile_class(layout, sources)
    flatten.complete(layout, ns)
    replace_fn = replace.install(layout, ns)
    _install(
        cls,
        __init__=init.install(layout, ns),
        replace=replace_fn,
        __replace__=replace_fn,
        __setattr__=_setattr,
        __delattr__=_delattr,
        __getstate__=flatten.getstate,
        __setstate__=flatten.setstate,
    )
    _install_dunders(cls, repr=repr, eq=eq)
    _mark_abstract(cls)
    # `replace()` goes through `__init__` once something else stands there (replace.py).
    ns["_tc_own_init"] = vars(cls)["__init__"]
    setattr(cls, LAYOUT, layout)
    flatten.register(layout)
    for hook in ON_CLASS:
        hook(cls)
    return cls


@overload
def treeclass(cls: type[_T], /) -> type[_T]: ...
@overload
def treeclass(
    *, kw_only: bool = False, repr: bool = True, eq: bool = True, frozen: bool = True
) -> Callable[[type[_T]], type[_T]]: ...
@dataclass_transform(frozen_default=True, field_specifiers=(field, static))
def treeclass(
    cls: type[_T] | None = None,
    /,
    *,
    kw_only: bool = False,
    repr: bool = True,  # noqa: A002
    eq: bool = True,
    frozen: bool = True,  # read by type checkers (dataclass_transform), not at runtime
) -> type[_T] | Callable[[type[_T]], type[_T]]:
    """Makes `cls` a frozen dataclass and a JAX pytree, and returns it.

    Dynamic fields (the default) are the pytree's children; static fields
    (`tc.static()`, `field(static=True)` or `Static[T]`) go in the treedef.

    **Arguments**

    - `cls`: the class; omit it to pass options (`@tc.treeclass(kw_only=True)`).
    - `kw_only`: make every field keyword-only in `__init__`.
    - `repr`: install the array-summarising `__repr__` (unless the body defines one).
    - `eq`: install `__eq__` (`tree_equal`) and `__hash__`, each unless the body defines it.
    - `frozen`: for type checkers only: `False` lets a hand-written `__init__` assign fields.

    **Returns**

    `cls` itself. Decorating a treeclass again returns it unchanged.

    **Raises**

    `TypeError` for an array or unhashable static default, a reserved name (`replace`, ...),
    an unresolvable string annotation, the dataclass errors; `ValueError` for a mutable default.

    **Example**

    >>> @tc.treeclass
    ... class Neuron:
    ...     v: jax.Array
    ...     tau: float = tc.static(default=20.0)
    >>> n = Neuron(jnp.zeros(3))
    >>> n, len(jax.tree.leaves(n))
    (Neuron(v=f32[3], tau=20.0), 1)
    >>> n.v = jnp.ones(3)
    Traceback (most recent call last):
    dataclasses.FrozenInstanceError: cannot assign to Neuron.v: treeclass instances are immutable.
    ...
    """

    def wrap(c: type[_T]) -> type[_T]:
        if not isinstance(c, type):  # pyright: ignore[reportUnnecessaryIsInstance] - untyped callers
            msg = f"@treeclass decorates a class; got {c!r}."
            raise TypeError(msg)
        layout = layout_of(c)
        if layout is not None:
            options = {"kw_only": kw_only, "repr": repr, "eq": eq}
            if options in ({"kw_only": False, "repr": True, "eq": True}, layout.options):
                return c
            bases = ", ".join(b.__name__ for b in c.__bases__)
            template = _MSG_BASE_FORM_OPTIONS if issubclass(c, TreeClass) else _MSG_OPTIONS_AGAIN
            built = ", ".join(f"{k}={v}" for k, v in layout.options.items())
            raise TypeError(template.format(cls=c.__name__, bases=bases, built=built))
        return process(c, kw_only=kw_only, repr=repr, eq=eq)

    return wrap if cls is None else wrap(cls)


# frozen_default=True: checkers flag `obj.x = ...`; a class whose __init__ assigns it: frozen=False.
@dataclass_transform(frozen_default=True, field_specifiers=(field, static))
class TreeClass:
    """A base class that makes every subclass a treeclass, as `@tc.treeclass` does.

    `TreeClass` itself has no fields and is not a pytree. Both forms mix freely: either
    may hold, subclass or be subclassed by the other.

    **Arguments** (class keywords)

    `kw_only`, `repr`, `eq` and `frozen`, as `tc.treeclass` takes them.

    **Returns**

    Each subclass, processed as `@tc.treeclass(...)` would.

    **Raises**

    At class definition, the errors `@tc.treeclass` raises.

    **Example**

    >>> class Linear(tc.TreeClass):
    ...     w: jax.Array
    ...     act: tc.Static[str] = "relu"
    >>> Linear(jnp.ones(2)).replace(act="tanh")
    Linear(w=f32[2], act='tanh')
    >>> class MLP(tc.TreeClass, kw_only=True):
    ...     layers: tuple[Linear, ...]
    >>> len(jax.tree.leaves(MLP(layers=(Linear(jnp.ones(2)),) * 3)))
    3
    """

    def __init_subclass__(
        cls,
        *,
        kw_only: bool = False,
        repr: bool = True,  # noqa: A002 - the decorator's option, by its name
        eq: bool = True,
        frozen: bool = True,  # read by type checkers (dataclass_transform), not at runtime
        **kwargs: Any,
    ) -> None:
        super().__init_subclass__(**kwargs)
        # cloudpickle creates the class empty, then sets the processed one's attributes (its
        # record, unpickled, registers it): not processed here.
        caller = sys._getframe(1).f_back  # the caller of types.new_class, which calls this
        if caller is not None and caller.f_code.co_name == "_make_skeleton_class":
            return
        process(cls, kw_only=kw_only, repr=repr, eq=eq)

    if TYPE_CHECKING:
        # Each subclass gets its own generated `replace`; TreeClass has none at runtime.
        def replace(self, /, **changes: Any) -> Self:
            """Returns a copy with the given fields changed (see `treeclass.replace`)."""
            ...

        def __replace__(self, /, **changes: Any) -> Self: ...
