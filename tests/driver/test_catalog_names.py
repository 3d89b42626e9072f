"""A test is one unit in the catalog (issue 37): what the driver knows of a test (the gates it is judged by,
its scaling baselines, its Slurm check) is a field of its TestSpec, so no module outside the catalog
matches on a test's name. Adding a test is then one entry in src/pav/catalog.py."""

from __future__ import annotations

import ast
from pathlib import Path

from pav import catalog
from tests.conftest import ROOT

SRC = ROOT / "src" / "pav"
NAMES = set(catalog.CATALOG) | set(catalog._fault_tests())  # the test-only ones too


def is_catalog(path: Path) -> bool:
    """The catalog module(s): catalog.py, and any catalog_*.py a spec table is split into."""
    return path.parent == SRC and (path.stem == "catalog" or path.stem.startswith("catalog_"))


def name_literals(source: str) -> list[tuple[int, str]]:
    """(line, name) of every string literal that is exactly a test's name."""
    return sorted(
        (node.lineno, node.value)
        for node in ast.walk(ast.parse(source))
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value in NAMES
    )


def test_no_module_outside_the_catalog_names_a_test() -> None:
    found = [
        f"{path.relative_to(ROOT)}:{line}: {name!r}"
        for path in sorted(SRC.rglob("*.py"))
        if not is_catalog(path)
        for line, name in name_literals(path.read_text())
    ]
    assert not found, (
        "test names as string literals outside the catalog: make what the module matches the name for a "
        "TestSpec field (src/pav/catalog.py) and read the spec instead:\n" + "\n".join(found)
    )


def test_the_scan_finds_a_name() -> None:
    """The scan is not vacuous: a name in a comparison, a dict key or a tuple is found; a docstring or an
    f-string part that merely mentions one is not a literal of it."""
    source = (
        'def f(t):\n    """Judges gpu_probe."""\n    return t == "gpu_probe" or t in {"train_gpu_ddp": 1}\n'
        'X = ("slurm_shared_fs",)\nY = f"nccl_tests_{1}"\n'
    )
    assert name_literals(source) == [(3, "gpu_probe"), (3, "train_gpu_ddp"), (4, "slurm_shared_fs")]
    assert is_catalog(SRC / "catalog.py") and is_catalog(SRC / "catalog_specs.py")
    assert not is_catalog(SRC / "thresholds" / "catalog.py")


def test_the_names_the_catalog_holds_are_its_tests() -> None:
    """Every test a spec or a catalog constant names is one the catalog knows."""
    named = {catalog.probe(), *catalog.DEFAULT_TESTS}
    named |= {base for spec in catalog.CATALOG.values() for base in spec.scaling_baselines}
    assert named <= set(catalog.CATALOG), named - set(catalog.CATALOG)


def test_each_field_sits_on_the_tests_it_is_for() -> None:
    for spec in catalog.CATALOG.values():
        assert bool(spec.slurm_check) == (spec.launcher == "slurm"), spec.name
        assert not (spec.slurm_check_alone or spec.slurm_check_per_node) or spec.slurm_check, spec.name
        assert not spec.busbw_ops or (spec.scope == "host" and spec.needs_gpu), spec.name
        assert not spec.inter_node_metric or (spec.scope == "cluster" and spec.needs_gpu), spec.name
        assert bool(spec.scaling_baselines) == bool(spec.scaling_throughput), spec.name
        assert not spec.per_gpu_probe or (spec.payload == "probe" and spec.scope == "host"), spec.name
        if spec.scaling_baselines and spec.scope == "host":
            assert len(spec.scaling_baselines) == 1, spec.name  # the one 1-GPU run on the same host


def test_one_test_is_the_per_gpu_probe_and_no_module_names_it() -> None:
    """The probe's role is its spec's field (issue 51): the per-GPU gates, the GPU grid and the relative
    gates ask catalog.is_probe, never its name."""
    assert [s for s in catalog.CATALOG.values() if s.per_gpu_probe] == [catalog.CATALOG[catalog.probe()]]
    assert catalog.is_probe(catalog.probe()) and not catalog.is_probe(catalog.DEFAULT_TESTS[0])
    assert not catalog.is_probe("no_such_test")
