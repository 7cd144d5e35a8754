"""A run over files: read and parse each, scan the whole run for the traps, plan each
pytree class (bases before subclasses), settle the inheritance constraints, rewrite.

Nothing is written here: `run()` returns each file's old and new text and one
`Report` per class; the command line decides what to print and write.
"""

from __future__ import annotations

import ast
import dataclasses
import functools
import io
import re
import tokenize
import traceback
import warnings
from pathlib import Path

from treeclass.migrate import (
    _checks,
    _dataclasses,
    _facts,
    _families,
    _find,
    _hashable,
    _messages,
    _names,
    _skeleton,
    _types,
)
from treeclass.migrate._context import Context
from treeclass.migrate._find import Found
from treeclass.migrate._flatten_code import Refused
from treeclass.migrate._plan import Plan, Refusal, Report
from treeclass.migrate._resolve import (
    Program,
    harmless_decorator,
    mark_wrapped,
    module_name,
    package_aliases,
    stateless,
)
from treeclass.migrate._text import Text

__all__ = ["File", "Result", "parse", "run", "source_files"]

# Bases a converted class may have had: mixins, and a family's own (PyTreeNode, NamedTuple).
_ALLOWED_BASES = {
    *_names.ALLOWED_MIXINS,
    *(b for r in _families.RULES if not r.reported for b in r.bases),
}


@dataclasses.dataclass
class File:
    path: str
    source: str
    tree: ast.Module
    names: dict[str, str]
    found: list[Found]
    module: str = ""  # its dotted name in its package (_resolve.module_name)
    encoding: str = "utf-8"  # its PEP 263 coding line's, written back the same
    new_source: str | None = None  # None: unchanged

    @functools.cached_property
    def text(self) -> Text:
        return Text(self.source)

    @functools.cached_property
    def tc(self) -> str:
        """How the module will name treeclass (read only for modules with pytree classes)."""
        return _tc_name(self.tree, self.names, self.source)


@dataclasses.dataclass
class Result:
    files: list[File]
    reports: list[Report]
    errors: list[str]  # one line per file that could not be read or parsed
    # What the run found but did not plan, and the flag that would (NamedTuples
    # without --namedtuples): printed before the summary line.
    hints: list[str] = dataclasses.field(default_factory=list[str])


def source_files(paths: list[Path]) -> tuple[list[Path], list[str]]:
    """The .py files under `paths` (directories searched recursively), and an error
    for each path that does not exist."""
    files: list[Path] = []
    errors: list[str] = []
    for path in paths:
        if path.is_dir():
            files += sorted(
                p
                for p in path.rglob("*.py")
                if not any(
                    part.startswith(".") or part == "__pycache__"
                    for part in p.relative_to(path).parts
                )
            )
        elif path.is_file():
            files.append(path)
        else:
            errors.append(f"{path}: no such file or directory")
    return files, errors


def _tc_name(tree: ast.Module, names: dict[str, str], source: str) -> str:
    """The name the module imports treeclass as, else `tc` where that name is free (a
    module whose text never writes the word `tc` does not bind it: no walk there)."""
    imported = sorted(local for local, qualified in names.items() if qualified == "treeclass")
    if imported:
        return imported[0]
    free = "tc" not in names and not (re.search(r"\btc\b", source) and _binds(tree, "tc"))
    return "tc" if free else "treeclass"


def _binds(tree: ast.Module, name: str) -> bool:
    return any(
        isinstance(n, ast.Name) and n.id == name and isinstance(n.ctx, ast.Store)
        for n in ast.walk(tree)
    ) or any(isinstance(n, ast.FunctionDef | ast.ClassDef) and n.name == name for n in tree.body)


def parse(source: str, filename: str = "<unknown>") -> ast.Module:
    """`ast.parse`, without the SyntaxWarnings of the code read (an invalid escape such
    as `"\\i"` in an old docstring): under `-W error` they would be SyntaxErrors."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # SyntaxWarning (3.12+), DeprecationWarning (3.11)
        return ast.parse(source, filename=filename)


def _read(path: Path, errors: list[str]) -> File | None:
    try:
        data = path.read_bytes()
        try:
            encoding, _ = tokenize.detect_encoding(io.BytesIO(data).readline)  # PEP 263, BOM
        except SyntaxError:  # no coding line, and the first lines are not UTF-8
            encoding = "utf-8"
        source = data.decode(encoding)
    except UnicodeDecodeError as e:
        errors.append(
            f"{path}: not {'UTF-8' if e.encoding == 'utf-8' else e.encoding} "
            f"({e.reason} at byte {e.start}); left unchanged"
        )
        return None
    except OSError as e:
        errors.append(f"{path}: cannot be read ({e.strerror}); left unchanged")
        return None
    try:
        tree = parse(source, str(path))
    except SyntaxError as e:
        errors.append(f"{path}:{e.lineno}: does not parse ({e.msg}); left unchanged")
        return None
    names = _names.aliases(tree)
    return File(str(path), source, tree, names, [], module_name(path), encoding)


class _Run:
    def __init__(self, files: list[File], facts: _facts.Facts) -> None:
        self.files = files
        self.facts = facts
        self.program = Program(files)  # type: ignore[arg-type]  # pyright: ignore[reportArgumentType]
        self.decided: dict[int, Plan | Refusal] = {}
        self.attributes: dict[int, list[str]] = {}  # id(found) -> _attributes, its bases' included
        # The classes of the run that extend each class, by id(Found) of the base.
        self.subclasses: dict[int, list[str]] = {}
        for file in files:
            for found in file.found:
                for i in range(len(found.bases)):
                    resolved = self.program.base(file, found, i)
                    if resolved is not None and resolved[1] is not found:
                        self.subclasses.setdefault(id(resolved[1]), []).append(found.name)
        # The run's module-level functions by `module.name` (class decorators it defines).
        self.functions = {
            f"{file.module}.{s.name}": s
            for file in files
            for s in file.tree.body
            if isinstance(s, ast.FunctionDef)
        }

    def mark_roots(self) -> None:
        """A base that is not registered but defines (or inherits from the run) the flatten
        protocol of a registered subclass (jax-cosmo: `container` defines tree_flatten,
        each subclass is decorated with `@register_pytree_node_class`) is a root of the
        run: it is decided and reported like a registered class, and its subclasses name
        it when it is refused (rather than calling it a class that is not a pytree)."""
        todo = [
            (file, found)
            for file in self.files
            for found in file.found
            if found.family in _HANDWRITTEN
        ]
        while todo:
            file, found = todo.pop()
            for i in range(len(found.bases)):
                resolved = self.program.base(file, found, i)
                if resolved is None or resolved[1] is found:
                    continue
                base_file, base = resolved
                if base.family is None and self._has_flatten(base_file, base):  # type: ignore[arg-type]  # pyright: ignore[reportArgumentType]
                    base.family = found.family
                    base.root_of = found.root_of or found.name  # the registered class
                    todo.append((base_file, base))  # type: ignore[arg-type]  # pyright: ignore[reportArgumentType]

    def _has_flatten(self, file: File, found: Found) -> bool:
        """`found` defines the flatten protocol or inherits it from a class of the run (an
        unregistered class between a registered base and a registered subclass)."""
        defined = self.program.methods(file, found)
        return {"tree_unflatten"} <= defined and bool(
            {"tree_flatten", "tree_flatten_with_keys"} & defined
        )

    def decide(self, file: File, found: Found, form: str) -> Plan | Refusal | None:
        if id(found) in self.decided:
            return self.decided[id(found)]
        self.decided[id(found)] = Refusal("(inheritance cycle)")
        try:
            return self._decide(file, found, form)
        except Exception as e:  # noqa: BLE001 - a construct the tool does not handle refuses this class only
            self.decided[id(found)] = internal(found, e)
            return self.decided[id(found)]

    def _decide(self, file: File, found: Found, form: str) -> Plan | Refusal | None:
        ctx = Context(
            file.path, file.text, file.tree, file.names, found, self.facts, file.tc, file.found
        )
        ctx.related = self.program.ancestors(file, found) | {found.name}
        ctx.subclasses = self.subclasses.get(id(found), [])
        ctx.unhashable = functools.partial(_hashable.why_not, self.program, file)
        ctx.methods = self.program.methods(file, found)
        for i, decorator in enumerate(found.node.decorator_list):
            fn = self.program.function(file, _names.dotted(decorator, file.names), self.functions)
            if fn is not None and harmless_decorator(fn, factory=isinstance(decorator, ast.Call)):
                ctx.harmless.add(i)
        reasons: list[str] = []
        mixin_names: set[str] = (
            set()
        )  # what the stateless bases bind: a field so named would take it as default
        for i, qualified in enumerate(found.bases):
            resolved = self.program.base(file, found, i)
            if resolved is None or resolved[1] is found:
                if qualified in _names.ALLOWED_MIXINS:
                    ctx.mixins.add(i)
                continue
            base_file, base = resolved
            decided = self.decide(base_file, base, form)  # type: ignore[arg-type]  # pyright: ignore[reportArgumentType]
            if (
                base.registers_subclasses is not None
            ):  # `__init_subclass__` registers it, or an eqx.Module
                found.registers_subclasses = found.registers_subclasses or base.registers_subclasses
                if found.family is None:
                    _find.unhandled(found, found.registers_subclasses)
            if isinstance(decided, Plan):
                ctx.base_plans[i] = (base, decided)
                if found.family is None and _families.BY_NAME[base.family or ""].inherited:
                    found.family = base.family  # a PyTreeNode subclass is registered by its base
            elif isinstance(decided, Refusal) and base.family is not None:
                if found.indirect is None:  # a class the tool does not rewrite says so alone
                    reasons.append(_messages.BASE_REFUSED.format(base=base.name))
                ctx.refused_bases[i] = base
            elif stateless(self.program, base_file, base):
                ctx.mixins.add(i)
                mixin_names |= self.program.methods(base_file, base, everything=True)
            else:
                ctx.base_found[i] = base
        if found.family is None:
            del self.decided[id(found)]
            return None
        plan = self._plan(ctx, reasons)
        clash = sorted(mixin_names & {f.name for f in plan.fields}) if plan else []
        if clash:
            reasons.append(
                _messages.CLASS_ATTRIBUTE.format(
                    name=clash[0], line=f"{found.node.lineno}, in a base"
                )
            )
        inherited = [
            a for base, _ in ctx.base_plans.values() for a in self.attributes.get(id(base), [])
        ]
        self.attributes[id(found)] = _attributes(ctx, plan, inherited)
        reasons += _checks.check_facts(ctx, self.attributes[id(found)])
        decision = Refusal(_messages.join(reasons)) if reasons or plan is None else plan
        self.decided[id(found)] = decision
        return decision

    def _plan(self, ctx: Context, reasons: list[str]) -> Plan | None:
        found = ctx.found
        try:
            if found.registered_twice:
                raise Refused(_messages.TWICE.format(cls=found.name))
            if found.indirect is not None:
                raise Refused(found.indirect)
            rule = _families.BY_NAME[found.family or ""]
            if rule.plan is not None:  # a hand-written flatten
                plan = rule.plan(ctx)
            else:
                removed = _checks.check_owned(ctx)
                for i, base in enumerate(found.bases):
                    if (
                        i not in {*ctx.base_plans, *ctx.mixins, *ctx.refused_bases}
                        and base not in _ALLOWED_BASES
                    ):
                        raise Refused(
                            _messages.BASE_UNKNOWN.format(base=ctx.code(found.node.bases[i]))
                        )
                rule.uses(ctx)
                plan = _dataclasses.plan_dataclass(ctx, rule)
                plan.remove_methods += removed
                returned = self.facts.returned_out.get(found.name, [])
                if rule.tuple_protocol and returned:  # its users outside the run get it
                    plan.notes.append(_messages.NOTE_RETURNED_OUT.format(site=returned[0]))
                in_tests = self.facts.test_use.get(found.name, [])
                if rule.tuple_protocol and in_tests:  # guesses in tests: listed, not blocking
                    plan.notes.append(_messages.tests_use(in_tests))
            if found.root_of is not None:
                raise Refused(
                    _messages.ROOT_NOT_REGISTERED.format(cls=found.name, sub=found.root_of)
                )
            if "replace" in plan.remove_methods:
                plan.notes.append(_messages.NOTE_REPLACE)
            if ctx.base_plans:
                plan.add_base = False
            return plan
        except Refused as e:
            reasons.append(str(e.args[0]))
            return None

    def settle(self) -> None:
        """A converted class whose subclass in the run is refused or not a pytree is
        refused too, and so are the converted subclasses of a refused class, until
        nothing changes."""
        self._unresolved_subclasses()
        changed = True
        while changed:
            changed = False
            for file in self.files:
                for found in file.found:
                    for i in range(len(found.bases)):
                        resolved = self.program.base(file, found, i)
                        if resolved is None or resolved[1] is found:
                            continue
                        base = resolved[1]
                        mine, theirs = self.decided.get(id(found)), self.decided.get(id(base))
                        if isinstance(theirs, Plan) and not isinstance(mine, Plan):
                            why = (
                                _messages.SUBCLASS_NOT_REGISTERED
                                if mine is None
                                else _messages.SUBCLASS_REFUSED
                            )
                            where = f"{file.path}:{found.node.lineno}"
                            msg = _messages.SUBCLASS.format(
                                sub=found.name, where=where, why=why, cls=base.name
                            )
                            self.decided[id(base)] = Refusal(msg)
                            changed = True
                        elif isinstance(mine, Plan) and isinstance(theirs, Refusal):
                            self.decided[id(found)] = Refusal(
                                _messages.BASE_REFUSED.format(base=base.name)
                            )
                            changed = True

    def _unresolved_subclasses(self) -> None:
        """A class whose base the run cannot resolve but may be its own (a relative or
        star import, a name of the run's packages) refuses every converted class of the
        base's name: converting one that it extends would break it."""
        converted: dict[str, list[Found]] = {}
        for file in self.files:
            for found in file.found:
                if isinstance(self.decided.get(id(found)), Plan):
                    converted.setdefault(found.name, []).append(found)
        for file in self.files:
            for found in file.found:
                for i, qualified in enumerate(found.bases):
                    if qualified is None or self.program.base(file, found, i) is not None:
                        continue
                    ours = (
                        qualified.startswith(".")
                        or qualified.split(".")[0] in self.facts.packages
                        or "." not in qualified
                    )
                    for cls in converted.get(qualified.split(".")[-1], []) if ours else []:
                        where = f"{file.path}:{found.node.lineno}"
                        msg = _messages.SUBCLASS_UNRESOLVED.format(
                            sub=found.name, where=where, base=qualified, cls=cls.name
                        )
                        self.decided[id(cls)] = Refusal(msg)


_HANDWRITTEN = frozenset({"register_pytree_node_class", "register_pytree_with_keys_class"})


def _attributes(ctx: Context, plan: Plan | None, inherited: list[str]) -> list[str]:
    """The attributes whose writes elsewhere matter: the fields, those of every base
    (`inherited`), and what the class declares or its `__init__` sets (for a class
    refused before its fields are known)."""
    names = [f.name for f in plan.fields] if plan else []
    names += [f.name for _, p in ctx.base_plans.values() for f in p.fields] + inherited
    for stmt in ctx.found.node.body:
        if isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name):
            names.append(stmt.target.id)
        if isinstance(stmt, ast.FunctionDef) and stmt.name == "__init__":
            names += [
                t.attr
                for n in ast.walk(stmt)
                if isinstance(n, ast.Assign)
                for t in n.targets
                if isinstance(t, ast.Attribute)
            ]
    return list(dict.fromkeys(names))


def run(paths: list[Path], *, form: str = "base", namedtuples: bool = False) -> Result:
    """Plans and rewrites every pytree class in the files under `paths`."""
    sources, errors = source_files(paths)
    files = [f for f in (_read(p, errors) for p in sources) if f is not None]
    for file in files:
        file.found = _find.find(file.tree, file.names, namedtuples=namedtuples)
    mark_wrapped(files)  # type: ignore[arg-type]  # pyright: ignore[reportArgumentType]
    facts = _facts.Facts(
        classes=frozenset(found.name for file in files for found in file.found),
        packages=frozenset(
            name.split(".")[0]
            for name in [*(file.module for file in files), *package_aliases(files)]
            if name
        ),
    )
    facts.operators = frozenset().union(*(_types.operator_methods(f.source) for f in files))
    returns = {file.path: _types.returns(file.tree, file.names, facts.classes) for file in files}
    for file in files:
        _facts.namedtuple_fields(file.tree, file.names, facts.namedtuple_fields)
    for file in files if facts.namedtuple_fields else []:  # tuple use matters to NamedTuples alone
        _facts.call_returns(file.tree, file.names, facts.classes, facts.call_returns)
        _facts.function_names(file.tree, facts.functions)
    for file in files:
        for found in file.found:
            facts.attr_types.update(
                _types.attribute_types(found.node, file.names, facts.classes, returns[file.path])
            )
    for file in files:
        _facts.scan(facts, file.tree, file.path, file.text, file.names, returns[file.path])
    facts.narrow()
    facts.forward_unhashable()
    the_run = _Run(files, facts)
    the_run.mark_roots()
    for file in files:
        for found in file.found:
            the_run.decide(file, found, form)
    the_run.settle()
    while _rewrite_all(the_run, form):  # a rewrite that failed refused its classes: settle again
        the_run.settle()
    reports: list[Report] = []
    partial = _partial(paths)
    nested_families = [(n, f) for n in facts.nested if (f := _nested_family(n)) is not None]
    for file in files:
        for found in file.found:
            decision = the_run.decided.get(id(found))
            if decision is None:
                continue
            if isinstance(decision, Plan):
                notes = [
                    *decision.notes,
                    *([_messages.NOTE_PARTIAL.format(package=partial)] if partial else []),
                ]
                reports.append(
                    Report(
                        file.path,
                        found.node.lineno,
                        found.name,
                        "converted",
                        "; ".join(dict.fromkeys(notes)),
                    )
                )
            else:
                reports.append(
                    Report(file.path, found.node.lineno, found.name, "refused", decision.reason)
                )
        for nested, family in nested_families:  # below module level: reported, not rewritten
            if nested.site.path == file.path and (namedtuples or family.option is None):
                reason = _messages.NESTED.format(cls=nested.cls, where=nested.where)
                reports.append(Report(file.path, nested.site.line, nested.cls, "refused", reason))
    unconverted = [
        *facts.namedtuple_fields,
        *(n.cls for n, family in nested_families if family.option is not None),
    ]
    hints = [] if namedtuples else _namedtuple_hint(sorted(unconverted))
    return Result(files, reports, errors, hints)


def _nested_family(nested: _facts.Nested) -> _families.Rule | None:
    """The family of a class below module level, by its decorators or bases (NamedTuple
    included, for the hint of a run without --namedtuples); None: not a pytree class."""
    rules = [_families.by_decorator(d) for d in nested.decorators]
    rules += [_families.by_base(b, frozenset({"namedtuples"})) for b in nested.bases]
    return next((r for r in rules if r is not None), None)


def _namedtuple_hint(names: list[str]) -> list[str]:
    """The line that says how many NamedTuples a run without --namedtuples left alone
    (a package whose state is NamedTuples would otherwise read `converted 0, refused 0`)."""
    if not names:
        return []
    shown = ", ".join(names[:8]) + (f", ... ({len(names) - 8} more)" if len(names) > 8 else "")
    return [_messages.HINT_NAMEDTUPLES.format(count=len(names), names=shown)]


def internal(found: Found, error: Exception) -> Refusal:
    """The refusal of a class the tool failed on: the error named, the run goes on."""
    where = traceback.extract_tb(error.__traceback__)[-1] if error.__traceback__ else None
    at = f" in {Path(where.filename).name}:{where.lineno}" if where else ""
    return Refusal(
        _messages.INTERNAL.format(
            cls=found.name, error=f"{type(error).__name__}{at}: {error}".rstrip(": ")
        )
    )


def _rewrite_all(the_run: _Run, form: str) -> bool:
    """Rewrites every file with its plans; False when all went through. A file whose
    rewrite raises is rewritten class by class, and each class that fails alone (all of
    the file's, if none does) is refused."""
    failed = False
    for file in the_run.files:
        found_plans = [
            (f, d) for f in file.found if isinstance(d := the_run.decided.get(id(f)), Plan)
        ]
        file.new_source = None
        if not found_plans:
            continue
        own = file.module.split(".")[0] if "." in file.module else ""

        def rewrite(plans: list[Plan], file: File = file, own: str = own) -> str:
            return _skeleton.rewrite_source(
                file.source, file.tree, plans, file.names, tc=file.tc, form=form, own=own
            )

        try:
            new = rewrite([p for _, p in found_plans])
        except Exception as error:  # noqa: BLE001 - find the class it failed on
            culprits: list[tuple[Found, Exception]] = []
            for found, plan in found_plans:
                try:
                    rewrite([plan])
                except Exception as alone:  # noqa: BLE001
                    culprits.append((found, alone))
            for found, why in culprits or [(f, error) for f, _ in found_plans]:
                the_run.decided[id(found)] = internal(found, why)
            failed = True
            continue
        if new != file.source:
            file.new_source = new
    return failed


def _partial(paths: list[Path]) -> str | None:
    """The package a run covers only part of (a file or a subpackage given), if any:
    a subclass elsewhere in it would break when its base becomes a treeclass."""
    for path in paths:
        folder = path.resolve() if path.is_dir() else path.resolve().parent
        if path.is_file() and path.name != "__init__.py" and (folder / "__init__.py").is_file():
            return module_name(folder / "__init__.py") or str(folder)
        if (folder.parent / "__init__.py").is_file():
            return module_name(folder.parent / "__init__.py")
    return None
