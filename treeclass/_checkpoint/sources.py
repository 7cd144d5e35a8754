"""The saved side of `restore()`, which it asks for each node's children and each leaf:
`Source` for a state dict, and the checks every side shares (what a mismatch says, shapes and
dtypes compared, numbers that must fit the template's dtype); `FileSource` for a file, whose
manifest entries are compared with the template before a member of the `Archive` is read."""

import contextlib
from collections.abc import Mapping
from typing import Any, Final, NoReturn, cast

import jax
import numpy as np
from jax.tree_util import GetAttrKey

from treeclass._checkpoint.archive import Archive
from treeclass._checkpoint.manifest import (
    SCALAR_NAMES,
    SCALAR_STORED,
    canonical,
    encode_static,
    leaf_record,
    node_statics,
    show_static,
)
from treeclass._checkpoint.template import (
    SCALAR_KINDS,
    CheckpointError,
    arraylike,
    as_template,
    dtype_str,
    fits,
    is_key,
    scalar_fits,
    state_key,
)
from treeclass._core.layout import layout_of
from treeclass._core.show import describe
from treeclass._core.walk import PYTHON_SCALARS, KeyPath, path_str

_MSG_FIX: Final = """

The template must be built like the object that was saved: the same fields, shapes,
dtypes and static values. Build it with the saved configuration, e.g. Model(...) or
jax.eval_shape(lambda: Model(...)), and restore into that."""

_MSG_CONFIG_FIX: Final = """

jax.eval_shape made the template's configuration (a layer's number or flag, such as
Dropout's p) abstract. Build the template with tc.jit(lambda: Model(...)).eval_shape(),
which keeps configuration as it is, or with Model(...), and restore into that."""

_MSG_FITS: Final = """\
the {kind} {value!r} in the {source} does not fit {dtype}, the template's dtype
(it would {become}). Restore into a template built concretely, Model(...), which holds
a Python {kind} here, not into jax.eval_shape(lambda: Model(...)), which makes it {dtype}"""

_MSG_KEYS: Final = """\
{saved} in the {source}, {template} in the template. Typed PRNG keys
(jax.random.key) and raw uint32 keys (jax.random.PRNGKey) are different leaves; make
the template hold what was saved, or convert the saved key:
jax.random.wrap_key_data(raw) makes a typed key, jax.random.key_data(key) a raw one"""

ShapeDtype = tuple[tuple[int, ...], str]  # an array leaf's shape and dtype name


class Source:
    """The saved side of `restore()` when it is a state dict, and the checks every saved side
    shares (`FileSource` inherits them): each failure is a `CheckpointError` whose message
    starts with the field path from `root` (`Model.layers[0].w: ...`)."""

    name = "state dict"  # how messages name the saved side: "shape (2,) in the state dict"
    holds_config = False  # a state dict leaves configuration out, as it leaves statics out

    def __init__(self, root: str) -> None:
        self.root = root

    def config(self, path: KeyPath, template: Any, saved: Any) -> Any:
        """The configuration leaf restored at `path`: the template's."""
        return template

    def error(self, path: KeyPath, what: str, fix: str = _MSG_FIX) -> CheckpointError:
        """The error for `what` differs at `path`, with the fix every mismatch shares."""
        return CheckpointError(f"{path_str(self.root, path)}: {what}{fix}")

    def show(self, saved: Any) -> str:
        """`saved` as a mismatch names it (`a jax.Array`)."""
        return describe(saved, shape=False)

    def mismatch(
        self, path: KeyPath, template: Any, saved: Any, fix: str = _MSG_FIX
    ) -> CheckpointError:
        """The error for a saved value of another kind than the template's at `path`."""
        theirs = f"{self.show(saved)} in the {self.name}"
        return self.error(path, f"{describe(template, shape=False)} in the template, {theirs}", fix)

    def compare(self, path: KeyPath, saved: ShapeDtype, template: ShapeDtype) -> None:
        """Raises where the saved array's shape or dtype is not the template's, naming a
        typed PRNG key against a raw one as such (not as a difference of shape)."""
        saved_is_key, template_is_key = saved[1].startswith("key<"), template[1].startswith("key<")
        if saved_is_key != template_is_key:
            were, are = (
                f"a typed PRNG key ({dtype})" if dtype.startswith("key<") else f"a {dtype} array"
                for dtype in (saved[1], template[1])
            )
            raise self.error(path, _MSG_KEYS.format(saved=were, template=are, source=self.name))
        for what, found, ours in zip(("shape", "dtype"), saved, template, strict=True):
            if found != ours:
                raise self.error(path, f"{what} {found} in the {self.name}, {ours} in the template")

    def children(self, template: Any, saved: Any, path: KeyPath) -> Mapping[str, Any]:
        """The saved children of the node `template` at `path`, by state-dict key."""
        if type(saved) in (list, tuple):  # orbax restores sequences as lists without a target
            return {str(i): item for i, item in enumerate(saved)}
        if not isinstance(saved, Mapping):
            raise self.mismatch(path, template, saved)
        return saved

    def fill(self, path: KeyPath, value: Any, template: Any) -> Any:
        """`value`, a number, for an eval_shape leaf: refused where it does not fit."""
        if not fits(value, template.dtype):
            kind, dtype = type(value).__name__, dtype_str(template.dtype)
            become = "wrap around" if kind == "int" else "become inf"
            what = dict(kind=kind, value=value, source=self.name, dtype=dtype, become=become)
            raise self.error(path, _MSG_FITS.format(**what))
        return value

    def leaf(self, template: Any, saved: Any, path: KeyPath) -> Any:
        """The leaf restored at `path`: `saved`, checked against `template` (kind, shape,
        dtype) and made the template's kind of leaf."""
        if type(saved) in PYTHON_SCALARS and scalar_fits(type(saved), template):
            return as_template(template, self.fill(path, saved, template))
        if arraylike(template):
            if type(saved) in PYTHON_SCALARS:  # named as a file's manifest names it
                theirs: ShapeDtype = ((), f"python {type(saved).__name__}")
            elif arraylike(saved):
                theirs = (tuple(saved.shape), dtype_str(saved.dtype))
            else:
                raise self.mismatch(path, template, saved)
            self.compare(path, theirs, (tuple(template.shape), dtype_str(template.dtype)))
        elif type(saved) is not type(template) and not (
            # A Python number comes back from some stores as a 0-d array of its kind.
            type(template) in PYTHON_SCALARS
            and arraylike(saved)
            and not is_key(saved)
            and saved.shape == ()
            and np.dtype(saved.dtype).kind in SCALAR_KINDS[type(template)]
        ):
            raise self.mismatch(path, template, saved)
        return as_template(template, saved)


class FileSource(Source):
    """The saved side of `restore()` for a file: `saved` is a manifest entry, compared with the
    template before the `archive` reads a member; every failure is a `CheckpointError`."""

    name = "file"
    holds_config = True  # configuration is written as a static value, compared on load

    def __init__(self, archive: Archive, root: str) -> None:
        super().__init__(root)
        self.archive = archive

    def malformed(self, path: KeyPath) -> NoReturn:
        """Raises for a manifest entry that is not one (damage, not a mismatch)."""
        self.archive.fail(f"its manifest is malformed at {path_str(self.root, path)}")

    def show(self, saved: Any) -> str:
        """A manifest entry as a mismatch names it (`an array`, `a Dense`)."""
        if isinstance(saved, dict):  # a manifest entry: a leaf record or a container
            entry = cast("dict[str, Any]", saved)
            if "config" in entry:
                return f"the configuration {show_static(entry['config'])}"
            return "an array" if "leaf" in entry else f"a {entry.get('type', 'container')}"
        return describe(saved, shape=False)

    def mismatch(
        self, path: KeyPath, template: Any, saved: Any, fix: str = _MSG_FIX
    ) -> CheckpointError:
        """As `Source.mismatch`; configuration saved where `jax.eval_shape` made the template
        abstract gets the template that keeps it as its fix."""
        abstracted = isinstance(template, jax.ShapeDtypeStruct)
        if abstracted and isinstance(saved, dict) and "config" in saved:
            fix = _MSG_CONFIG_FIX
        return super().mismatch(path, template, saved, fix)

    def config(self, path: KeyPath, template: Any, saved: Any) -> Any:
        """The template's configuration leaf, once equal to the file's."""
        if isinstance(saved, dict) and "leaf" in saved and type(template) in PYTHON_SCALARS:
            # Written before configuration was (a Python number stored as a leaf): read back.
            theirs = encode_static(self.leaf(template, saved, path))
        elif not isinstance(saved, dict) or "config" not in saved:
            raise self.mismatch(path, template, saved)
        else:
            theirs = cast("dict[str, Any]", saved)["config"]
        ours = encode_static(template)
        if canonical(theirs) != canonical(ours):
            what = f"{show_static(theirs)} in the file, {show_static(ours)} in the template"
            raise self.error(path, f"configuration {what}")
        return template

    def children(self, template: Any, saved: Any, path: KeyPath) -> Mapping[str, Any]:
        """The children of the node entry `saved`, once its static values are compared with
        the template's (a static field's path in the message: `Dense.act`)."""
        if not isinstance(saved, dict) or "leaf" in saved:
            raise self.mismatch(path, template, saved)
        entry = cast("dict[str, Any]", saved)
        children, static = entry.get("children"), entry.get("static", {})
        if not isinstance(children, dict) or not isinstance(static, dict):
            self.malformed(path)
        static = cast("dict[str, Any]", static)
        statics = node_statics(template)
        # An equinox Module's statics are compared where the file has them (written since).
        if statics is not None and (layout_of(template) is not None or "static" in entry):
            names, mine = sorted(static), sorted(statics)
            if names != mine:
                raise self.error(path, f"static fields {names} in the file, {mine} in the template")
            for name, value in statics.items():
                theirs, ours = static[name], encode_static(value)
                if canonical(theirs) != canonical(ours):
                    what = f"static value {show_static(theirs)} in the file, {show_static(ours)}"
                    raise self.error((*path, GetAttrKey(name)), f"{what} in the template")
        return cast("dict[str, Any]", children)

    def leaf(self, template: Any, saved: Any, path: KeyPath) -> Any:
        """The leaf at `path`, read from the member the record `saved` names, once the record
        is checked against what the template would have written (`leaf_record`)."""
        where = path_str(self.root, path)
        dtype, shape, _, stored = leaf_record(template, where, state_key(path[-1:]))
        if not isinstance(saved, dict) or "leaf" not in saved:
            raise self.mismatch(path, template, saved)
        member = state_key(path)
        saved_dtype, saved_shape, crc = map(saved.get, ("dtype", "shape", "crc32"))
        if not (
            saved.get("leaf") == member  # not another leaf's record, CRC-32 and all
            and isinstance(saved_dtype, str)
            and type(crc) is int
            and isinstance(saved_shape, list)
            and all(type(n) is int and n >= 0 for n in cast("list[object]", saved_shape))
        ):
            self.malformed(path)
        scalar = SCALAR_NAMES.get(saved_dtype)
        if scalar is not None and scalar_fits(scalar, template):  # into an eval_shape leaf
            number_stored = (np.dtype(SCALAR_STORED[scalar]), ())
            value = self.archive.read(member, number_stored, where, crc).item()
            return as_template(template, self.fill(path, value, template))
        if type(template) in PYTHON_SCALARS and saved_shape == [] and scalar is None:
            # A 0-d array of the number's kind, as from_state_dict takes (stores give them).
            with contextlib.suppress(TypeError):  # a key's, an ml_dtype's or a damaged name
                if np.dtype(saved_dtype).kind in SCALAR_KINDS[type(template)]:
                    dtype, stored = saved_dtype, (np.dtype(saved_dtype), ())
        self.compare(path, (tuple(cast("list[int]", saved_shape)), saved_dtype), (shape, dtype))
        # Raw bits for ml_dtypes, key data for keys: viewed or converted as the template's.
        array = self.archive.read(member, stored, where, crc)
        if not is_key(template) and type(template) not in PYTHON_SCALARS:
            array = (
                array.astype(template.dtype, copy=False)
                if array.dtype.kind == np.dtype(template.dtype).kind
                else array.view(template.dtype)  # ml_dtypes' raw bits
            )
        return as_template(template, array)
