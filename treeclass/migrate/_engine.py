"""A run over files: read and parse each, scan the whole run for the traps, plan each
pytree class (bases before subclasses), settle the inheritance constraints, rewrite.

Nothing is written here: `run()` returns each file's old and new text and one
`Report` per class; the command line decides what to print and write.
"""

from __future__ import annotations

import ast
import dataclasses
import warnings
from pathlib import Path

import libcst as cst

from treeclass.migrate import _dataclasses, _facts, _find, _handwritten, _messages, _names, _rewrite
from treeclass.migrate._context import Context
from treeclass.migrate._find import Found
from treeclass.migrate._flatten_code import Refused
from treeclass.migrate._plan import Plan, Refusal, Report

__all__ = ["File", "Result", "parse", "run", "source_files"]

_HANDWRITTEN = ("register_pytree_node_class", "register_pytree_with_keys_class", "register_pytree_node")
_ALLOWED_BASES = {"object", "abc.ABC", "typing.Generic", "typing_extensions.Generic", *_names.FLAX_BASE, *_names.NAMEDTUPLE}


@dataclasses.dataclass
class File:
    path: str
    source: str
    tree: ast.Module
    names: dict[str, str]
    found: list[Found]
    tc: str
    new_source: str | None = None  # None: unchanged


@dataclasses.dataclass
class Result:
    files: list[File]
    reports: list[Report]
    errors: list[str]  # one line per file that could not be read or parsed


def source_files(paths: list[Path]) -> tuple[list[Path], list[str]]:
    """The .py files under `paths` (directories searched recursively), and an error
    for each path that does not exist."""
    files: list[Path] = []
    errors: list[str] = []
    for path in paths:
        if path.is_dir():
            files += sorted(
                p for p in path.rglob("*.py") if not any(part.startswith(".") or part == "__pycache__" for part in p.relative_to(path).parts)
            )
        elif path.is_file():
            files.append(path)
        else:
            errors.append(f"{path}: no such file or directory")
    return files, errors


def _tc_name(tree: ast.Module, names: dict[str, str]) -> str:
    """The name the module imports treeclass as, else `tc` where that name is free."""
    imported = sorted(local for local, qualified in names.items() if qualified == "treeclass")
    if imported:
        return imported[0]
    return "tc" if "tc" not in names and not _binds(tree, "tc") else "treeclass"


def _binds(tree: ast.Module, name: str) -> bool:
    return any(isinstance(n, ast.Name) and n.id == name and isinstance(n.ctx, ast.Store) for n in ast.walk(tree)) or any(
        isinstance(n, ast.FunctionDef | ast.ClassDef) and n.name == name for n in tree.body
    )


def parse(source: str, filename: str = "<unknown>") -> ast.Module:
    """`ast.parse`, without the SyntaxWarnings of the code read (an invalid escape such
    as `"\\i"` in an old docstring): under `-W error` they would be SyntaxErrors."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # SyntaxWarning (3.12+), DeprecationWarning (3.11)
        return ast.parse(source, filename=filename)


def _read(path: Path, errors: list[str]) -> File | None:
    try:
        source = path.read_bytes().decode("utf-8")
    except UnicodeDecodeError as e:
        errors.append(f"{path}: not UTF-8 ({e.reason} at byte {e.start}); left unchanged")
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
    return File(str(path), source, tree, names, [], _tc_name(tree, names))


class _Run:
    def __init__(self, files: list[File]) -> None:
        self.files = files
        self.facts = _facts.Facts()
        self.by_module: dict[str, list[tuple[File, Found]]] = {}
        self.decided: dict[int, Plan | Refusal] = {}
        self.owner: dict[int, File] = {}
        for file in files:
            for found in file.found:
                self.owner[id(found)] = file
            parts = Path(file.path).with_suffix("").parts
            for i in range(len(parts)):
                key = ".".join(parts[i:])
                for found in file.found:
                    self.by_module.setdefault(f"{key}.{found.name}", []).append((file, found))

    def base(self, file: File, found: Found, i: int) -> Found | None:
        """The class in the run that base `i` of `found` names, if any."""
        qualified = found.bases[i]
        if qualified is None:
            return None
        local = [f for f in file.found if f.name == qualified]
        if local:
            return local[0]
        matches = self.by_module.get(qualified.lstrip("."), [])
        return matches[0][1] if len(matches) == 1 else None

    def decide(self, file: File, found: Found, form: str) -> Plan | Refusal | None:
        if id(found) in self.decided:
            return self.decided[id(found)]
        self.decided[id(found)] = Refusal("(inheritance cycle)")
        ctx = Context(file.path, file.source, file.tree, file.names, found, self.facts, file.tc, file.found)
        refusal: Refusal | None = None
        for i in range(len(found.bases)):
            base = self.base(file, found, i)
            if base is None or base is found:
                continue
            decided = self.decide(self.owner[id(base)], base, form)
            if isinstance(decided, Plan):
                ctx.base_plans[i] = (base, decided)
                if found.family is None and base.family == "flax.struct":
                    found.family = "flax.struct"  # a PyTreeNode subclass is registered by its base
            elif isinstance(decided, Refusal) and base.family is not None:
                refusal = Refusal(_messages.BASE_REFUSED.format(base=base.name))
            else:
                ctx.base_found[i] = base
        if found.family is None:
            del self.decided[id(found)]
            return None
        decision = refusal or self._plan(ctx)
        self.decided[id(found)] = decision
        return decision

    def _plan(self, ctx: Context) -> Plan | Refusal:
        found = ctx.found
        try:
            if found.registered_twice:
                raise Refused(_messages.TWICE.format(cls=found.name))
            if found.family in _HANDWRITTEN:
                plan = _handwritten.plan_handwritten(ctx)
            else:
                _handwritten.check_owned(ctx)
                for i, base in enumerate(found.bases):
                    if i not in ctx.base_plans and base not in _ALLOWED_BASES:
                        raise Refused(_messages.BASE_UNKNOWN.format(base=ctx.code(found.node.bases[i])))
                if found.family == "flax.struct" and self.facts.flax_serialization:
                    raise Refused(_messages.FLAX_SERIALIZATION.format(site=self.facts.flax_serialization[0]))
                if found.family == "NamedTuple" and self.facts.tuple_api:
                    raise Refused(_messages.TUPLE_API.format(site=self.facts.tuple_api[0]))
                assert found.family is not None
                plan = _dataclasses.plan_dataclass(ctx, found.family)
                names = [f.name for f in plan.fields]
                _handwritten.check_facts(ctx, names, _facts.FLATTEN_METHODS)
            if ctx.base_plans:
                plan.add_base = False
            return plan
        except Refused as e:
            return Refusal(str(e.args[0]))

    def settle(self) -> None:
        """A converted class whose subclass in the run is refused or not a pytree is
        refused too, and so are the converted subclasses of a refused class, until
        nothing changes."""
        changed = True
        while changed:
            changed = False
            for file in self.files:
                for found in file.found:
                    for i in range(len(found.bases)):
                        base = self.base(file, found, i)
                        if base is None or base is found:
                            continue
                        mine, theirs = self.decided.get(id(found)), self.decided.get(id(base))
                        if isinstance(theirs, Plan) and not isinstance(mine, Plan):
                            why = _messages.SUBCLASS_NOT_REGISTERED if mine is None else _messages.SUBCLASS_REFUSED
                            where = f"{file.path}:{found.node.lineno}"
                            msg = _messages.SUBCLASS.format(sub=found.name, where=where, why=why, cls=base.name)
                            self.decided[id(base)] = Refusal(msg)
                            changed = True
                        elif isinstance(mine, Plan) and isinstance(theirs, Refusal):
                            self.decided[id(found)] = Refusal(_messages.BASE_REFUSED.format(base=base.name))
                            changed = True


def run(paths: list[Path], *, form: str = "base", namedtuples: bool = False) -> Result:
    """Plans and rewrites every pytree class in the files under `paths`."""
    sources, errors = source_files(paths)
    files = [f for f in (_read(p, errors) for p in sources) if f is not None]
    the_run = _Run([])
    for file in files:
        file.found = _find.find(file.tree, file.names, namedtuples=namedtuples)
        _facts.scan(the_run.facts, file.tree, file.path, file.source, file.names)
    facts = the_run.facts
    the_run = _Run(files)
    the_run.facts = facts
    for file in files:
        for found in file.found:
            the_run.decide(file, found, form)
    the_run.settle()
    reports: list[Report] = []
    for file in files:
        plans: list[Plan] = []
        for found in file.found:
            decision = the_run.decided.get(id(found))
            if decision is None:
                continue
            if isinstance(decision, Plan):
                plans.append(decision)
                reports.append(Report(file.path, found.node.lineno, found.name, "converted", decision.note))
            else:
                reports.append(Report(file.path, found.node.lineno, found.name, "refused", decision.reason))
        if plans:
            module = _rewrite.rewrite(cst.parse_module(file.source), plans, file.names, tc=file.tc, form=form)
            if module.code != file.source:
                file.new_source = module.code
    return Result(files, reports, errors)
