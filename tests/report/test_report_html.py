"""report.html opened in headless Chromium: the verdict and the plots render, offline, with no secret in it.

Two pages: the one the real local run wrote, and one rendered from that run's results.json with GPU
results added (nccl-tests judged by the real evaluator from recorded logs, payload busbw and training
numbers of docs/benchmarks.md, an isolation verdict) since no GPU run can happen here.
"""

from __future__ import annotations

import copy
import json
import re
import shutil
import struct
import subprocess
import zlib
from pathlib import Path
from typing import Any

import pytest

from pav.evaluate import evaluate_launch
from pav.launches import Launch
from pav.reporting import html
from pav.thresholds import load_gates
from tests.conftest import LocalRun

FIXTURES = Path(__file__).resolve().parents[1] / "nccl_tests" / "fixtures"
SECRET = "s3cr3t-token-value-42"
GIB = 1 << 30
# docs/benchmarks.md, 2x H200: payload all_reduce busbw 512M..8G, and training.
PAYLOAD_BUSBW = {
    str(GIB // 2): 313.1,
    str(GIB): 324.7,
    str(2 * GIB): 337.6,
    str(4 * GIB): 342.4,
    str(8 * GIB): 346.6,
}
SERIES = re.compile(r'<path class="series" d="M[\d.]+,[\d.]+(?: L[\d.]+,[\d.]+)+"')


def chromium() -> str:
    path = shutil.which("chromium")
    assert path, "chromium is missing: scripts/install-sim-deps installs it (Debian's chromium package)"
    return path


def browse(page: Path, tmp: Path, *args: str) -> subprocess.CompletedProcess[str]:
    argv = [chromium(), "--headless", "--no-sandbox", "--disable-gpu", f"--user-data-dir={tmp / 'profile'}",
            "--hide-scrollbars", "--window-size=1400,2000", *args, page.resolve().as_uri()]  # fmt: skip
    return subprocess.run(argv, capture_output=True, text=True, timeout=120, check=True)


def png_pixels(path: Path) -> tuple[int, int, bytes]:
    """Width, height and the decompressed scanlines of a PNG (no imaging library needed)."""
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    pos, idat, size = 8, b"", (0, 0)
    while pos < len(data):
        length, kind = struct.unpack(">I4s", data[pos : pos + 8])
        chunk = data[pos + 8 : pos + 8 + length]
        if kind == b"IHDR":
            size = struct.unpack(">II", chunk[:8])
        elif kind == b"IDAT":
            idat += chunk
        pos += 12 + length
    return size[0], size[1], zlib.decompress(idat)


def check_rendered(page: Path, tmp: Path, verdict: str) -> str:
    dom = browse(page, tmp, "--dump-dom").stdout
    assert re.search(rf'id="verdict"[^>]*>\s*<strong>{verdict}</strong>', dom), dom[:2000]
    assert len(SERIES.findall(dom)) >= 1 and "<circle" in dom
    shot = tmp / f"{page.stem}.png"
    browse(page, tmp, f"--screenshot={shot}")
    width, height, pixels = png_pixels(shot)
    assert (width, height) == (1400, 2000)
    assert len(set(pixels[: 400 * 1024])) > 16, "the screenshot is blank"
    return dom


def test_the_runs_own_report_renders(local_run: LocalRun, tmp_path: Path) -> None:
    assert local_run.rc == 0, local_run.output
    page = local_run.run_dir / "report.html"
    text = page.read_text()
    assert "<script" not in text and "http://" not in text.replace("http://www.w3.org/2000/svg", "")
    dom = check_rendered(page, tmp_path, "PASS")
    assert "all_reduce bus bandwidth" in dom and "localhost" in dom
    assert "samples/s per rank" in dom  # ddp_cpu_train's throughput chart


def add_nccl_tests(run_dir: Path, host: str, log: str) -> list[Any]:
    """nccl-tests on `host`, judged by the real evaluator from a recorded log, as a run dir holds it."""
    test_dir = run_dir / "hosts" / host / "results" / "nccl_tests_all_reduce"
    test_dir.mkdir(parents=True)
    (test_dir / "launcher.log").write_text((FIXTURES / log).read_text() + f"\nNEBIUS_IAM_TOKEN={SECRET}\n")
    (test_dir / "launcher.rc").write_text("0\n")
    launch = Launch(
        "nccl_tests_all_reduce", "nccl_tests", "host", 600, {host: ["all_reduce_perf"]}, {host: 8}
    )
    return [r.__dict__ for r in evaluate_launch(launch, run_dir, [], load_gates("h100-sxm-8gpu"))]


def gpu_results(local: dict[str, Any], run_dir: Path) -> dict[str, Any]:
    results = copy.deepcopy(local)
    results["tests"] = [t for t in results["tests"] if t["name"] != "nccl_tests_all_reduce"]
    results["tests"] += add_nccl_tests(run_dir, "localhost", "oci_h100_2node_all_reduce_perf.txt")
    results["tests"] += add_nccl_tests(run_dir, "gpu-b", "olivia_gh200_wrong_all_reduce_perf.txt")
    gate = {"metric": f"busbw_gbps.all_reduce.{8 * GIB}", "min": 315.0}
    results["tests"].append({
        "name": "torch_nccl_allreduce", "hosts": ["localhost"], "status": "pass", "reason": "",
        "metrics": {"wrong_total": 0, "busbw_gbps": {"all_reduce": PAYLOAD_BUSBW}},
        "threshold": {"gates": [{"metric": "wrong_total", "max": 0.0}, gate]}, "artifacts": [],
    })  # fmt: skip
    for name, tokens, extra in (
        ("train_gpu_single", 62063.0, {}),
        ("train_gpu_ddp", 61225.0, {"scaling_efficiency": 0.987}),
    ):
        results["tests"].append({
            "name": name, "hosts": ["localhost"], "status": "pass", "reason": "",
            "metrics": {"tokens_per_s_per_rank_min": tokens, "step_time_s_median": 0.132, "loss_first": 6.2,
                        "loss_last": 4.1, "loss_ratio": 0.66, "world_size": 2, **extra},
            "threshold": {"gates": [{"metric": "scaling_efficiency", "min": 0.9}]}, "artifacts": [],
        })  # fmt: skip
    device = ["0", "NVIDIA H200", "143771", "580.159.04", "00000000:19:00.0", "[N/A]", "96.00.AF.00.01"]
    gpu = {"count": 2, "devices": [device, ["1", *device[1:]]], "driver": "580.159.04", "cuda": "13.0",
           "topology": "GPU0 X NV18\nGPU1 NV18 X"}  # fmt: skip
    torch = {"version": "2.11.0+cu130", "nccl": "2.28.9"}
    results["hosts"]["gpu-b"] = {"name": "gpu-b", "status": "ok", "facts": {"gpu": gpu, "torch": torch}}
    results["verdict"] = "FAIL"
    results["isolation"] = {
        "suspects": [{"host": "gpu-b", "reason": "every test that includes gpu-b fails; all others pass",
                      "evidence": [{"test": "nccl_tests_all_reduce", "hosts": ["gpu-b"], "status": "fail",
                                    "detail": "wrong elements"}]}],
        "steps": [{"test": "nccl_tests_all_reduce", "hosts": ["localhost"], "status": "pass", "detail": ""}],
    }  # fmt: skip
    return results


def test_gpu_results_render_with_gates_failures_and_suspects(local_run: LocalRun, tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    shutil.copytree(local_run.run_dir, run_dir)
    results = gpu_results(local_run.results, run_dir)
    page = run_dir / "report.html"
    page.write_text(html.render(results, run_dir, secrets=[SECRET]))
    text = page.read_text()
    assert SECRET not in text and "NEBIUS_IAM_TOKEN=&lt;redacted&gt;" in text
    dom = check_rendered(page, tmp_path, "FAIL")
    assert len(SERIES.findall(dom)) >= 4  # gloo payload, torch NCCL payload, 2 nccl-tests curves
    assert 'stroke-dasharray="6 4"' in dom  # nccl-tests are dashed
    assert "payload gate 315 GB/s at 8G" in dom and "nccl-tests gate 337.5 GB/s at 8G" in dom
    suspects = dom.index('id="suspects"')
    assert dom.index('id="verdict"') < suspects < dom.index('id="matrix"')
    assert "gpu-b ⚠ suspect" in dom
    assert "data corruption" in dom  # the likely cause of the #wrong > 0 failure
    assert "tokens/s per GPU" in dom and "scaling efficiency" in dom
    assert (
        "580.159.04" in dom and "2 x NVIDIA H200" in dom and "2.28.9" in dom and "VBIOS 96.00.AF.00.01" in dom
    )


@pytest.mark.parametrize(
    ("reason", "cause"),
    [
        ("timeout after 60s on h1; killed on the host", "hang or a straggler"),
        ("no result came back from h2: host h2 unreachable", "unreachable over SSH"),
        ("nccl_tests all_reduce 8G: busbw 120.00 GB/s below the required 337.50 GB/s", "degraded link"),
        ("busbw_gbps.all_reduce.8589934592=120 below the minimum 315", "degraded link"),
        ("wrong elements in 3 of 5 rows (first: 1G #wrong=12)", "data corruption"),
        ("no threshold is set for this test in the profile", "profile has no gate"),
        ("tokens_per_s_per_rank_min=30000 below the minimum 55000", "slow training"),
    ],
)
def test_likely_cause_rules(reason: str, cause: str) -> None:
    from pav.reporting.causes import likely_cause

    assert cause in likely_cause({"status": "fail", "reason": reason})


def test_a_run_that_could_not_run_still_renders(tmp_path: Path) -> None:
    """No tests, no hosts, an error: the page says so; a suspect with no evidence renders too."""
    results = {"run_id": "r", "env": "sim", "verdict": "ERROR", "error": "host h1 unreachable", "tests": []}
    page = html.render(results | {"isolation": {"suspects": [{"host": "h1"}]}}, tmp_path)
    assert "<strong>ERROR</strong>" in page and "host h1 unreachable" in page and "No tests ran" in page
    assert 'id="suspects"' in page and "<svg" not in page


def test_a_real_gpu_run_renders(tmp_path: Path) -> None:
    """results.json of run 4 in docs/benchmarks.md (2x H200, bench-gpu), recorded as it came back."""
    results = json.loads((Path(__file__).parent / "fixtures" / "h200-2gpu-results.json").read_text())
    page = tmp_path / "report.html"
    page.write_text(html.render(results, tmp_path))
    dom = check_rendered(page, tmp_path, "PASS")
    for op in ("all_reduce", "all_gather", "reduce_scatter", "all_to_all", "broadcast", "send_recv"):
        assert f"{op} bus bandwidth" in dom
    assert "payload gate 315 GB/s at 8G" in dom and "stroke-dasharray" in dom
    assert "2 x NVIDIA H200" in dom and "2.28.9" in dom
