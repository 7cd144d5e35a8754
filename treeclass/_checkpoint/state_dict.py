"""State dicts (nested dicts with string keys, as in flax): `to_state_dict()`,
`from_state_dict()`, and `restore()`, the one walk that fills a template from what was saved,
a state dict or (for `load()`) a file's manifest, reporting each mismatch at its field path.

`restore()` walks the template and asks the saved side, a `sources.Source`, for each node's
children and each leaf; the checks of a state dict and of a file live there."""

from collections.abc import Iterable, Mapping
from typing import Any, TypeVar

import jax

from treeclass._checkpoint.sources import Source
from treeclass._checkpoint.template import check_root, config_child, keyed, wrong_argument
from treeclass._core.walk import KeyPath, Rule, node_def, path_str, rule_of

_T = TypeVar("_T")


def to_state_dict(obj: Any) -> dict[str, Any]:
    """Returns the state of `obj`: nested dicts of its dynamic leaves, as they are.

    A treeclass becomes `{field: ...}`, a list or tuple `{"0": ...}`, a dict `{str(key): ...}`
    (as in `flax.serialization`), `None` stays `None`; statics are left out, and so is the
    configuration inside an equinox Module (every leaf not an array, as equinox has it).

    **Arguments**

    - `obj`: a treeclass instance, or a list, tuple or dict of them.

    **Returns**

    A `dict` with `str` keys, holding `obj`'s leaves themselves, not copies.

    **Raises**

    `TypeError` if `obj` is a leaf, `None` or a class; `ValueError` if two keys of a dict
    have the same `str()` (`1` and `"1"`).

    **Example**

    >>> class Dense(tc.TreeClass):
    ...     w: jax.Array
    ...     act: str = tc.static(default="relu")
    >>> mlp = [Dense(jnp.ones((2, 3))), Dense(jnp.ones((3, 1)))]
    >>> state = tc.to_state_dict(mlp)
    >>> list(state), list(state["1"]), state["0"]["w"] is mlp[0].w
    (['0', '1'], ['w'], True)
    """
    root = check_root(obj, "to_state_dict", "obj")

    def state(x: Any, path: KeyPath, rule: Rule) -> Any:
        """The state of `x` at `path`: a leaf as it is, a node as a dict of its children's
        states, configuration left out; `rule`: the rule of `x`'s owner."""
        pairs = None if x is None else keyed(x, lambda: path_str(root, path))
        if pairs is None:
            return x
        inner = rule_of(x, rule)
        return {
            key: state(child, (*path, entry), inner)
            for entry, key, child in pairs
            if not config_child(inner, child)
        }

    return state(obj, (), "plain")  # type: ignore[no-any-return]


def from_state_dict(template: _T, state: Mapping[str, Any]) -> _T:
    """Returns `template` with its dynamic leaves replaced by those of `state`.

    The inverse of `to_state_dict`: every key, and every leaf's kind, shape and dtype must
    match the template's, whose statics are kept. A list may stand for a tuple (orbax).

    **Arguments**

    - `template`: an instance built like the one the state came from.
    - `state`: a state dict, as `to_state_dict` (or flax, or orbax) returns.

    **Returns**

    An instance of `type(template)`; no `__init__`, converter or `__post_init__` runs.

    **Raises**

    `CheckpointError` naming the field path for any mismatch; `TypeError` if `template` is
    not a container or `state` not a mapping.

    **Example**

    >>> class Neuron(tc.TreeClass):
    ...     v: jax.Array
    ...     tau: float = tc.static(default=20.0)
    >>> tc.from_state_dict(Neuron(jnp.zeros(3)), {"v": jnp.ones(3)}).v.tolist()
    [1.0, 1.0, 1.0]
    """
    root = check_root(template, "from_state_dict", "template")
    # Untyped callers pass anything; the annotation says what is checked here.
    if not isinstance(state, Mapping):  # pyright: ignore[reportUnnecessaryIsInstance]
        takes = "the state as a dict, as to_state_dict() returns"
        raise wrong_argument(takes, "from_state_dict", state)
    return restore(template, state, (), Source(root))  # type: ignore[no-any-return]


def restore(template: Any, saved: Any, path: KeyPath, source: Source, rule: Rule = "plain") -> Any:
    """`template` with its leaves from `saved`, rebuilt as JAX does (no user code runs).

    `saved` is what `source` holds at `path`: a state dict's value, or a file's manifest
    entry. `rule`: the rule of the template's owner (`walk.rule_of`), which says which
    children are configuration: taken from the template, and compared where `source` holds
    them (a file). Raises at the first difference, naming its path."""
    if template is None:
        if saved is not None:
            raise source.mismatch(path, template, saved)
        return None
    pairs = keyed(template, lambda: path_str(source.root, path))
    if pairs is None:
        return source.leaf(template, saved, path)
    inner = rule_of(template, rule)
    is_config = [config_child(inner, child) for _, _, child in pairs]
    given = source.children(template, saved, path)
    expected = [
        key
        for (_, key, _), config in zip(pairs, is_config, strict=True)
        if source.holds_config or not config
    ]
    differ = differences(expected, given, source.name)
    if differ is not None:
        raise source.error(path, differ)
    values = [
        source.config((*path, entry), child, given.get(key))
        if config
        else restore(child, given[key], (*path, entry), source, inner)
        for (entry, key, child), config in zip(pairs, is_config, strict=True)
    ]
    return jax.tree.unflatten(node_def(template), values)


def differences(expected: list[str], given: Iterable[str], source: str) -> str | None:
    """What differs between the template's keys and the saved ones; None if nothing.

    `source` names the saved side in the message (`missing from the file: 'w'`)."""
    missing = [key for key in expected if key not in given]
    known = set(expected)  # made once: a hostile file's manifest may hold many unexpected keys
    unexpected = [key for key in given if key not in known]
    parts = []
    if missing:
        parts.append(f"missing from the {source}: {', '.join(map(repr, missing))}")
    if unexpected:
        parts.append(f"in the {source} but not the template: {', '.join(map(repr, unexpected))}")
    return f"structure differs ({'; '.join(parts)})" if parts else None
