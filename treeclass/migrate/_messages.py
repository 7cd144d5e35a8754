"""Every reason the tool gives, each with what to do by hand.

A refusal names what was found and where, and the manual fix; docs/migration.md has a
section per reason (the anchor at the end of each), with the recipe written out.
tests/migrate/test_migrate_corpus.py pins each one on a class of the corpus.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

_DOCS: Final = "docs/migration.md#"

# --- the class as a whole -------------------------------------------------------------
INDIRECT: Final = (
    "{cls} is registered {how}: the tool rewrites direct registrations only (a decorator, or "
    "`register_*({cls}, ...)` as a statement), since a loop or a helper also registers other "
    "classes; register {cls} directly (or convert it by hand), then run again. "
    + _DOCS
    + "other-refusals"
)
NESTED: Final = (
    "{cls} is a pytree class defined inside {where}: the tool rewrites module-level classes only. "
    "Move it to module level and run again, or convert it by hand. " + _DOCS + "other-refusals"
)
UNHANDLED: Final = (
    "{cls} is a pytree class that the tool does not rewrite ({how}): it is left as it is and "
    "keeps working beside treeclasses; to make it a treeclass, port it by hand ({recipe}). "
    + _DOCS
    + "pytree-classes-the-tool-does-not-rewrite"
)
WRAPPER: Final = (
    "{cls} is registered by the project's dataclass wrapper `{name}`, which does more than "
    "`dataclasses.dataclass` plus `register_dataclass(cls)` (its field split or options cannot be "
    "read): convert by hand, or make the wrapper that simple, then run again. "
    + _DOCS
    + "other-refusals"
)
DECORATOR: Final = (
    "the decorator `{code}` runs on the converted class, which has treeclass's methods (replace, "
    "...) and a generated __init__ where the old class had others: what it does with them cannot "
    "be read; remove it, or convert by hand. " + _DOCS + "other-refusals"
)
TWICE: Final = (
    "{cls} is defined or registered more than once in this module; leave one definition and "
    "registration, then run again. " + _DOCS + "other-refusals"
)
OWNED: Final = (
    "{cls} defines {name}, which a treeclass owns ({why}); remove it by hand first. "
    + _DOCS
    + "other-refusals"
)
NO_INIT: Final = (
    "{cls} has no __init__: its instances are built some other way (object.__new__ and attribute "
    "writes?), so no constructor signature can be kept; write the fields and one constructor by "
    "hand. " + _DOCS + "other-refusals"
)
CLASS_ANNOTATION: Final = (
    "the class body annotates `{name}`, which is neither a child nor aux data: as a dataclass "
    "field it would become part of the instance; mark it ClassVar[...] or remove the annotation, "
    "then run again. " + _DOCS + "other-refusals"
)
CLASS_ATTRIBUTE: Final = (
    "`{name}` is both a class attribute (line {line}) and a field: as a field its class value "
    "would become a default; rename one of them. " + _DOCS + "other-refusals"
)
BASE_UNKNOWN: Final = (
    "its base class `{base}` is not a pytree class converted in this run (a treeclass can only "
    "extend treeclasses and plain mixins such as ABC or Generic); migrate the base in the same "
    "run, or by hand. " + _DOCS + "inheritance"
)
ROOT_NOT_REGISTERED: Final = (
    "`{cls}` is not registered itself, but the registered class `{sub}` extends it and "
    "flattens through the tree_flatten / tree_unflatten `{cls}` defines or inherits; "
    "converting `{cls}` would make its own instances pytrees (leaves before), so the run "
    "leaves it and its subclasses alone. Register `{cls}` too, or migrate them by hand. "
    + _DOCS
    + "inheritance"
)
BASE_REFUSED: Final = (
    "its base class `{base}` is refused, and a subclass cannot be converted without its base. "
    + _DOCS
    + "inheritance"
)
SUBCLASS: Final = (
    "its subclass `{sub}` ({where}) {why}: a treeclass makes every subclass a treeclass, so "
    "converting `{cls}` alone would change `{sub}`. " + _DOCS + "inheritance"
)
SUBCLASS_UNRESOLVED: Final = (
    "the class `{sub}` ({where}) extends `{base}`, which may be `{cls}` (the run cannot tell "
    "which module it names): converting `{cls}` could leave a dataclass or plain class over a "
    "treeclass base; run the tool on the whole package, or convert the pair by hand. "
    + _DOCS
    + "inheritance"
)
INTERNAL: Final = (
    "the tool failed on {cls} ({error}), so it is left unchanged: convert it by hand, and please "
    "report the error with the class's code. " + _DOCS + "other-refusals"
)
SUBCLASS_NOT_REGISTERED: Final = "is not registered as a pytree (its instances are leaves today)"
SUBCLASS_REFUSED: Final = "is refused"
SUBCLASS_INIT: Final = (
    "`{cls}` defines its own __init__ and inherits tree_unflatten from `{base}`, which calls it: "
    "convert the pair by hand. " + _DOCS + "inheritance"
)
SUPER_FLATTEN: Final = (
    "tree_flatten extends the base class's through super(): declare the subclass's own fields by "
    "hand (a treeclass subclass inherits its base's fields first, in order, as the extended "
    "flatten does). " + _DOCS + "inheritance"
)
PREFIX: Final = (
    "its children {children} do not start with its base `{base}`'s {base_children}: a treeclass "
    "subclass flattens its base's fields first. " + _DOCS + "leaf-order"
)

# --- tree_flatten -----------------------------------------------------------------------
NOT_FOUND: Final = (
    "no {what} was found in the class or in a registered base of it in the files given (inherited "
    "from a base that is not a registered pytree, or defined outside these files?); convert by "
    "hand, or run the tool on the files that define it. " + _DOCS + "other-refusals"
)
VALUE_DEPENDENT: Final = (
    "its structure depends on values: {what} in {where} (line {line}), so the number or order of "
    "leaves changes from instance to instance; a treeclass's are fixed by its fields. Declare "
    "every child as a field, None where it is unset (None has no leaves). "
    + _DOCS
    + "structure-that-depends-on-values"
)
VARIABLE_CHILDREN: Final = (
    "its children are {what}, a sequence of any length, not one attribute per child: declare one "
    "field holding the sequence (`{attr}: tuple[...]`) by hand; the leaves stay the same, the "
    "treedef and key paths change. " + _DOCS + "variable-length-children"
)
CHILD_NOT_ATTRIBUTE: Final = (
    "child {index} of tree_flatten is `{code}`, not an attribute of the instance: store it in an "
    "attribute (a field) first, or convert by hand. " + _DOCS + "flatten-not-one-to-one"
)
FLATTEN_SHAPE: Final = (
    "tree_flatten does not return `(children, aux_data)` built from attributes ({code}); convert "
    "by hand. " + _DOCS + "flatten-not-one-to-one"
)
REPEATED: Final = (
    "`{attr}` appears twice in tree_flatten's output; a field holds one value: convert by hand. "
    + _DOCS
    + "flatten-not-one-to-one"
)
AUX_COMPUTED: Final = (
    "its aux data holds `{code}`, which is computed, not an attribute (it would not survive as a "
    "field): store the value as a static field set in __init__, or derive it in a property. "
    + _DOCS
    + "aux-data-computed-from-children"
)
AUX_SPREAD: Final = (
    "its aux data spreads `**{code}` into a dict: its keys are known only when the code runs,"
    " and a treeclass needs one static field per key, declared in the class. Declare the"
    " keys it can hold as static fields (or one static field holding a tuple of items) by"
    " hand. " + _DOCS + "aux-data-computed-from-children"
)
AUX_UNHASHABLE: Final = (
    "its aux data holds `{attr}`, {why}: a static field must be hashable (JAX compares and hashes "
    "the treedef); store a tuple or a frozen value. " + _DOCS + "unhashable-aux-data"
)
KEYS: Final = (
    "tree_flatten_with_keys gives `{attr}` the key `{key}`; as a field its key path would be "
    "`.{attr}`, which breaks checkpoints and code keyed by the old path: convert by hand and move "
    "the checkpoints. " + _DOCS + "key-paths-and-checkpoints"
)
TWO_FLATTENS: Final = (
    "its tree_flatten and tree_flatten_with_keys disagree ({first} vs {second}); convert by hand. "
    + _DOCS
    + "flatten-not-one-to-one"
)

# --- tree_unflatten and __init__ ---------------------------------------------------------
UNFLATTEN: Final = (
    "tree_unflatten does not rebuild the instance one to one from children and aux data "
    "({detail}); convert by hand. " + _DOCS + "unflatten-not-one-to-one"
)
RECOMPUTES: Final = (
    "tree_unflatten calls __init__, which sets `{attr}` to `{code}` rather than to the value "
    "flattened: today every unflatten recomputes it (under jit, grad, vmap), a treeclass would "
    "restore it. Make __init__ store its argument, or convert by hand. "
    + _DOCS
    + "__init__-that-computes"
)
DERIVED: Final = (
    "__init__ sets `self.{attr}`, which is neither a child nor aux data (a derived value or a "
    "cache): a treeclass holds fields only. Make it a field (child or static), a property, or "
    "drop it. " + _DOCS + "derived-attributes-and-caches"
)
NOT_SET: Final = (
    "__init__ sets `{attr}` only on some paths ({where}); a treeclass needs every field set at "
    "construction: set it on every path (None where unset), then run again. "
    + _DOCS
    + "__init__-that-computes"
)
NEVER_SET: Final = (
    "tree_flatten reads `{attr}`, which __init__ never sets (set elsewhere, or a bug: flattening "
    "a new instance raises AttributeError): set it in __init__, then run again. "
    + _DOCS
    + "__init__-that-computes"
)
INIT_FORM: Final = (
    "__init__ writes `{code}` (line {line}), which the tool cannot rewrite to object.__setattr__ "
    "safely; write it as `self.x = ...`, one attribute per statement. "
    + _DOCS
    + "__init__-that-computes"
)
INIT_CALLS_SUPER: Final = (
    "__init__ calls `{code}`; a hand-written pytree class whose base is not converted with it "
    "cannot be rewritten: convert by hand. " + _DOCS + "inheritance"
)
DEFAULT: Final = (
    "the default of `{attr}` is `{code}`, not a literal: a dataclass field refuses an unhashable "
    "default (an array), and a shared one is evaluated once; write `{attr}: ... = "
    "tc.field(default_factory=lambda: {code})` by hand. " + _DOCS + "namedtuple"
)
STATIC_DEFAULT: Final = (
    "the default of `{attr}` is `{code}`, which a static field cannot hold (unhashable); use a "
    "tuple or None. " + _DOCS + "unhashable-aux-data"
)

# --- what the rest of the code does to instances -----------------------------------------
CALLED: Final = (
    "code calls its {method} at {site}; the method goes away with the conversion: use "
    "jax.tree.flatten(obj) / jax.tree.unflatten(treedef, leaves) there, then run again. "
    + _DOCS
    + "code-that-calls-tree_flatten"
)
ASSIGNED: Final = (
    "`{attr}` is assigned after construction at {site}: a treeclass is frozen. Use "
    "`obj.replace({attr}=...)` there (a new instance), then run again. "
    + _DOCS
    + "attributes-set-after-construction"
)
MUTATED: Final = (
    "`{attr}` is mutated in place at {site}: as a field it would be a mutable container inside a "
    "frozen instance, and in-place writes change its leaves behind JAX's back (a gradient "
    "silently lost). Keep caches outside the instance, or return a new instance. "
    + _DOCS
    + "derived-attributes-and-caches"
)

# --- dataclass families ----------------------------------------------------------------
CHEX_ORDER: Final = (
    "chex flattens fields sorted by name ({sorted}), not in declaration order ({declared}): as a "
    "treeclass the leaf order would change. Declare the fields in sorted order first (a "
    "keyword-only constructor does not care), then run again. " + _DOCS + "leaf-order"
)
CHEX_MAPPABLE: Final = (
    "a chex dataclass is a mapping unless mappable_dataclass=False (`s['v']`, `s.keys()`, `**s`, "
    "iteration), which a treeclass is not: pass mappable_dataclass=False, run your tests, then "
    "run again. " + _DOCS + "chex"
)
DATA_FIELDS_ORDER: Final = (
    "register_dataclass lists data_fields as {given}, not in declaration order ({declared}): the "
    "leaf order would change. Reorder the fields or the list, then run again. "
    + _DOCS
    + "leaf-order"
)
OPTION: Final = (
    "`{code}` has no treeclass equivalent ({why}); remove it by hand first. "
    + _DOCS
    + "other-refusals"
)
JDC_MUTATE: Final = (
    "code mutates copies of jax_dataclasses instances with jdc.copy_and_mutate ({site}), which a "
    "treeclass does not support: use obj.replace(...) there, then run again. "
    + _DOCS
    + "other-refusals"
)
TUPLE_USE: Final = (
    "code uses an instance as a tuple where a treeclass cannot be one ({count} site(s); the"
    " converted class keeps unpacking, indexing, iteration, len and _replace, not these): "
)

# Appended to a blocking site whose value the run cannot type: why it counts against the class.
UNTYPED_LOCAL: Final = (
    " (the run cannot type this value, and `{cls}` reaches code it cannot type with a fitting "
    "number of fields, so an instance may be here)"
)
UNTYPED_PARAMETER: Final = (
    " (a parameter of `{function}`, whose calls can give it `{cls}`: directly, through a "
    "function that hands its own parameter on, or as a value the run cannot type)"
)


def tuple_use(blocked: Sequence[object]) -> str:
    """The refusal of a NamedTuple, with every site that blocks it and each fix."""
    sites = "; ".join(f"({i}) {b}" for i, b in enumerate(dict.fromkeys(blocked), 1))
    count = len(dict.fromkeys(blocked))
    return (
        TUPLE_USE.format(count=count)
        + sites
        + ". Fix each, then run again. "
        + _DOCS
        + "namedtuple"
    )


NOTE_TESTS_USE: Final = (
    "a test uses a value the run cannot type as a tuple, where an instance may be ({count}"
    " site(s)): {sites}; these do not block the conversion (a test that it breaks fails when"
    " the tests run after --write): run them, and fix a test that fails as the site says"
)


def tests_use(blocked: Sequence[object]) -> str:
    """The note of a converted NamedTuple on the test sites that may use it as a tuple."""
    sites = "; ".join(f"({i}) {b}" for i, b in enumerate(dict.fromkeys(blocked), 1))
    return NOTE_TESTS_USE.format(count=len(dict.fromkeys(blocked)), sites=sites)


STATIC_UNPROVEN: Final = (
    "its static field `{attr}` is annotated `{annotation}`, but {why}: a treeclass hashes statics "
    "at construction, where the old class never did, so a value built with a list inside would "
    "raise. Make that class build its fields as tuples, str or numbers (`tuple(tuple(t) for t in "
    "types)`) and frozen, then run again; or convert the class by hand, keeping `{attr}` out of "
    "the statics. " + _DOCS + "unhashable-aux-data"
)
STATIC_UNHASHABLE: Final = (
    "its static field `{attr}` is {why}: a treeclass checks statics at construction and refuses "
    "unhashable ones (JAX hashes the treedef), so every construction would raise. Make it a tuple "
    "or a frozen value, or a dynamic field, then run again. " + _DOCS + "unhashable-aux-data"
)
FIELD_SPEC: Final = (
    "`{code}` on field `{attr}` has no treeclass equivalent: rewrite the field by hand. "
    + _DOCS
    + "other-refusals"
)

# --- notes on converted classes (the `reason` of a converted class in --json) -----------
NOTE_KEYS: Final = (
    "key paths change from flat indices to field names ({example}); existing checkpoints: "
    + _DOCS
    + "key-paths-and-checkpoints"
)
NOTE_EQ: Final = (
    "kept identity ==/hash (eq=False) as the class had; drop eq=False to compare by value"
)
NOTE_FROZEN: Final = (
    "instances are frozen now: an attribute assignment raises FrozenInstanceError (use "
    "obj.replace(...))"
)
NOTE_STATICS: Final = (
    "static fields ({fields}) are checked at construction: an unhashable value or an array there "
    "raises TypeError, and a local function or an object without __eq__ there warns "
    "(treeclass.RecompileWarning: each new one recompiles jit)"
)
NOTE_INIT: Final = (
    "the kept __init__ runs at construction only, never on unflatten (JAX rebuilds instances "
    "field by field)"
)
NOTE_POST_INIT: Final = (
    "__post_init__ runs at construction and replace() only, no longer on unflatten (it never sees "
    "tracers under jit/grad/vmap)"
)
NOTE_FLAX: Final = (
    "keeps flax.serialization support (to_state_dict, from_state_dict, to_bytes, from_bytes): "
    "treeclass registers its classes with flax.serialization when flax is installed"
)
NOTE_DATACLASS_EQ: Final = (
    "== compares with tc.tree_equal (arrays by value) and hash() uses the type and static values, "
    "no longer the dataclass's field tuple"
)
NOTE_REPLACE: Final = (
    "its replace() override (dataclasses.replace) went: tc.TreeClass.replace() does the same, "
    "with converters and checks"
)
NOTE_NAMEDTUPLE: Final = (
    "keeps the tuple protocol (unpacking, indexing, iteration, len, _replace, _fields,"
    " _asdict, _make: methods written into the class), but instances are no longer tuples:"
    " isinstance(x, tuple) is False, == compares field by field with tc.tree_equal and never"
    " equals a tuple, + and * do not concatenate, hash() is by type and static fields, and"
    " the repr is treeclass's (arrays summarised); the methods are annotated, but strict"
    " pyright (reportPrivateUsage) flags `x._replace(...)`, `_asdict`, `_make` and `_fields`"
    " outside the class, which it allowed on a NamedTuple: use `x.replace(...)` there"
)
NOTE_RETURNED_OUT: Final = (
    "a public function of the run is annotated to return it ({site}): code outside the run"
    " (the package's users, its tests) gets the converted class, and may rely on what it"
    " no longer keeps (isinstance(x, tuple), == against a tuple, +); check those uses"
)
NOTE_OWN_EQ: Final = (
    "keeps its own {methods} (a treeclass, as a dataclass, does not replace those its class"
    " defines): == and hash() do what they did"
)
NOTE_HASH: Final = (
    "unsafe_hash=True went: a treeclass is hashable already (by type and static values)"
)
NOTE_PARTIAL: Final = (
    "this run covers part of package `{package}` only: a subclass of a converted class elsewhere "
    "in it would fail at import (a treeclass's subclasses must be treeclasses); run the tool on "
    "the whole package folder"
)

# --- what a run found but left alone -----------------------------------------------------
HINT_NAMEDTUPLES: Final = (
    "found {count} NamedTuple class(es) ({names}), not converted: NamedTuples convert only "
    "with --namedtuples (run again with it to see which convert and why the others cannot). "
    + _DOCS
    + "namedtuple"
)


def join(reasons: list[str]) -> str:
    """One refusal's reasons, all of them: `(1) ... (2) ...` when more than one."""
    reasons = list(dict.fromkeys(reasons))
    if len(reasons) == 1:
        return reasons[0]
    return f"{len(reasons)} reasons: " + " ".join(f"({i}) {r}" for i, r in enumerate(reasons, 1))
