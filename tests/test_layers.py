"""Layers run one way: no module imports a layer above its own, at import time or inside a function.

The levels follow the data flow (README.md): task -> harness -> policy -> credit -> integrations (simlab's
credit inside other trainers: the verl plugin, loaded on every ``import verl``, needs nothing above the
credit layer) -> update/train, then
the tracking layer the sweep writes runs through, the sweep, the analysis that reads them back, and the
command line over everything. Neutral modules (errors, names, the configuration engine, the registry,
the store checks, the metric-sink protocol, the SegmentBatch) sit below all of them and import no
layer. Only the sweep imports optuna; only the tracking layer imports mlflow.
"""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
LAYERS: list[tuple[str, tuple[str, ...]]] = [
    ("neutral", ("simlab", "simlab.errors", "simlab.names", "simlab.refusals", "simlab.rules", "simlab.schema",
                 "simlab.registry", "simlab.stores", "simlab.sinks", "simlab.segment_checks", "simlab.segments",
                 "simlab.smoke", "simlab.settings", "simlab.lazy")),
    ("tasks", ("simlab.tasks",)),
    ("harness", ("simlab.harness",)),
    ("policy", ("simlab.policy",)),
    ("credit", ("simlab.credit",)),
    ("integrations", ("simlab.integrations",)),
    ("train", ("simlab.update", "simlab.recipes", "simlab.run_sections", "simlab.config",
               "simlab.summarisers", "simlab.train", "simlab.demo")),
    ("tracking", ("simlab.tracking",)),
    ("sweep", ("simlab.sweep",)),
    ("analysis", ("simlab.analysis",)),
    ("cli", ("simlab.cli",)),
]
"""(layer, its modules or packages), lowest first."""


def level(module: str) -> int | None:
    """The level of a simlab module (the longest matching prefix wins), ``None`` outside simlab."""
    best: tuple[int, int] | None = None
    for i, (_, prefixes) in enumerate(LAYERS):
        for prefix in prefixes:
            if (module == prefix or module.startswith(prefix + ".")) and (best is None or len(prefix) > best[1]):
                best = (i, len(prefix))
    return None if best is None else best[0]


def source_modules() -> dict[str, Path]:
    """Every module of the simlab package as installed (tasks/ and analysis/ through their links)."""
    out = {}
    for path in sorted((ROOT / "simlab").rglob("*.py")):
        parts = list(path.relative_to(ROOT).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = path
    return out


def _imports(tree: ast.AST) -> list[tuple[str, int]]:
    """(imported module, line) of every import, at any depth, except under ``if TYPE_CHECKING:``."""
    found: list[tuple[str, int]] = []

    def visit(node: ast.AST) -> None:
        if isinstance(node, ast.If) and isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING":
            return
        if isinstance(node, ast.Import):
            found.extend((alias.name, node.lineno) for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.append((node.module, node.lineno))
            found.extend((f"{node.module}.{alias.name}", node.lineno) for alias in node.names)
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(tree)
    return found


def test_every_module_has_a_layer() -> None:
    assert [m for m in source_modules() if level(m) is None] == []


def test_no_module_imports_a_higher_layer() -> None:
    modules = source_modules()
    wrong = []
    for module, path in modules.items():
        for target, line in _imports(ast.parse(path.read_text(encoding="utf-8"))):
            if not target.startswith("simlab"):
                continue
            while target not in modules and "." in target:  # `from pkg import name` names a member
                target = target.rsplit(".", 1)[0]
            mine, theirs = level(module), level(target)
            if mine is not None and theirs is not None and theirs > mine:
                wrong.append(f"{path.relative_to(ROOT)}:{line} {module} ({LAYERS[mine][0]}) imports "
                             f"{target} ({LAYERS[theirs][0]})")
    assert wrong == []


def test_the_harness_imports_no_task():
    """The harness reads tasks through their protocols (the solver, ``Instances.summary_holds``, a task config's
    ``summary_mode_refusal``): it imports the shared task modules, never one task's."""
    shared = {"simlab.tasks", "simlab.tasks.vocab", "simlab.tasks.config", "simlab.tasks.shells",
              "simlab.tasks.presets"}
    wrong = [f"{module}:{line} imports {target}" for module, path in source_modules().items()
             if module.startswith("simlab.harness")
             for target, line in _imports(ast.parse(path.read_text(encoding="utf-8")))
             if target.startswith("simlab.tasks") and not {target, target.rsplit(".", 1)[0]} & shared]
    assert wrong == []


def test_only_the_sweep_imports_optuna_and_only_tracking_imports_mlflow() -> None:
    wrong = []
    for module, path in source_modules().items():
        for target, line in _imports(ast.parse(path.read_text(encoding="utf-8"))):
            top = target.split(".")[0]
            if (top == "optuna" and not module.startswith("simlab.sweep")) or (
                top == "mlflow" and not (module == "simlab.tracking" or module.startswith("simlab.tracking."))
            ):
                wrong.append(f"{module}:{line} imports {target}")
    assert wrong == []


def test_the_mapped_folders_are_imported_under_one_name() -> None:
    """``tasks/``, ``analysis/`` and ``sweeps/`` are ``simlab.tasks``, ``simlab.analysis`` and ``simlab.specs``:
    importing one under its folder's name would load its modules twice (docs/development.md)."""
    files = [*source_modules().values(), *sorted((ROOT / "tests").rglob("*.py")),
             *sorted((ROOT / "benchmarks").rglob("*.py"))]
    wrong = [f"{path.relative_to(ROOT)}:{line} imports {target}"
             for path in files for target, line in _imports(ast.parse(path.read_text(encoding="utf-8")))
             if target.split(".")[0] in ("tasks", "analysis", "sweeps")]
    assert wrong == []


@pytest.mark.parametrize("layer", [name for name, _ in LAYERS[:-1]])
def test_importing_a_layer_loads_no_higher_one(layer: str) -> None:
    index = [name for name, _ in LAYERS].index(layer)
    prefixes = LAYERS[index][1]
    code = (
        "import importlib, json, sys\n"
        f"for name in {list(prefixes)!r}:\n"
        "    importlib.import_module(name)\n"
        "print(json.dumps(sorted(m for m in sys.modules if m == 'simlab' or m.startswith('simlab.'))))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT)
    loaded = json.loads(out.stdout)
    higher = [m for m in loaded if (level(m) or 0) > index]
    assert higher == [], f"importing the {layer} layer loads {higher}"


# ---------------------------------------------------------------------------------------- import circles


def _dependencies(module: str, tree: ast.AST, modules: dict[str, Path]) -> set[str]:
    """The simlab modules ``module`` imports, at any depth and under ``if TYPE_CHECKING:`` too (a circle of
    annotations is a circle of concepts); ``from package import name`` depends on the submodule ``name``
    when there is one, else on the package."""
    out: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            targets = [f"{node.module}.{a.name}" if f"{node.module}.{a.name}" in modules else node.module
                       for a in node.names]
        else:
            continue
        for target in targets:
            while target not in modules and "." in target:
                target = target.rsplit(".", 1)[0]
            if target in modules and target != module:
                out.add(target)
    return out


def import_circles() -> set[tuple[str, ...]]:
    """Every set of simlab modules that import each other in a circle (Tarjan's strongly connected
    components of the import graph), each sorted."""
    modules = source_modules()
    graph = {m: _dependencies(m, ast.parse(p.read_text(encoding="utf-8")), modules) for m, p in modules.items()}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    circles: set[tuple[str, ...]] = set()

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for other in graph[node]:
            if other not in index:
                visit(other)
                low[node] = min(low[node], low[other])
            elif other in stack:
                low[node] = min(low[node], index[other])
        if low[node] == index[node]:
            component = [stack.pop()]
            while component[-1] != node:
                component.append(stack.pop())
            if len(component) > 1:
                circles.add(tuple(sorted(component)))

    for node in graph:
        if node not in index:
            visit(node)
    return circles


def test_no_import_circles() -> None:
    assert import_circles() == set(), "these modules import each other: move what both need below them"
