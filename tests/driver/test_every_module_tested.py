"""Every module of src/pav is imported by at least one test (issue 37): a module reached only through an
end-to-end subprocess run is changed blind by anyone who runs the fast tests alone.

The scan reads tests/ as source (AST): `import X`, `from X import Y` (Y a module or a name of X), and
`runpy.run_module("X")` / `importlib.import_module("X")` with the name written out (run_module of a package
runs its __main__). A package's __init__ counts as imported when any module under it is.
"""

from __future__ import annotations

import ast
from pathlib import Path

from tests.conftest import ROOT

SRC = ROOT / "src"
TESTS = ROOT / "tests"
# Functions that import the module their first argument names.
IMPORTERS = {"run_module", "import_module"}


def modules(src: Path) -> set[str]:
    """Dotted names of every module under src (a package by its own name, not NAME.__init__)."""
    found = set()
    for path in src.rglob("*.py"):
        parts = list(path.relative_to(src).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        found.add(".".join(parts))
    return found


def imported(tests: Path, known: set[str]) -> set[str]:
    """Every module of `known` that a file under tests/ imports or runs, with the packages above each."""
    names: set[str] = set()
    for path in tests.rglob("*.py"):
        names |= _named(ast.parse(path.read_text(), str(path)), known)
    return {".".join(name.split(".")[:i]) for name in names for i in range(1, name.count(".") + 2)}


def _named(tree: ast.AST, known: set[str]) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names.add(node.module)
            names |= {f"{node.module}.{alias.name}" for alias in node.names}
        elif isinstance(node, ast.Call) and _importer(node.func) and node.args:
            first = node.args[0]
            if isinstance(first, ast.Constant) and isinstance(first.value, str):
                names.add(first.value)
                if _importer(node.func) == "run_module" and f"{first.value}.__main__" in known:
                    names.add(f"{first.value}.__main__")
    return {n for n in names if n in known}


def _importer(func: ast.expr) -> str:
    name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
    return name if name in IMPORTERS else ""


def untested(src: Path, tests: Path) -> list[str]:
    known = modules(src)
    return sorted(known - imported(tests, known))


def test_every_module_of_pav_is_imported_by_a_test() -> None:
    missing = [m for m in untested(SRC, TESTS) if m.split(".")[0] == "pav"]
    assert not missing, (
        "modules no test imports (a subprocess run does not count): add an in-process test that asserts "
        "their behaviour:\n  " + "\n  ".join(missing)
    )


def test_the_scan_names_a_module_no_test_imports(tmp_path: Path) -> None:
    """The scan is not vacuous: each way of importing counts, a mention in a string or comment does not,
    and a package counts through its submodules."""
    src, tests = tmp_path / "src", tmp_path / "tests"
    for name in ("a/__init__", "a/b", "a/c", "a/d", "a/e", "f/__init__", "f/__main__", "g", "h", "i/__init__",
                 "i/j"):  # fmt: skip
        (src / f"{name}.py").parent.mkdir(parents=True, exist_ok=True)
        (src / f"{name}.py").write_text("")
    tests.mkdir()
    (tests / "test_x.py").write_text(
        "import a.b\nfrom a import c\nfrom a.d import something\nimport runpy\n\n"
        "def test():\n    runpy.run_module('f')\n    importlib.import_module('g')\n"
        "    # import h\n    s = 'import i.j'\n"
    )
    assert untested(src, tests) == ["a.e", "h", "i", "i.j"]
