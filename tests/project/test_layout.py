"""The package's layout is its architecture (treeclass/README.md): each subpackage imports
only from the layers below it, nothing imports itself through a cycle (type-only imports
included), and `import treeclass` never loads the migration tool."""

import ast
import pathlib
import re
import subprocess
import sys
import tomllib

ROOT = pathlib.Path(__file__).parents[2]
PACKAGE = ROOT / "treeclass"
# Layer of each subpackage: a module may import from its own subpackage and lower layers.
LAYERS = {"_core": 0, "_paths": 1, "_jit": 1, "_checkpoint": 1, "_sharding": 1, "_train": 2}


def module_imports(path: pathlib.Path) -> set[str]:
    """Every `treeclass...` name `path` imports anywhere, `if TYPE_CHECKING:` included."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names |= {node.module, *(f"{node.module}.{alias.name}" for alias in node.names)}
        elif isinstance(node, ast.Import):
            names |= {alias.name for alias in node.names}
    return {name for name in names if name.startswith("treeclass.")}


MODULES = {
    ".".join(p.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__"): p
    for p in PACKAGE.rglob("*.py")
}
# `from treeclass._checkpoint import npz` inside treeclass._checkpoint names the package
# itself: not an edge.
GRAPH = {name: (module_imports(p) & set(MODULES)) - {name} for name, p in MODULES.items()}


def subpackage(module: str) -> str:
    return module.split(".")[1] if module.count(".") >= 1 else ""


def test_every_subpackage_has_a_layer():
    found = {
        p.name
        for p in PACKAGE.iterdir()
        if p.is_dir() and p.name.startswith("_") and p.name != "__pycache__"
    }
    assert found == set(LAYERS)


def test_layers_import_only_downward():
    for name, imported in GRAPH.items():
        layer = LAYERS.get(subpackage(name))
        if layer is None:  # treeclass/__init__.py and migrate/ sit above every layer
            continue
        for other in imported:
            below = LAYERS[subpackage(other)] < layer
            assert below or subpackage(other) == subpackage(name), f"{name} imports {other}"


# The modules of _checkpoint, top to bottom (treeclass/README.md draws them): each imports
# only modules below it, so `tc.load(path, template)` is read from npz.py downward without
# coming back up.
CHECKPOINT_ORDER = [
    "interop",  # treeclasses in jax.export and flax.serialization
    "npz",  # save(), load(): the file, written atomically
    "state_dict",  # to_state_dict(), from_state_dict(); restore(), the one walk
    "sources",  # the saved side of restore(): a state dict's, a file's
    "archive",  # the file as load() reads it: the manifest, each member checked
    "manifest",  # the format: the manifest, canonical statics, each leaf's encoding
    "template",  # the root, keys, configuration children, leaves, as_template(); the errors
]


def test_checkpoint_modules_are_all_placed():
    found = {p.stem for p in (PACKAGE / "_checkpoint").glob("*.py")} - {"__init__"}
    assert found == set(CHECKPOINT_ORDER)


def test_checkpoint_modules_import_only_downward():
    package = "treeclass._checkpoint."
    for module in CHECKPOINT_ORDER:
        for other in GRAPH[package + module]:
            if other.startswith(package):
                below = CHECKPOINT_ORDER.index(other.removeprefix(package))
                assert below > CHECKPOINT_ORDER.index(module), f"{module} imports {other}"


def test_no_module_imports_itself_through_a_cycle():
    def reaches(start: str, goal: str) -> bool:
        seen: set[str] = set()
        todo = list(GRAPH[start])
        while todo:
            name = todo.pop()
            if name == goal:
                return True
            if name not in seen:
                seen.add(name)
                todo += GRAPH[name]
        return False

    assert len(MODULES) > 30
    for name in MODULES:
        assert not reaches(name, name), f"{name} imports itself through a cycle"


def test_import_treeclass_loads_neither_migrate_nor_flax():
    code = "import sys, treeclass; print(sorted(m for m in sys.modules if m.startswith(('treeclass.migrate', 'flax', 'libcst'))))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_every_test_file_sits_in_the_folder_of_its_concern():
    # tests/README.md: a test file goes in the folder of the part of the project it pins.
    folders = {"core", "jit", "train", "paths", "checkpoint", "sharding", "migrate"}
    folders |= {"interop", "docs", "examples", "project"}
    tests = ROOT / "tests"
    placed = {path.relative_to(tests).parts[0] for path in tests.rglob("test_*.py")}
    assert not list(tests.glob("test_*.py")), "a test file at tests/ root"
    assert placed <= folders, placed - folders


def test_every_extra_the_readme_installs_exists():
    # pip installs `.[name]` for an extra that does not exist with only a warning, so a
    # dropped extra would leave CI's example without optax and fail far from the cause.
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"][
        "optional-dependencies"
    ]
    named = re.findall(r"'\.\[([\w,]+)\]'", (ROOT / "README.md").read_text())
    assert named, "README installs no extra"
    missing = {name for group in named for name in group.split(",")} - set(extras)
    assert not missing, f"README installs extras pyproject.toml lacks: {missing}"
