"""The package's architecture, checked: imports go down the layers, never in a cycle, and no
module reaches for another module's private names."""

import ast
import re
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "fineprune_cli"
MODELS = Path(__file__).resolve().parents[1] / "models"
DEVELOPMENT = Path(__file__).resolve().parents[1] / "docs" / "development.md"

# lowest first: a module may import from its own layer or any layer before it
LAYERS = [
    {"errors", "settings", "console"},
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


def _imports(name: str, path: Path):
    """Every project module `name` imports (at any depth of the file), as dotted names, with
    the names taken from it."""
    package = _package_of(name, path)
    for node in ast.walk(ast.parse(path.read_text())):
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


def _layer(name: str) -> int:
    parts = name.split(".")
    top = parts[1] if len(parts) > 1 else "__init__"
    for i, layer in enumerate(LAYERS):
        if top in layer:
            return i
    raise AssertionError(f"{name} is in no layer: add its folder to LAYERS")


def _graph():
    modules = dict(_modules())
    graph = {}
    for name, path in modules.items():
        edges = set()
        for target, names in _imports(name, path):
            # `from pkg import module` imports the module; `from module import name` the module
            subs = {f"{target}.{n}" for n in names if f"{target}.{n}" in modules}
            edges |= subs or {target}
        graph[name] = edges - {name}
    return modules, graph


def test_imports_follow_the_layer_order():
    modules, graph = _graph()
    wrong = [f"{a} -> {b}" for a, targets in graph.items() for b in targets if b in modules and _layer(b) > _layer(a)]
    assert not wrong, "imports against the layer order:\n" + "\n".join(wrong)


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
