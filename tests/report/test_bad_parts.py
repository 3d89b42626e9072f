"""summary.txt and report.html lead with the bad parts: one line per part (a host, a GPU by index, bus id and
UUID, a GPU pair, an RDMA port), however many tests and gates failed on it, its worst figure against its
gate and the likely cause; for GPU runs report.html's GPU grid and pair heatmap come right under them.

The runs are the real ones of the calibration record (tests/thresholds/fixtures), judged again by today's
gates as the judge command judges them, then rendered as the report stage renders a run.
"""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path

from pav.commands.judge import rejudge
from pav.reporting import bad_parts, html, summary
from pav.results import HostRecord, RunResults, StageRecord, TestResult
from pav.thresholds.health import health_results
from tests.report.test_report_html import Page, browse
from tests.summary_lines import unfolded
from tests.thresholds.test_derive import NDR, down, hgx
from tests.thresholds.test_real_gpu_runs import X2B_GPU1, X4_GPU0

CALIBRATION = Path(__file__).parents[1] / "thresholds" / "fixtures"
HEALTHY = ("h100x2b-healthy", "h100x2b-inventory", "h100x4-healthy", "h100x2-healthy", "h100x1-healthy")


def judged_run(fixture: str) -> RunResults:
    """A recorded run dir judged again, as the report stage holds a run it is about to write."""
    path = CALIBRATION / fixture
    found = rejudge(path)
    data = json.loads((path / "results.json").read_text())
    return RunResults(
        data["run_id"], data["env"], data["inventory"], str(path), found.profile,
        stages=[StageRecord(**s) for s in data["stages"]],
        hosts={name: HostRecord(**host) for name, host in data["hosts"].items()},
        tests=[r.test for r in found.tests], verdict=found.verdict, isolation=data.get("isolation") or {},
        gates=found.gates,
    )  # fmt: skip


def first_block(text: str) -> list[str]:
    """summary.txt's lines after its first (the verdict) up to the first blank line."""
    lines = text.splitlines()
    assert lines[0].startswith("verdict "), lines[0]
    return lines[1 : lines.index("", 1)]


def test_the_summary_leads_with_the_hogged_gpu_of_the_2_gpu_run() -> None:
    run = judged_run("h100x2b-gpu-busy-gpu1")
    text = summary.render(run)
    assert text.splitlines()[0].startswith("verdict FAIL  run 20261126T173235.665Z-local")
    assert max(len(line) for line in text.splitlines()) <= summary.WIDTH  # folded, each part's rest below it
    block = unfolded(first_block(text))
    assert block[0].startswith("bad parts")
    assert block[1].startswith(f"  localhost {X2B_GPU1}: gemm_bf16_tflops.1 277 TFLOP/s, gate >= 763.6 ")
    assert "another process on it" in block[1]
    # Each part once, however many gates (absolute and relative) and tests failed on it.
    body = "\n".join(block)
    assert body.count(X2B_GPU1) == 1 and body.count(" 277 ") == 1
    assert [line.split(":")[0].strip() for line in block[1:]] == [
        f"localhost {X2B_GPU1.split(':')[0]}",
        "localhost GPU 0 -> GPU 1",
        "localhost",
    ]
    host = block[3]
    assert "160.3 GB/s, gate >= 327.9" in host and "[torch_nccl_allreduce, nccl_tests_all_reduce]" in host
    # The full reasons stay below, and the verdict closes the file as before.
    below = text.index("\ntest ") > text.index(first_block(text)[-1])
    assert below and text.rstrip().endswith("VERDICT: FAIL")


def test_the_summary_leads_with_gpu_0_of_the_4_gpu_hog_run() -> None:
    block = unfolded(first_block(summary.render(judged_run("h100x4-gpu-busy"))))
    assert block[1].startswith(f"  localhost {X4_GPU0}: gemm_bf16_tflops.0 277.1 TFLOP/s, gate >= 763.6 ")
    assert "\n".join(block).count("277.1") == 1 and len(block) == 3


def test_a_healthy_run_has_no_bad_parts_block() -> None:
    for fixture in HEALTHY:
        run = judged_run(fixture)
        assert run.verdict == "PASS", fixture
        text = summary.render(run)
        assert text.splitlines()[1] == "" and "bad parts" not in text, fixture
        assert bad_parts.find(run.to_dict()) == []


def test_a_cluster_tests_profile_gate_names_its_hosts_and_figure() -> None:
    """Two nodes over sockets: the network's bus bandwidth under its reference (issue 63) and FSDP's node
    scaling under the profile's 0.9, every test across the nodes on one line, the fabric's."""
    [part] = bad_parts.find(judged_run("h100x4-split-socket").to_dict())
    assert part.hosts == ("node-a", "node-b") and part.kind == "fabric"
    assert part.tests == ("torch_nccl_allreduce_multi", "train_gpu_ddp_multi", "train_gpu_fsdp_multi")
    assert part.worst.text() == "busbw_gbps.all_reduce.8589934592 5.072 GB/s, gate >= 346.6 = 0.95 x 364.9"
    assert part.more == 2


def test_health_problems_are_parts_of_their_own() -> None:
    """Six NVLink links down on GPU 2 and an InfiniBand port down: one line for the GPU, one for the port."""
    facts = hgx(8, down={2: 6}, ports=down(NDR, 3, rate="10 Gb/sec (4X SDR)"))
    [health] = health_results({"n1": HostRecord("n1", facts=facts)})
    results = {"tests": [asdict(health)], "isolation": {}}
    gpu, port = bad_parts.find(results)
    assert (gpu.where, gpu.kind, gpu.more) == ("n1 GPU 2 (00000000:38:00.0, GPU-0002-uuid)", "gpu", 5)
    assert gpu.worst.text().endswith("NVLink link 0 down") and "nvidia-smi nvlink -s" in gpu.worst.cause
    assert (port.where, port.kind) == ("n1 mlx5_3 port 1", "port")
    assert port.worst.text() == "mlx5_3 port 1: DOWN (InfiniBand)" and "ibstat" in port.worst.cause


def test_a_failure_no_gate_explains_is_its_hosts_with_the_reason() -> None:
    """A timeout across hosts: isolation named h2, so the line is h2's; a crash on h3 is h3's."""
    timeout = TestResult("torch_nccl_allreduce", ["h1", "h2"], "fail", "timeout after 60s on h1, h2")
    crash = TestResult("gpu_probe", ["h3"], "error", "launcher failed (h3 rc=1) although every rank passed")
    suspects = [{"host": "h2", "reason": "every test that includes h2 fails", "evidence": []}]
    found = bad_parts.find({"tests": [asdict(timeout), asdict(crash)], "isolation": {"suspects": suspects}})
    assert [(p.where, p.kind) for p in found] == [("h2", "host"), ("h3", "host")]
    assert found[0].worst.text() == "torch_nccl_allreduce fail: timeout after 60s on h1, h2"
    assert "straggler" in found[0].worst.cause and "crashed" in found[1].worst.cause


def test_wrong_bytes_are_a_figure_even_without_a_gate_on_them() -> None:
    test = TestResult("nccl_tests_all_reduce", ["h1"], "fail", "wrong elements in 1 of 5 rows",
                      {"wrong_total": 12, "busbw_gbps": {"8589934592": 400.0}},
                      {"nccl_tests": [{"size_bytes": 8589934592, "min_busbw_gbps": 337.5}]})  # fmt: skip
    [part] = bad_parts.find({"tests": [asdict(test)]})
    assert part.worst.text() == "wrong_total 12, gate <= 0" and "data corruption" in part.worst.cause


def test_the_report_leads_with_bad_parts_then_the_gpu_grid(tmp_path: Path) -> None:
    """report.html of the 2-GPU hog run in headless Chromium: after the verdict, the bad parts, then the GPU
    grid and pair heatmap; suspects, the hosts x tests matrix and every failure's reason below."""
    page = tmp_path / "report.html"
    page.write_text(html.render(judged_run("h100x2b-gpu-busy-gpu1").to_dict(), tmp_path))
    dom = browse(page, tmp_path, "--dump-dom").stdout
    parsed = Page(dom)
    headings = [e.text.strip() for e in parsed.elements if e.tag == "h2"]
    assert headings[:3] == ["Bad parts (3)", "GPUs and derived gates", "Suspect hosts"], headings
    order = [
        dom.index(f'id="{i}"') for i in ("verdict", "bad-parts", "gpus", "suspects", "matrix", "failures")
    ]
    assert order == sorted(order)
    grid, heat = dom.index('class="gpu-grid"'), dom.index('class="p2p"')
    assert dom.index('id="bad-parts"') < grid < heat < dom.index('id="suspects"')
    rows = parsed.rows("bad-parts")
    assert rows[0] == ["host", "part", "worst figure", "gate", "tests", "likely cause"]
    assert rows[1][:3] == ["localhost", X2B_GPU1, "gemm_bf16_tflops.1 277 TFLOP/s"]
    assert rows[1][3].startswith(
        ">= 763.6 = 0.96 x 795.4 (NVIDIA H100 80GB HBM3 reference 795.4 for this workload"
    )
    assert [r[1] for r in rows[1:]] == [X2B_GPU1, "GPU 0 -> GPU 1", "the host"]
    assert sum(r[2].count("277") for r in rows) == 1


def test_a_healthy_report_has_no_bad_parts(tmp_path: Path) -> None:
    page = html.render(judged_run("h100x2b-healthy").to_dict(), tmp_path)
    assert 'id="bad-parts"' not in page and 'class="gpu-grid"' in page


def test_the_documented_block_is_what_the_run_gives() -> None:
    """docs/results.md quotes the block of the 2-GPU hog run: it must be what that run renders today."""
    doc = (Path(__file__).parents[2] / "docs" / "results.md").read_text()
    quoted = doc[doc.index("## Bad parts") :].split("```\n")[1]
    rendered = summary.render(judged_run("h100x2b-gpu-busy-gpu1")).splitlines()
    assert quoted.splitlines() == rendered[: len(first_block("\n".join(rendered))) + 1]


def test_a_figure_never_measured_blames_no_hardware() -> None:
    """Issue 46: a gate whose metric the run never produced (a GPU held by someone else stopped the probe; a
    baseline that did not run) says so, never "data corruption" or "throttled clocks"."""
    test = {
        "name": "gpu_probe", "hosts": ["gpu-host"], "status": "fail",
        "reason": "wrong_total was not measured", "metrics": {},
        "threshold": {"gates": [
            {"metric": "wrong_total", "max": 0},
            {"metric": "gemm_bf16_tflops.0", "min": 692.6, "limit": 989.4, "fraction": 0.7,
             "basis": "absolute", "part": "GPU 0", "status": "not measured", "value": None},
        ]},
    }  # fmt: skip
    for _, figure in bad_parts.figures(test):
        assert figure.cause.startswith("not measured: "), figure
