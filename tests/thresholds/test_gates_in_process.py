"""The gates command (pav.commands.gates) in process, on real runs' results.json: every gate a host's facts
derive, with its limit and source, and the exit code that says whether a fact was missing."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest

from pav.commands import gates
from pav.commands.judge import rejudge
from pav.thresholds.hardware import read_hardware
from tests.thresholds.test_derive import NDR, hgx
from tests.thresholds.test_real_gpu_runs import FIXTURES

EARLIER_RELEASE = Path(__file__).parents[1] / "report" / "fixtures" / "h200-2gpu-results.json"


def run(path: Path, as_json: bool = False) -> int:
    return gates.run(argparse.Namespace(results=path, json=as_json))


def test_a_real_runs_facts_derive_every_gate(capsys: pytest.CaptureFixture[str]) -> None:
    path = FIXTURES / "h100x4-healthy" / "results.json"
    assert run(path) == gates.EXIT_ALL
    out = capsys.readouterr().out
    assert out.startswith("localhost: 4x NVIDIA H100 80GB HBM3 (facts from nvml)\n")
    assert "MISSING" not in out and "across hosts" not in out  # one host: no fabric
    assert "\nrelative (every host): each GPU >= 0.95 x the median of its host's other GPUs; " in out
    assert run(path, as_json=True) == gates.EXIT_ALL
    table = json.loads(capsys.readouterr().out)
    assert list(table) == ["localhost", "applied"]
    metrics = {g["metric"] for g in table["localhost"]}
    assert {f"gemm_bf16_tflops.{i}" for i in range(4)} <= metrics


def test_facts_an_earlier_release_did_not_read_are_named_missing(capsys: pytest.CaptureFixture[str]) -> None:
    assert run(EARLIER_RELEASE) == gates.EXIT_MISSING
    assert "MISSING: NVLink link state of every GPU" in capsys.readouterr().out


def test_two_gpu_hosts_get_inter_node_gates_and_a_cpu_host_none(tmp_path: Path) -> None:
    hardware = [read_hardware(n, hgx(8, ports=NDR)) for n in ("a", "b")] + [read_hardware("c", {})]
    table = gates.derive_all(hardware)
    assert list(table) == ["a", "b", "fabric"]
    text = gates.render(hardware, table)
    assert "c: no GPU: correctness gates only (thresholds/cpu.yml)" in text
    assert "across hosts:" in text


def test_a_file_that_is_not_a_results_json_is_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "results.json"
    path.write_text(json.dumps({"hosts": ["a"]}))
    assert run(path) == gates.EXIT_UNREADABLE
    err = capsys.readouterr().err
    assert err.startswith(f"error: cannot read {path} as results.json ('hosts' is not a mapping)")
    assert run(tmp_path / "none.json") == gates.EXIT_UNREADABLE


def test_it_prints_every_gate_judge_applies(capsys: pytest.CaptureFixture[str]) -> None:
    """Issue 61: what `gates` prints is what `judge` judges by, test by test: the profile's, derived,
    relative and reference gates alike (a profile gate that overrides a derived one shows as the
    profile's)."""
    path = FIXTURES / "h200x1f-duty10"
    assert run(path / "results.json", as_json=True) == gates.EXIT_ALL
    shown = json.loads(capsys.readouterr().out)["applied"]
    judged = rejudge(path / "results.json")
    assert shown["profile"] == judged.profile
    for r in judged.tests:
        metrics = [g["metric"] for g in r.test.threshold.get("gates") or []]
        assert [
            g["metric"] for g in shown["tests"][f"{r.test.name} on localhost"] if "min" in g or "max" in g
        ] == (metrics), r.test.name
    single = shown["tests"]["train_gpu_single on localhost"]
    assert {"metric": "tokens_per_s_per_rank_min", "basis": "reference"}.items() <= single[-1].items()
    assert run(path / "results.json") == gates.EXIT_ALL
    assert "applied by judge (profile gpu-correctness), per test:" in capsys.readouterr().out
