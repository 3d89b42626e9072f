"""report.html's folds at fleet size (pav.reporting.fold): a test's gates past FULL_UP_TO hosts keep each
failing or near-limit row whole and fold the rest per metric and basis; fewer hosts keep every row."""

from __future__ import annotations

from typing import Any

from pav.reporting import fold, gpu_grid


def probe(host: str, gemm: float, near: float = 780.0) -> dict[str, Any]:
    """A gpu_probe of 2 GPUs whose GEMM gates hold min 700: GPU 0 at `gemm`, GPU 1 at `near`."""
    gates = [
        {"metric": f"gemm_bf16_tflops.{i}", "min": 700.0, "limit": 1000.0, "fraction": 0.7,
         "basis": "absolute", "source": "datasheet", "part": f"GPU {i}", "value": value,
         "status": "pass" if value >= 700 else "fail"}
        for i, value in enumerate((gemm, near))
    ]  # fmt: skip
    gates.append({"metric": "busbw_gbps.8589934592", "min": 300.0, "basis": "absolute", "part": "host",
                  "value": 400.0, "status": "pass"})  # fmt: skip
    return {"name": "gpu_probe", "hosts": [host], "status": "pass", "threshold": {"gates": gates}}


def tables(count: int, **bad: float) -> list[gpu_grid.GateTable]:
    tests = [probe(f"h{i}", bad.get(f"h{i}", 800.0 + i)) for i in range(count)]
    return gpu_grid.gate_tables({"tests": tests})


def test_few_hosts_keep_every_row() -> None:
    shown = fold.gate_tables(tables(fold.FULL_UP_TO))
    assert all(isinstance(t, gpu_grid.GateTable) for t in shown) and len(shown) == fold.FULL_UP_TO


def test_many_hosts_keep_the_failing_and_near_limit_rows_and_fold_the_rest() -> None:
    [folded] = fold.gate_tables(tables(20, h7=500.0))
    assert isinstance(folded, fold.FoldedGates)
    assert (folded.runs, folded.where, folded.total, folded.failing) == (20, "h[0-19]", 60, 1)
    # The failing row first, then each host's GPU 1 at 780 (1.114 x 700: not near); none near the bound here.
    assert [(k.host, k.gate.metric, k.gate.status) for k in folded.kept] == [
        ("h7", "gemm_bf16_tflops.0", "fail")
    ]
    groups = {g.metric: g for g in folded.groups}
    assert set(groups) == {"gemm_bf16_tflops.N", "busbw_gbps.8589934592"}  # a size is not a GPU index
    gemm = groups["gemm_bf16_tflops.N"]
    assert (gemm.gates, gemm.host_count, gemm.hosts) == (39, 20, "h[0-19]")
    assert gemm.worst.host == "h0" and round(gemm.lowest or 0, 3) == round(780 / 700, 3)


def test_a_passing_figure_within_near_limit_of_its_bound_is_kept_whole() -> None:
    [folded] = fold.gate_tables(tables(20, h3=710.0))  # 1.014 x its min of 700
    assert [(k.host, k.gate.value, k.gate.status) for k in folded.kept] == [("h3", 710.0, "pass")]
    assert folded.failing == 0


def test_a_healthy_host_is_the_lowest_of_each_figure() -> None:
    metrics = {
        "gpu_count": 2,
        "gemm_bf16_tflops": {"0": 790.0, "1": 780.0},
        "p2p_gbps": {"0": {"1": 380.0}, "1": {"0": 370.0}},
    }
    host = gpu_grid.host_gpus("h0", {"status": "pass", "metrics": metrics, "threshold": {}}, {})
    [row] = fold.healthy_hosts([host])
    assert (row.host, row.gpus) == ("h0", 2)
    assert row.lows[0] == fold.Low(780.0, "GPU 1")
    assert row.lows[-1] == fold.Low(370.0, "GPU 1 -> GPU 0")
    assert row.lows[1] == fold.Low(None, "")  # no HBM figure measured
