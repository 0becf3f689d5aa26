"""The package's architecture, checked: imports go down the layers, and inside a layered folder
(analysis/'s stages, drivers/' sub-layers) down its sub-layers, never in a cycle; no module
reaches for another module's private names; no function is left unused; imports are sorted; and
docs/development.md lists the layers in their order and names only paths that exist."""

import ast
import functools
import re
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "fineprune_cli"
MODELS = Path(__file__).resolve().parents[1] / "models"
DEVELOPMENT = Path(__file__).resolve().parents[1] / "docs" / "development.md"

# lowest first: a module may import from its own layer or any layer before it
LAYERS = [
    {"errors", "settings", "console", "registry", "lazytorch"},
    {"models"},
    {"pruning"},
    {"engine"},
    {"distributed"},
    {"arms"},  # a comparison's arm names, parsed once for drivers and analysis
    {"runner"},  # the front door of a run: train/resume dispatched to engine or distributed
    {"harness"},  # a user's own training script's side of `compare --script`
    {"analysis"},  # reads finished run folders: needs nothing of how drivers made them
    {"drivers"},
    {"sequential"},  # procedures that train and decide in turn (planned looks)
    {"cli"},
    {"integrations"},  # other frameworks' adapters (optional extras): nothing imports them
    {"__init__", "__main__"},  # the package's public API and entry point
]


def _modules():
    """(dotted name, path) for every module of the package, the model zoo included."""
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = path.relative_to(PACKAGE).with_suffix("").parts
        yield ".".join(("fineprune_cli",) + parts), path
    for path in sorted(MODELS.rglob("*.py")):
        parts = path.relative_to(MODELS).with_suffix("").parts
        yield ".".join(("fineprune_cli", "models") + parts), path


def _package_of(name: str, path: Path) -> str:
    return name if path.name == "__init__.py" else name.rsplit(".", 1)[0]


def _imports(name: str, path: Path, source: str | None = None):
    """Every project module `name` imports (at any depth of the file, TYPE_CHECKING blocks and
    functions included), as dotted names, with the names taken from it."""
    package = _package_of(name, path)
    for node in ast.walk(ast.parse(path.read_text() if source is None else source)):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith("fineprune_cli"):
                    yield alias.name, []
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                target = f"{base}.{node.module}" if node.module else base
            else:
                target = node.module or ""
            if target.startswith("fineprune_cli"):
                yield target, [a.name for a in node.names]


# Inside a layered folder, its sub-layers lowest first: a module of the folder imports from its own
# sub-layer or an earlier one. Each entry names a sub-folder or a module directly in the folder;
# the folder's own __init__ is its top (it may re-export from any of them).
SUBLAYERS = {
    "analysis": [
        {"read"},  # run folders read back: runs, their checks, the test set's grid, plans found
        {"group"},  # runs grouped into rows: numbers, paired differences, times, reach, compression
        {"decide"},  # the judging settings, the plan, the statistics, decisions, looks, advice
        {"study"},  # one study per report: the one place the three stages below are put together
        {"render"},  # the verdict, tables, plots, summary.csv and index.md: formats a study
    ],
    "drivers": [
        {"job"},  # a run of the matrix: its name, its folder, its config's file
        {"trainers"},  # who trains a run: fineprune's trainer, or the user's script (all of its code)
        {"reuse"},  # what a job's folder needs, and training it through its trainer
        {"executors"},  # where runs execute: each task's child trains through `reuse`
        {"compare", "grid", "parallel", "progress", "matrix", "probe", "drytime", "scriptprobe", "dryrun"},
        {"estimate", "scale", "scale_table"},  # commands beside compare: estimate, scale and its tables
    ],
}


def _sublayer(name: str) -> tuple[str, int] | None:
    """(folder, index) of the sub-layer of a module inside a layered folder; None for a module
    outside one, or for the folder's own __init__."""
    parts = name.split(".")
    if len(parts) < 3 or parts[1] not in SUBLAYERS or parts[2] == "__init__":
        return None
    for i, layer in enumerate(SUBLAYERS[parts[1]]):
        if parts[2] in layer:
            return parts[1], i
    raise AssertionError(f"{name} is in no sub-layer of {parts[1]}/: add it to SUBLAYERS")


def _against_the_order(graph: dict[str, set[str]], modules) -> list[str]:
    """Every edge that goes up: a lower layer importing a higher one, or, inside a layered
    folder, an earlier sub-layer importing a later one."""
    wrong = []
    for a, targets in graph.items():
        for b in sorted(targets & set(modules)):
            inner_a, inner_b = _sublayer(a), _sublayer(b)
            up_inside = inner_a is not None and inner_b is not None and inner_a[0] == inner_b[0] and inner_b > inner_a
            if _layer(b) > _layer(a) or up_inside:
                wrong.append(f"{a} -> {b}")
    return wrong


def _layer(name: str) -> int:
    parts = name.split(".")
    top = parts[1] if len(parts) > 1 else "__init__"
    for i, layer in enumerate(LAYERS):
        if top in layer:
            return i
    raise AssertionError(f"{name} is in no layer: add its folder to LAYERS")


def _edges(name: str, path: Path, modules, source: str | None = None) -> set[str]:
    edges = set()
    for target, names in _imports(name, path, source):
        # `from pkg import module` imports the module; `from module import name` the module
        subs = {f"{target}.{n}" for n in names if f"{target}.{n}" in modules}
        edges |= subs or {target}
    return edges - {name}


@functools.cache  # one parse of the package for every test here (callers copy, never change it)
def _graph():
    modules = dict(_modules())
    return modules, {name: _edges(name, path, modules) for name, path in modules.items()}


def test_imports_follow_the_layer_order():
    modules, graph = _graph()
    wrong = _against_the_order(graph, modules)
    assert not wrong, "imports against the layer order:\n" + "\n".join(wrong)


@pytest.mark.parametrize(
    "planted, source, edge",
    [  # a module planted in an early stage that imports a later one, as each import form spells it
        ("analysis.read.planted", "from ..decide.judging import Judging", "analysis.decide.judging"),
        ("analysis.group.planted", "from ..study import Study", "analysis.study"),
        ("analysis.decide.planted", "def f():\n    from ..render import verdict", "analysis.render.verdict"),
        ("drivers.trainers.planted", "from ..executors.contract import Task", "drivers.executors.contract"),
        ("drivers.job", "import fineprune_cli.drivers.reuse", "drivers.reuse"),
    ],
)
def test_the_checker_fails_on_a_planted_import_against_a_sub_layer(planted, source, edge):
    """Fed one module whose import goes up inside its folder, the checker names that edge; the
    same module without it passes (so the failure is the edge's, not the planting's)."""
    modules, graph = _graph()
    name = f"fineprune_cli.{planted}"
    path = PACKAGE.joinpath(*planted.split(".")).with_suffix(".py")
    modules = {**modules, name: path}
    clean = {**graph, name: set()}
    assert _against_the_order(clean, modules) == []
    bad = {**graph, name: _edges(name, path, modules, source)}
    assert _against_the_order(bad, modules) == [f"{name} -> fineprune_cli.{edge}"]


def test_every_module_of_a_layered_folder_has_a_sub_layer():
    """A module added to analysis/ or drivers/ is placed in a sub-layer, not left unchecked."""
    for name, _ in _modules():
        _sublayer(name)  # raises naming the module


def test_no_import_cycles():
    modules, graph = _graph()
    state, cycles = {}, []

    def visit(node, stack):
        state[node] = "open"
        for nxt in sorted(graph.get(node, ())):
            if nxt not in modules:
                continue
            if state.get(nxt) == "open":
                cycles.append(" -> ".join(stack[stack.index(nxt) :] + [nxt]))
            elif nxt not in state:
                visit(nxt, stack + [nxt])
        state[node] = "done"

    for name in sorted(modules):
        if name not in state:
            visit(name, [name])
    assert not cycles, "import cycles:\n" + "\n".join(cycles)


def test_no_module_uses_another_modules_private_names():
    modules = dict(_modules())
    found = []
    for name, path in modules.items():
        tree = ast.parse(path.read_text())
        aliases = set()
        for target, names in _imports(name, path):
            found += [f"{name} imports {target}.{n}" for n in names if n.startswith("_") and not n.startswith("__")]
            aliases |= {n for n in names if f"{target}.{n}" in modules}
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.Attribute)
                and isinstance(node.value, ast.Name)
                and node.value.id in aliases
                and node.attr.startswith("_")
                and not node.attr.startswith("__")
            ):
                found.append(f"{name} uses {node.value.id}.{node.attr}")
    assert not found, "\n".join(found)


def test_the_checker_sees_a_violation():
    """The walk above must find real imports: the engine does import the pruning layer."""
    _, graph = _graph()
    assert "fineprune_cli.pruning.policy" in graph["fineprune_cli.engine.training.build"]
    assert _layer("fineprune_cli.cli.views") > _layer("fineprune_cli.engine.training.session")


def test_analysis_reads_arm_names_below_the_drivers():
    """analysis parses arm names from `arms`, never from the compare driver it sits below."""
    _, graph = _graph()
    assert _layer("fineprune_cli.analysis.group.groups") < _layer("fineprune_cli.drivers.compare")
    assert "fineprune_cli.arms" in graph["fineprune_cli.analysis.group.groups"]
    assert not any(
        t.startswith("fineprune_cli.drivers")
        for a, targets in graph.items()
        if a.startswith("fineprune_cli.analysis")
        for t in targets
    )


def _documented_layers() -> list[set[str]]:
    """The first column of docs/development.md's layer table, row by row: the names in backticks
    before any parenthesis (`models/` (installed as `fineprune_cli.models`) is `models`)."""
    section = DEVELOPMENT.read_text().split("## Layers", 1)[1].split("\n## ", 1)[0]
    rows = [line for line in section.splitlines() if line.startswith("| `")]
    return [
        {name.rstrip("/").removesuffix(".py") for name in re.findall(r"`([^`]+)`", row.split("|")[1].split("(")[0])}
        for row in rows
    ]


def test_the_development_guide_lists_the_layers_in_their_order():
    """Its table is what a contributor reads for where a module may import from: the same layers,
    lowest first, as the order checked above."""
    assert _documented_layers() == LAYERS


def _guide_paths() -> list[str]:
    """The paths docs/development.md names in backticks (`drivers/trainers/registry.py`,
    `engine/setup/scriptconfig.py`'s, `decide/`), less placeholders and what a build makes."""
    found = re.findall(r"`([A-Za-z_][\w./-]*/[\w./-]*)`", DEVELOPMENT.read_text())
    return sorted({p for p in found if not p.startswith(("site/", "/"))})


def _exists(path: str) -> bool:
    """At the repository's root, the package's, or under one of the package's folders (the
    guide names `trainers/registry.py` inside the drivers' row); `folder/module.name` names a
    module's attribute."""
    root = PACKAGE.parent
    bases = [root, PACKAGE, *(p for p in PACKAGE.rglob("*") if p.is_dir() and p.name != "__pycache__")]
    head, _, tail = path.rpartition("/")
    module = f"{head}/{tail.split('.')[0]}.py" if "." in tail and not tail.endswith((".py", ".md", ".yml")) else None
    return any((base / path).exists() or (module and (base / module).exists()) for base in bases)


def test_every_path_the_development_guide_names_exists():
    """A module moved without its line in the guide leaves a contributor a path to nowhere."""
    missing = [p for p in _guide_paths() if not _exists(p)]
    assert not missing, f"docs/development.md names paths that do not exist: {missing}"


CALLED_BY_OTHERS = {"on_train_epoch_start", "on_train_epoch_end"}  # Lightning calls a callback's hooks
ROOT = PACKAGE.parent


def _used_names() -> set[str]:
    """Every name the project reads: a name, an attribute, an import, a word in a string (a
    lookup by name, `getattr(x, "name")`), in the package, its library, tests and scripts."""
    used: set[str] = set()
    for folder in ("fineprune_cli", "models", "fineprune", "experiments", "examples", "tests"):
        for path in (ROOT / folder).rglob("*.py"):
            for node in ast.walk(ast.parse(path.read_text())):
                if isinstance(node, ast.Name):
                    used.add(node.id)
                elif isinstance(node, ast.Attribute):
                    used.add(node.attr)
                elif isinstance(node, ast.alias):
                    used.add(node.name.rsplit(".", 1)[-1])
                elif isinstance(node, ast.Constant) and isinstance(node.value, str):
                    used |= set(re.findall(r"\w+", node.value))
    return used


def test_no_function_is_left_unused():
    """A function or method nothing calls is code a reader must understand for nothing (issue 58
    found `Plan.plannedseeds_text`, named for text and returning seeds); one a decorator registers
    is used by it, and a framework's hooks by the framework."""
    used, dead = _used_names(), []
    for name, path in _modules():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and not node.name.startswith("__"):
                if node.name not in used and not node.decorator_list and node.name not in CALLED_BY_OTHERS:
                    dead.append(f"{name}.{node.name}")
    assert not dead, f"defined and never used: {dead}"


def test_the_linter_keeps_imports_sorted():
    """Issue 58 found 57 import blocks out of order after the moves: ruff's `I` rule is on, and
    the tree passes it (`make test` runs ruff too; this says why it fails, near the layers)."""
    import subprocess
    import sys

    import tomllib

    selected = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["ruff"]["lint"]["select"]
    assert "I" in selected
    found = subprocess.run(
        [sys.executable, "-m", "ruff", "check", "--select", "I", "--no-cache", "fineprune_cli", "models", "tests"],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    assert found.returncode == 0, found.stdout
