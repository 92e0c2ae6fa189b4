"""The package's import graph: no cycles, and ``import loopwatch`` stays light (issue 12).

Every ``import`` statement of ``src/loopwatch`` that runs counts, wherever it stands: at the
top or inside a function (lazy). A lazy import is still a dependency: a cycle through one
means two layers know each other. Imports under ``if TYPE_CHECKING:`` are annotations only
(a leaf such as ``errors`` names the types it carries that way) and are left out.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "src" / "loopwatch"


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _modules() -> dict[str, Path]:
    return {_module_name(path): path for path in PACKAGE.rglob("*.py")}


def _resolve(name: str, known: dict[str, Path]) -> str | None:
    """The loopwatch module an imported name lives in (a package's ``__init__`` counts)."""
    while name:
        if name in known:
            return name
        name = name.rpartition(".")[0]
    return None


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _runtime_nodes(tree: ast.AST) -> list[ast.AST]:
    """Every node but those under ``if TYPE_CHECKING:``."""
    nodes: list[ast.AST] = []
    pending: list[ast.AST] = [tree]
    while pending:
        node = pending.pop()
        nodes.append(node)
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and _is_type_checking(child.test):
                pending.extend(child.orelse)
                continue
            pending.append(child)
    return nodes


def import_graph() -> dict[str, set[str]]:
    known = _modules()
    graph: dict[str, set[str]] = {name: set() for name in known}
    for name, path in known.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        for node in _runtime_nodes(ast.parse(path.read_text(encoding="utf-8"))):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    anchor = package.split(".")
                    anchor = anchor[: len(anchor) - node.level + 1]
                    base = ".".join([*anchor, base]) if base else ".".join(anchor)
                targets = [f"{base}.{alias.name}" for alias in node.names] + [base]
            for target in targets:
                if not target.startswith("loopwatch"):
                    continue
                found = _resolve(target, known)
                if found is not None and found != name:
                    graph[name].add(found)
    # A package's __init__ is not a cycle with its own submodules' ``from package import``
    # of siblings; every other edge counts.
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = [0]

    def visit(node: str) -> None:
        index[node] = low[node] = counter[0]
        counter[0] += 1
        stack.append(node)
        on_stack.add(node)
        for succ in sorted(graph[node]):
            if succ not in index:
                visit(succ)
                low[node] = min(low[node], low[succ])
            elif succ in on_stack:
                low[node] = min(low[node], index[succ])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    sys.setrecursionlimit(max(sys.getrecursionlimit(), 10_000))
    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def _without_package_inits(graph: dict[str, set[str]]) -> dict[str, set[str]]:
    """Edges into a package's ``__init__`` from its own submodules are re-export plumbing
    (``loopwatch/__init__`` re-exports everything, and every module imports some of it
    through ``from loopwatch import messages``): they point at the submodule, not the
    package. Keep every other edge."""
    pruned: dict[str, set[str]] = {}
    for name, targets in graph.items():
        pruned[name] = {
            target
            for target in targets
            if not (target == "loopwatch" or (name.startswith(target + ".") and target in graph))
        }
    return pruned


def test_the_import_graph_has_no_cycle() -> None:
    graph = _without_package_inits(import_graph())
    assert cycles(graph) == []


def test_the_cycle_finder_finds_a_cycle() -> None:
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_the_graph_sees_lazy_imports_but_not_annotations() -> None:
    graph = import_graph()
    # profiles imports the adaptive module lazily: an edge. The errors module names its
    # types under TYPE_CHECKING: no edge.
    assert "loopwatch.detectors.adaptive" in graph["loopwatch.detectors.profiles"]
    assert graph["loopwatch.errors"] == set()


def test_import_loopwatch_loads_neither_adaptive_nor_asyncio() -> None:
    code = (
        "import sys, loopwatch; "
        "g = loopwatch.LoopGuard({'enabled': True}); "
        "g.before_call('read', {}, session_key='s'); "
        "g.after_call('read', {}, session_key='s', result='x'); "
        "print('loopwatch.detectors.adaptive' in sys.modules, 'asyncio' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["False", "False"]


def test_the_adaptive_profile_loads_its_module_when_chosen() -> None:
    code = (
        "import sys, loopwatch; loopwatch.LoopGuard(profile='adaptive'); "
        "print('loopwatch.detectors.adaptive' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "True"


def test_every_store_is_importable_from_loopwatch_and_loaded_only_when_named() -> None:
    code = (
        "import sys, loopwatch; "
        "before = 'sqlite3' in sys.modules or 'redis' in sys.modules; "
        "from loopwatch import MemoryStore, RedisStore, SqliteStore; "
        "from loopwatch.stores.sqlite import SqliteStore as Own; "
        "print(before, SqliteStore is Own, 'SqliteStore' in loopwatch.__all__)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["False", "True", "True"]


#: The layers that keep a profile's facts without reading them (issue 12's seam): the
#: stores (Python and Lua), the record, and the guard's internals. The guard's public
#: ``adaptive=`` setting and its docs live in ``loopguard.py`` and ``settings.py``, which
#: are left out.
PROFILE_BLIND = (
    *sorted((PACKAGE / "stores").rglob("*.py")),
    *sorted((PACKAGE / "stores").rglob("*.lua")),
    PACKAGE / "core" / "records.py",
    *sorted(p for p in (PACKAGE / "guard").glob("_*.py")),
)


def test_stores_records_and_lua_scripts_name_no_profile() -> None:
    named = [
        f"{path.relative_to(PACKAGE)}:{number}"
        for path in PROFILE_BLIND
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if "adaptive" in line.lower()
    ]
    assert len(PROFILE_BLIND) > 20  # the globs found the files
    assert named == []
