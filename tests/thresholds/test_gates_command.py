"""`provision-and-validate gates --results FILE`: the gates a results.json's facts derive, host by host."""

from __future__ import annotations

import json
from pathlib import Path

from tests.conftest import assert_one_line_error, run_cli_here
from tests.thresholds.test_derive import NDR, hgx

REAL_RUN = Path(__file__).parents[1] / "report" / "fixtures" / "h200-2gpu-results.json"


def test_a_results_json_of_the_earlier_release_derives_what_its_facts_allow() -> None:
    run = run_cli_here("gates", "--results", str(REAL_RUN))
    assert run.rc == 1, run.stderr  # facts are missing: NVLink and PCIe were not read then
    assert "localhost: 2x NVIDIA H200 (facts from preflight)" in run.stdout
    assert "gemm_bf16_tflops.1" in run.stdout and ">= 692.6     = 0.7 x 989.4" in run.stdout
    assert "MISSING: NVLink link state of every GPU" in run.stdout
    assert "MISSING: PCIe generation and width of GPU 0 (00000000:00:06.0)" in run.stdout


def test_nvml_facts_derive_every_gate_and_the_fabric(tmp_path: Path) -> None:
    hosts = {name: {"facts": hgx(8, ports=NDR)} for name in ("gpu-a", "gpu-b")}
    path = tmp_path / "results.json"
    path.write_text(json.dumps({"hosts": hosts, "tests": []}))
    run = run_cli_here("gates", "--results", str(path))
    assert run.rc == 0, run.stdout + run.stderr
    assert "MISSING" not in run.stdout
    assert "across hosts:" in run.stdout
    assert "the full complement of 8 InfiniBand ports on gpu-a (8 listed, 8 active) x 400 Gb/s" in run.stdout
    as_json = json.loads(run_cli_here("gates", "--results", str(path), "--json").stdout)
    assert set(as_json) == {"gpu-a", "gpu-b", "fabric", "applied"}
    assert as_json["applied"] == {"error": f"{path} records no threshold_profile; pass --profile NAME"}
    gemm = next(g for g in as_json["gpu-a"] if g["metric"] == "gemm_bf16_tflops.0")
    assert gemm | {"source": ""} == {
        "test": "gpu_probe", "metric": "gemm_bf16_tflops.0", "min": 692.58, "limit": 989.4, "fraction": 0.7,
        "basis": "absolute", "source": "", "part": "GPU 0 (00000000:18:00.0, GPU-0000-uuid)",
    }  # fmt: skip


def test_a_cpu_host_has_correctness_gates_only(tmp_path: Path) -> None:
    path = tmp_path / "results.json"
    path.write_text(json.dumps({"hosts": {"laptop": {"facts": {"gpu": {"count": "0"}}}}}))
    run = run_cli_here("gates", "--results", str(path))
    assert run.rc == 0 and "laptop: no GPU: correctness gates only" in run.stdout


def test_unreadable_results_is_one_error_line(tmp_path: Path) -> None:
    path = tmp_path / "results.json"
    path.write_text("{not json")
    assert_one_line_error(
        run_cli_here("gates", "--results", str(path)), str(path), "pass a run dir or its results.json"
    )


def test_a_run_dir_like_judge_and_json_that_says_why_a_host_has_no_gate(tmp_path: Path) -> None:
    """Issue 64: `gates` took no run dir where `judge` does, and `--json` of a record without a GPU host
    printed `{}` (or only `applied`): every host is named, the reason beside it."""
    from tests.thresholds.test_judge_command import nothing_run_record

    run_dir = nothing_run_record(tmp_path / "run")
    run = run_cli_here("gates", str(run_dir))
    assert run.rc == 0, run.stdout + run.stderr
    assert "box: no GPU: correctness gates only (thresholds/cpu.yml)" in run.stdout
    assert "applied by judge (profile cpu), per test:" in run.stdout  # as judge RUN_DIR judges it
    assert run_cli_here("gates", str(run_dir / "results.json")).stdout == run.stdout
    as_json = json.loads(run_cli_here("gates", str(run_dir), "--json").stdout)
    assert as_json["box"] == [] and as_json["no_gpu"] == {
        "box": "no GPU: correctness gates only (thresholds/cpu.yml)"
    }
    assert as_json["none_derived"] == "no host with a GPU in the record: correctness gates only"
    assert as_json["applied"] == {"profile": "cpu", "tests": {"sdc_check on box": [], "gpu_burn on box": []}}
    empty = tmp_path / "empty.json"
    empty.write_text(json.dumps({"hosts": {}, "tests": []}))
    assert json.loads(run_cli_here("gates", str(empty), "--json").stdout)["none_derived"] == (
        "the record names no host"
    )
    assert_one_line_error(
        run_cli_here("gates"), "pass one run dir or results.json (RUN_DIR, or --results FILE)"
    )
