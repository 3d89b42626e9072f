"""Imports flow one way (issue 37): no module of src/pav imports one of a higher layer, and no modules, nor
packages, import each other in a circle.

The layers are declared once, as the "Layers" table of docs/architecture.md, and read from there: the doc
cannot drift from what this test holds the code to. Every pav import is drawn, function-level ones too (they
run when the function does). Imports under `if TYPE_CHECKING:` count for the layers (a type named from a
higher layer still ties the module to it) but not for cycles: they never run, and they are how a module names
the type of one that imports it. cli's importlib of the subcommands is not drawn (entry imports entry).
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from tests.conftest import ROOT

SRC = ROOT / "src" / "pav"
PAYLOAD = ROOT / "payload" / "pav_payload"
DOC = ROOT / "docs" / "architecture.md"

# Imports tolerated for now, (importer, imported) -> what removes it. One that is gone fails the test, so the
# list only shrinks.
KNOWN: dict[tuple[str, str], str] = {}


@dataclass(frozen=True)
class Source:
    name: str  # dotted, pav.platform; a package by its own name (pav.k8s is k8s/__init__.py)
    text: str
    package: bool = False


@dataclass(frozen=True)
class Edge:
    importer: str
    imported: str
    line: int
    typing_only: bool  # under `if TYPE_CHECKING:`

    def __str__(self) -> str:
        return f"{self.importer} (line {self.line}) imports {self.imported}"


@dataclass(frozen=True)
class Layers:
    names: tuple[str, ...]  # lowest first: the table's rows
    entries: Mapping[str, int]  # a table entry (cli, k8s.*) -> its row

    def of(self, module: str) -> int | None:
        """The row naming the module, else the one of its nearest package named `pkg.*`."""
        covering = [e for e in self.entries if names(e, module)]
        return self.entries[max(covering, key=lambda e: (not e.endswith(".*"), len(e)))] if covering else None

    def label(self, module: str) -> str:
        row = self.of(module)
        return "no layer" if row is None else self.names[row]


def names(entry: str, module: str) -> bool:
    """Whether a table entry names the module: `cli` pav.cli, `k8s.*` pav.k8s and all under it."""
    rel = module if module == "pav" else module.removeprefix("pav.")
    return rel == entry or (entry.endswith(".*") and f"{rel}.".startswith(entry[:-1]))


# --- drawing the graph ------------------------------------------------------------------------------------


def tree_sources(root: Path = SRC) -> list[Source]:
    sources = []
    for path in sorted(root.rglob("*.py")):
        parts = path.relative_to(root.parent).with_suffix("").parts
        package = parts[-1] == "__init__"
        sources.append(Source(".".join(parts[:-1] if package else parts), path.read_text(), package))
    return sources


def draw(sources: Iterable[Source]) -> list[Edge]:
    sources = list(sources)
    known = {s.name for s in sources}
    return [edge for source in sources for edge in _imports(source, known)]


def _imports(source: Source, known: set[str]) -> Iterator[Edge]:
    tree = ast.parse(source.text)
    typing_only = {
        id(inner)
        for node in ast.walk(tree)
        if isinstance(node, ast.If) and ast.unparse(node.test) in ("TYPE_CHECKING", "typing.TYPE_CHECKING")
        for stmt in node.body
        for inner in ast.walk(stmt)
    }
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            targets = [_module(alias.name, known) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = _absolute(node, source)
            targets = [_module(f"{base}.{alias.name}", known) for alias in node.names]
        else:
            continue
        for target in dict.fromkeys(t for t in targets if t is not None and t != source.name):
            yield Edge(source.name, target, node.lineno, id(node) in typing_only)


def _absolute(node: ast.ImportFrom, source: Source) -> str:
    if not node.level:
        return node.module or ""
    package = source.name.split(".") if source.package else source.name.split(".")[:-1]
    base = package[: len(package) - (node.level - 1)]
    return ".".join([*base, node.module] if node.module else base)


def _module(dotted: str, known: set[str]) -> str | None:
    """The pav module an import name lands in: `from pav.context import RunContext` -> pav.context."""
    parts = dotted.split(".")
    for end in range(len(parts), 0, -1):
        if (name := ".".join(parts[:end])) in known:
            return name
    return None


# --- the rules ----------------------------------------------------------------------------------------------


def read_layers(doc: str) -> Layers:
    section = doc.split("\n## Layers\n", 1)[1].split("\n## ", 1)[0]
    rows = [line.split("|")[1:-1] for line in section.splitlines() if line.startswith("| ")]
    rows = [cells for cells in rows if cells[0].strip() not in ("layer", "---")]
    entries: dict[str, int] = {}
    for row, cells in enumerate(rows):
        for entry in re.findall(r"`([^`]+)`", cells[1]):
            assert entry not in entries, f"{entry} sits in two layers of {DOC.name}'s table"
            entries[entry] = row
    return Layers(tuple(cells[0].split()[-1] for cells in rows), entries)


def upward(edges: Iterable[Edge], layers: Layers) -> list[str]:
    return [
        f"{e} ({layers.label(e.importer)} imports {layers.label(e.imported)})"
        for e in edges
        if (layers.of(e.importer) or 0) < (layers.of(e.imported) or 0)
    ]


def cycles(edges: Iterable[Edge]) -> list[list[str]]:
    """Each set of modules that import each other in a circle, as the imports that close it."""
    running = [e for e in edges if not e.typing_only]
    return [
        sorted(str(e) for e in running if e.importer in group and e.imported in group)
        for group in _strongly_connected(running)
    ]


def package_cycles(edges: Iterable[Edge], packages: set[str]) -> list[list[str]]:
    """The same with a package of pav as one unit: pav.reporting importing ansible_exec while ansible_exec
    imports pav.reporting.diffs is a circle, though no two modules close one."""

    def unit(module: str) -> str:
        top = ".".join(module.split(".")[:2])
        return top if top in packages and top != "pav" else module

    between = [e for e in edges if not e.typing_only and unit(e.importer) != unit(e.imported)]
    units = [Edge(unit(e.importer), unit(e.imported), e.line, False) for e in between]
    return [
        sorted(str(e) for e in between if unit(e.importer) in group and unit(e.imported) in group)
        for group in _strongly_connected(units)
    ]


def _strongly_connected(edges: list[Edge]) -> list[set[str]]:
    """Tarjan's algorithm: the groups of more than one module that reach each other."""
    after: dict[str, set[str]] = {}
    for e in edges:
        after.setdefault(e.importer, set()).add(e.imported)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    groups: list[set[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for nxt in sorted(after.get(node, ())):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            member = stack.pop()
            group = {member}
            while member != node:
                member = stack.pop()
                group.add(member)
            if len(group) > 1:
                groups.append(group)

    for node in sorted(after):
        if node not in index:
            visit(node)
    return groups


# --- src/pav --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Tree:
    sources: list[Source]
    edges: list[Edge]
    live: list[Edge]  # the edges KNOWN does not tolerate


@cache
def pav_tree() -> Tree:
    """src/pav drawn when a test first asks, once: at import every xdist worker would draw it while it
    collects (~1 CPU-s each), though one of them runs these tests."""
    sources = tree_sources()
    edges = draw(sources)
    return Tree(sources, edges, [e for e in edges if (e.importer, e.imported) not in KNOWN])


LAYERS = read_layers(DOC.read_text())


def test_every_module_sits_in_a_layer() -> None:
    sources = pav_tree().sources
    unplaced = [s.name for s in sources if LAYERS.of(s.name) is None]
    assert not unplaced, f"modules in no layer: add them to the Layers table of {DOC.name}: {unplaced}"
    unused = [e for e in LAYERS.entries if not any(names(e, s.name) for s in sources)]
    assert not unused, f"the Layers table of {DOC.name} names modules that do not exist: {unused}"


def test_each_package_sits_in_one_layer() -> None:
    """No row names a module inside a package: a package's folder tells its layer, all of it (issue 51)."""
    inside = [e for e in LAYERS.entries if "." in e.removesuffix(".*")]
    assert not inside, f"rows of {DOC.name}'s Layers table name modules inside a package: {inside}"


def test_no_module_imports_a_higher_layer() -> None:
    found = upward(pav_tree().live, LAYERS)
    assert not found, (
        f"imports that run upward (layers: {DOC.name}, Layers): move what the lower module needs down, or "
        "the module up:\n" + "\n".join(found)
    )


def test_no_modules_import_each_other() -> None:
    found = cycles(pav_tree().live)
    assert not found, "import cycles:\n" + "\n\n".join("\n".join(c) for c in found)


def test_no_packages_import_each_other() -> None:
    tree = pav_tree()
    found = package_cycles(tree.live, {s.name for s in tree.sources if s.package})
    assert not found, "packages that import each other:\n" + "\n\n".join("\n".join(c) for c in found)


def test_the_payload_has_no_import_cycle() -> None:
    """payload/pav_payload runs on the hosts, no layer table of its own; its modules import one way too."""
    found = cycles(draw(tree_sources(PAYLOAD)))
    assert not found, "import cycles in the payload:\n" + "\n\n".join("\n".join(c) for c in found)


def test_each_known_import_is_still_there() -> None:
    """A tolerated import that its change removed leaves KNOWN too."""
    drawn = {(e.importer, e.imported) for e in pav_tree().edges}
    gone = [f"{a} -> {b} ({why})" for (a, b), why in KNOWN.items() if (a, b) not in drawn]
    assert not gone, f"no longer imported: drop from KNOWN: {gone}"


# --- the rules catch what they are for ---------------------------------------------------------------------


def test_a_cycle_is_found_naming_its_modules() -> None:
    sources = [
        Source("pav.a", "def f() -> None:\n    from pav import b\n"),  # function-level: it runs, it counts
        Source("pav.b", "from pav.a import f\n"),
        Source("pav.c", "from pav.a import f\n"),
    ]
    assert cycles(draw(sources)) == [["pav.a (line 2) imports pav.b", "pav.b (line 1) imports pav.a"]]


def test_a_type_checking_import_closes_no_cycle_but_counts_for_the_layers() -> None:
    sources = [
        Source("pav.context", "import typing\nif typing.TYPE_CHECKING:\n    from pav.cli import x\n"),
        Source("pav.cli", "from pav.context import RunContext\n"),
    ]
    edges = draw(sources)
    assert cycles(edges) == []
    assert upward(edges, LAYERS) == ["pav.context (line 3) imports pav.cli (stages imports entry)"]


def test_an_upward_import_is_found_naming_both_layers() -> None:
    sources = [
        Source("pav.thresholds", "", package=True),
        Source("pav.thresholds.gate", "from ..stages import report\nimport pav.errors\n"),  # relative too
        Source("pav.stages", "", package=True),
        Source("pav.stages.report", "from pav.thresholds.gate import Gate\n"),
        Source("pav.errors", ""),
    ]
    assert upward(draw(sources), LAYERS) == [
        "pav.thresholds.gate (line 1) imports pav.stages.report (domain imports stages)"
    ]


def test_packages_that_import_each_other_are_a_cycle_though_no_modules_are() -> None:
    sources = [
        Source("pav.p", "", package=True),
        Source("pav.p.x", "from pav.q.y import Y\n"),
        Source("pav.q", "", package=True),
        Source("pav.q.y", ""),
        Source("pav.q.z", "from pav.p.x import X\n"),
    ]
    edges = draw(sources)
    assert cycles(edges) == []
    assert package_cycles(edges, {"pav.p", "pav.q"}) == [
        ["pav.p.x (line 1) imports pav.q.y", "pav.q.z (line 1) imports pav.p.x"]
    ]


def test_the_table_places_a_module_by_its_most_exact_entry() -> None:
    assert LAYERS.names == ("base", "domain", "engines", "stages", "entry")
    assert LAYERS.label("pav.secrets.redact") == "base" and LAYERS.label("pav.stages.scrub") == "stages"
    assert LAYERS.label("pav.simhosts.net") == "base"
    assert LAYERS.label("pav.provisioning.nebius") == "engines"
    assert LAYERS.label("pav.k8s.render") == "engines" and LAYERS.label("pav.k8s_config") == "domain"
    assert LAYERS.of("pav.k8s") == LAYERS.of("pav.k8s.render")  # the package and its modules: one layer
    assert LAYERS.of("pav.no_such_module") is None and LAYERS.of("pav.k8sx") is None
