"""The package's shape: no import cycle among its modules, and no module over 500 lines.

Both read the sources of the package that is imported, not the checkout: on the compiled build the
wheel installs each module's ``.py`` beside its ``.so``, so the same files are checked on both builds.

An import counts wherever it is written: at the top of a module, inside a function (a lazy import is
still an arrow) or under ``if TYPE_CHECKING:`` (a type named is a dependency too: arrows point down).
``from a.b import c`` is an arrow to ``a.b.c`` when that is a module, else to ``a.b``; the parent
packages that Python imports on the way are not counted, since their ``__init__`` runs first whoever
imports the submodule.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import otel_repeat_guard

PACKAGE = Path(otel_repeat_guard.__file__).resolve().parent
NAME = otel_repeat_guard.__name__
MAX_LINES = 500


@dataclass(frozen=True)
class Arrow:
    """One import: ``source`` imports ``target`` at ``line``."""

    source: str
    target: str
    line: int


def _sources() -> dict[str, Path]:
    """Every module of the installed package, by dotted name."""
    modules = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = path.relative_to(PACKAGE).with_suffix("").parts
        if "__pycache__" in parts:
            continue
        if parts[-1] == "__init__":
            modules[".".join((NAME, *parts[:-1]))] = path
        else:  # a package and a module of one name: Python imports the package
            modules.setdefault(".".join((NAME, *parts)), path)
    return modules


MODULES = _sources()


def _imports(tree: ast.AST) -> Iterator[ast.Import | ast.ImportFrom]:
    """Every import statement in ``tree``, at any depth, in the order written."""
    found = [node for node in ast.walk(tree) if isinstance(node, (ast.Import, ast.ImportFrom))]
    return iter(sorted(found, key=lambda node: (node.lineno, node.col_offset)))


def _arrows(module: str, tree: ast.AST, is_package: bool = False) -> Iterator[Arrow]:
    """The arrows from ``module`` (whose source is ``tree``) to the package's modules."""
    for node in _imports(tree):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        else:
            base = node.module or ""
            if node.level:
                package = module if is_package else module.rpartition(".")[0]
                for _ in range(node.level - 1):
                    package = package.rpartition(".")[0]
                base = f"{package}.{base}" if base else package
            targets = [f"{base}.{alias.name}" if f"{base}.{alias.name}" in MODULES else base for alias in node.names]
        for name in targets:
            target = name
            while target.startswith(f"{NAME}.") and target not in MODULES:
                target = target.rpartition(".")[0]  # `import a.b.c` where c is a name in a.b, not a module
            if target in MODULES and target != module:
                yield Arrow(module, target, node.lineno)


def import_graph() -> dict[str, list[Arrow]]:
    """Each module of the package and the arrows to the package's modules it imports."""
    graph = {}
    for module, path in MODULES.items():
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        graph[module] = list(_arrows(module, tree, is_package=path.name == "__init__.py"))
    return graph


def strongly_connected(graph: dict[str, list[Arrow]]) -> list[list[str]]:
    """Tarjan's strongly connected components with more than one module: each one holds a cycle."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[list[str]] = []

    def visit(module: str) -> None:
        index[module] = low[module] = len(index)
        stack.append(module)
        on_stack.add(module)
        for arrow in graph[module]:
            if arrow.target not in index:
                visit(arrow.target)
                low[module] = min(low[module], low[arrow.target])
            elif arrow.target in on_stack:
                low[module] = min(low[module], index[arrow.target])
        if low[module] == index[module]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == module:
                    break
            if len(component) > 1:
                components.append(sorted(component))

    for module in sorted(graph):
        if module not in index:
            visit(module)
    return sorted(components)


def cycle_in(graph: dict[str, list[Arrow]], component: list[str]) -> list[Arrow]:
    """One shortest cycle through the component's first module, as the imports that make it."""
    members, start = set(component), component[0]
    came_by: dict[str, Arrow] = {}
    frontier = [start]
    while frontier:
        following = []
        for module in frontier:
            for arrow in graph[module]:
                if arrow.target == start:
                    path = [arrow]
                    while path[0].source != start:
                        path.insert(0, came_by[path[0].source])
                    return path
                if arrow.target in members and arrow.target not in came_by:
                    came_by[arrow.target] = arrow
                    following.append(arrow.target)
        frontier = following
    raise AssertionError(f"no cycle in the component {component}")  # pragma: no cover - Tarjan found one


def describe(cycle: list[Arrow]) -> str:
    """``a → b → a``, then where each import is written."""
    names = [arrow.source for arrow in cycle] + [cycle[0].source]
    where = "; ".join(f"{MODULES[a.source].relative_to(PACKAGE.parent)}:{a.line} imports {a.target}" for a in cycle)
    return f"{' → '.join(names)} ({where})"


def test_the_sources_read_are_the_imported_package_on_either_build() -> None:
    """On the compiled build, every extension module has its source beside it, and that is what is read."""
    assert f"{NAME}.processor" in MODULES and f"{NAME}.spans.baggage" in MODULES
    assert all(path.is_relative_to(PACKAGE) for path in MODULES.values())
    extensions = [
        path
        for suffix in ("*.so", "*.pyd")
        for path in PACKAGE.rglob(suffix)
        if not path.name.split(".")[0].endswith("__mypyc")  # the shared library mypyc's modules load
    ]
    without_source = [str(path) for path in extensions if not path.with_name(path.name.split(".")[0] + ".py").exists()]
    assert not without_source, f"compiled modules installed without their source: {without_source}"


def test_the_graph_sees_lazy_relative_nested_and_type_only_imports() -> None:
    """The reader itself, on a module written for it (as if it were ``store/fake.py``)."""
    source = (
        "from __future__ import annotations\n"
        "from typing import TYPE_CHECKING\n"
        "from . import records\n"
        "from ..conventions import base, DEFAULT_CONVENTIONS\n"
        "import otel_repeat_guard.core.canonical\n"
        "if TYPE_CHECKING:\n"
        "    from otel_repeat_guard.processor import RepeatGuardSpanProcessor\n"
        "else:\n"
        "    from otel_repeat_guard.core.patterns import Pattern\n"
        "def later():\n"
        "    from otel_repeat_guard.installed import installed_guard\n"
        "    class Inner:\n"
        "        def deeper(self):\n"
        "            from .. import inbox\n"
        "try:\n"
        "    from otel_repeat_guard.core.chains import nothing_such\n"
        "except ImportError:\n"
        "    import otel_repeat_guard.ingest.nothing_such\n"
    )
    arrows = list(_arrows(f"{NAME}.store.fake", ast.parse(source)))
    assert [(arrow.target.removeprefix(f"{NAME}."), arrow.line) for arrow in arrows] == [
        ("store.records", 3),
        ("conventions.base", 4),
        ("conventions", 4),  # a name from the package's __init__
        ("core.canonical", 5),
        ("processor", 7),
        ("core.patterns", 9),
        ("installed", 11),
        ("inbox", 14),
        ("core.chains", 16),
        ("ingest", 18),  # the nearest module of a dotted name
    ]
    graph = {"a": [Arrow("a", "b", 1)], "b": [Arrow("b", "c", 2)], "c": [Arrow("c", "a", 3), Arrow("c", "d", 4)]}
    graph["d"] = []
    assert strongly_connected(graph) == [["a", "b", "c"]]
    assert [arrow.line for arrow in cycle_in(graph, ["a", "b", "c"])] == [1, 2, 3]


def test_no_import_cycle_among_the_package_modules_lazy_imports_included() -> None:
    graph = import_graph()
    assert sum(map(len, graph.values())) > len(graph), "the graph holds almost no arrows: it reads nothing"
    cycles = [describe(cycle_in(graph, component)) for component in strongly_connected(graph)]
    assert not cycles, "import cycles:\n" + "\n".join(cycles)


def test_no_module_in_the_package_is_over_500_lines() -> None:
    sources = [path for path in PACKAGE.rglob("*.py") if "__pycache__" not in path.parts]
    lengths = {path.relative_to(PACKAGE.parent): len(path.read_text(encoding="utf-8").splitlines()) for path in sources}
    over = sorted((lines, str(path)) for path, lines in lengths.items() if lines > MAX_LINES)
    assert not over, f"modules over {MAX_LINES} lines: " + ", ".join(f"{p} ({n})" for n, p in reversed(over))


MAX_ROOT_MODULES = 12


def unit_of(module: str) -> str:
    """What a module belongs to in the layout: its subpackage (``otel_repeat_guard.spans``), or itself at the root."""
    parts = module.split(".")
    return ".".join(parts[:2])


def unit_graph(graph: dict[str, list[Arrow]]) -> dict[str, list[Arrow]]:
    """The import graph between subpackages and root modules: one arrow per import that crosses from one to another."""
    units: dict[str, list[Arrow]] = {unit_of(module): [] for module in graph}
    for arrows in graph.values():
        for arrow in arrows:
            source, target = unit_of(arrow.source), unit_of(arrow.target)
            if source != target:
                units[source].append(Arrow(arrow.source, target, arrow.line))
    return units


def test_no_import_cycle_between_subpackages_or_root_modules() -> None:
    """Arrows point down: no subpackage imports one that imports it back, through any other, lazily or not."""
    units = unit_graph(import_graph())
    assert len(units) > 10 and sum(map(len, units.values())) > len(units), "the layout graph reads nothing"
    named = {unit: [Arrow(unit, arrow.target, arrow.line) for arrow in arrows] for unit, arrows in units.items()}
    cycles = []
    for component in strongly_connected(named):
        cycle = cycle_in(named, component)
        where = {(unit_of(a.source), a.target): a for arrows in units.values() for a in arrows}
        cycles.append(
            " → ".join([*(a.source for a in cycle), cycle[0].source])
            + " ("
            + "; ".join(f"{where[(a.source, a.target)].source}:{a.line}" for a in cycle)
            + ")"
        )
    assert not cycles, "import cycles between subpackages:\n" + "\n".join(cycles)


def test_the_package_root_holds_at_most_12_modules() -> None:
    root = sorted(path.name for path in PACKAGE.glob("*.py"))
    assert "processor.py" in root
    assert len(root) <= MAX_ROOT_MODULES, f"{len(root)} modules at the package root: {root}"


def _own_private_names(tree: ast.AST) -> set[str]:
    """The private names a module defines: its functions and classes, what it sets on ``self`` or ``cls``, its slots."""
    own: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            own.add(node.name)
        elif isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in ("self", "cls"):
            own.add(node.attr)
        elif isinstance(node, ast.Assign) and isinstance(node.value, (ast.Tuple, ast.List)):
            slots = any(isinstance(target, ast.Name) and target.id == "__slots__" for target in node.targets)
            own |= {e.value for e in node.value.elts if slots and isinstance(e, ast.Constant)}
    return own


def private_reaches(module: str, tree: ast.AST) -> list[str]:
    """``obj._x`` where ``_x`` is no name the module defines itself, and private names imported from another module."""
    own, found = _own_private_names(tree), []
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and node.attr.startswith("_") and not node.attr.startswith("__"):
            if not (isinstance(node.value, ast.Name) and node.value.id in ("self", "cls")) and node.attr not in own:
                found.append(f"{module}:{node.lineno} reads {ast.unparse(node)}")
        elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith(NAME):
            for alias in node.names:
                private = alias.name.startswith("_") and not alias.name.startswith("__")
                if private and f"{node.module}.{alias.name}" not in MODULES:  # a private module is no private name
                    found.append(f"{module}:{node.lineno} imports {alias.name} from {node.module}")
    return found


def test_no_module_reaches_into_another_objects_private_names_but_span_events() -> None:
    """Objects own their state: only :mod:`otel_repeat_guard.spans.span_events` touches the SDK's private names."""
    reaches = []
    for module, path in MODULES.items():
        if module != f"{NAME}.spans.span_events":
            reaches += private_reaches(module, ast.parse(path.read_text(encoding="utf-8"), filename=str(path)))
    assert not reaches, "private names reached across modules:\n" + "\n".join(reaches)


def test_the_private_name_check_sees_reads_and_imports_but_not_a_modules_own() -> None:
    source = (
        "from otel_repeat_guard.store.sql import _HIDDEN\n"
        "class A:\n"
        "    __slots__ = ('_kept',)\n"
        "    def _mine(self, other): return other._kept, other._mine()\n"
        "def f(span): return span._attributes\n"
    )
    assert sorted(private_reaches("m", ast.parse(source))) == [
        "m:1 imports _HIDDEN from otel_repeat_guard.store.sql",
        "m:5 reads span._attributes",
    ]


def test_the_clickhouse_reader_never_imports_the_dashboard() -> None:
    """The store seam: the dashboard asks its questions of a reader; the readers know nothing of the pages."""
    graph = import_graph()
    arrows = [arrow for module, found in graph.items() if module.startswith(f"{NAME}.clickhouse.") for arrow in found]
    assert arrows and not [arrow for arrow in arrows if arrow.target.startswith(f"{NAME}.dashboard")]
