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
from dataclasses import dataclass
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest

from pav.evaluate import evaluate_launch
from pav.launch import Launch
from pav.reporting import gpu_grid, html
from pav.thresholds.profiles import load_gates
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


def test_nothing_run_has_a_styled_banner_that_says_why(tmp_path: Path) -> None:
    """Issue 64: `NOTHING RUN` as a class was two classes, neither styled (white on white), and the page
    never said why nothing ran: its banner has a class of its own with a colour, and the skip reasons."""
    skipped = [
        {"name": name, "hosts": ["box"], "status": "skipped", "reason": "no GPU"}
        for name in ("sdc_check", "gpu_burn")
    ]
    page = html.render({"run_id": "r", "env": "local", "verdict": "NOTHING RUN", "tests": skipped}, tmp_path)
    [classes] = re.findall(r'<div class="verdict ([^"]*)" id="verdict">', page)
    assert classes == "v-nothing-run"
    style = page.split("</style>")[0]
    assert re.search(r"\.v-nothing-run \{ background: #[0-9a-f]{6}; \}", style)
    assert "nothing was run:</b> every planned test was skipped: no GPU (sdc_check, gpu_burn on box)" in page
    for verdict in ("PASS", "FAIL", "ERROR", "NONE"):  # every verdict's banner has its colour
        page = html.render({"run_id": "r", "env": "local", "verdict": verdict, "tests": []}, tmp_path)
        assert (
            f".v-{verdict.lower()} {{ background: #" in page
            and f'class="verdict v-{verdict.lower()}"' in page
        )


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


PROBE_RESULTS = Path(__file__).parent / "fixtures" / "gpu-probe-results.json"
OLD_RESULTS = Path(__file__).parent / "fixtures" / "h200-2gpu-results.json"
GATE_COLUMNS = ["metric", "part", "basis", "value", "limit", "fraction", "min/max", "source", "status"]
GPU0 = "GPU 0 (00000000:1B:00.0, GPU-5d1e3f2a-1b7c-4d8e-9f00-a1b2c3d4e5f6)"
VOID = {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source", "track", "wbr"}


@dataclass
class Element:
    tag: str
    attrs: dict[str, str]
    section: str  # the id of the innermost <section> it sits in
    table: str  # the class of the innermost <table> it sits in
    row: Element | None = None  # the <tr> it sits in
    text: str = ""

    @property
    def classes(self) -> list[str]:
        return self.attrs.get("class", "").split()


class Page(HTMLParser):
    """Every element of a page with its text, host section and table: enough to check cells by class."""

    def __init__(self, text: str) -> None:
        super().__init__(convert_charrefs=True)
        self.open: list[Element] = []
        self.elements: list[Element] = []
        self.feed(text)
        self.close()

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        found = {k: v or "" for k, v in attrs}
        parent = self.open[-1] if self.open else Element("", {}, "", "")
        section = found.get("id", "") if tag == "section" else parent.section
        table = found.get("class", "") if tag == "table" else parent.table
        row = parent if parent.tag == "tr" else parent.row
        element = Element(tag, found, section, table, None if tag == "table" else row)
        self.elements.append(element)
        if tag not in VOID:
            self.open.append(element)

    def handle_endtag(self, tag: str) -> None:
        for i in range(len(self.open) - 1, -1, -1):
            if self.open[i].tag == tag:
                del self.open[i:]
                return

    def handle_data(self, data: str) -> None:
        for element in self.open:
            element.text += data

    def having(self, cls: str, section: str | None = None) -> list[Element]:
        return [e for e in self.elements if cls in e.classes and section in (None, e.section)]

    def rows(self, table: str) -> list[list[str]]:
        """The text of each cell of every row of the tables of this class."""
        out: dict[int, list[str]] = {}
        for e in self.elements:
            if e.tag in ("td", "th") and e.table == table and e.row is not None:
                out.setdefault(id(e.row), []).append(e.text.strip())
        return list(out.values())


def probe_results() -> dict[str, Any]:
    """A 4x H200 host whose GPU 2 fails its relative GEMM gate and whose pair 1 -> 3 fails both pair
    gates, and a 1-GPU host of a model with no datasheet entry (its GEMM and HBM gates are missing)."""
    return json.loads(PROBE_RESULTS.read_text())


def test_gpu_grid_marks_exactly_the_failing_gpu_and_pair(tmp_path: Path) -> None:
    page = Page(html.render(probe_results(), tmp_path))
    assert len(page.having("gpu-row", "gpus-gpu-a")) == 4
    assert len(page.having("gpu-row", "gpus-gpu-b")) == 1
    failing = {(e.attrs["data-metric"], e.table) for e in page.having("gate-fail")}
    assert failing == {("gemm_bf16_tflops.2", "gpu-grid"), ("p2p_gbps.1.3", "p2p")}
    cells = {e.attrs["data-metric"]: e for e in page.having("gate-cell", "gpus-gpu-a")}
    assert len(cells) == 4 * 4 + 4 * 3  # the grid, and every pair but the diagonal
    assert len([e for e in page.elements if "diag" in e.classes and e.section == "gpus-gpu-a"]) == 4
    gemm, pair = cells["gemm_bf16_tflops.2"], cells["p2p_gbps.1.3"]
    assert gemm.text.startswith("690.4")
    assert "min 703.1 = 0.9 x 781.2 (best GPU of the host: GPU 0 781.2)" in gemm.attrs["title"]
    assert "absolute" not in gemm.attrs["title"]  # its absolute gate passes: only the failing one is named
    assert "absolute: min 270 = 0.6 x 450 (18 NVLink4 links up to NVSwitch x 25 GB/s)" in pair.attrs["title"]
    assert "relative: min 303.6 = 0.8 x 379.5" in pair.attrs["title"]
    assert "background: #" in pair.attrs["style"] and "gate-pass" in cells["p2p_gbps.0.1"].classes
    assert "best pair" in " ".join(e.text for e in page.having("heat-legend"))


def test_one_gpu_host_missing_facts_and_gates_table(tmp_path: Path) -> None:
    page = Page(html.render(probe_results(), tmp_path))
    one = {e.attrs["data-metric"]: e.classes for e in page.having("gate-cell", "gpus-gpu-b")}
    assert "gate-none" in one["gemm_bf16_tflops.0"] and "gate-pass" in one["h2d_gbps.0"]
    assert [e.text for e in page.having("pairs-note", "gpus-gpu-b")] == ["pairs: not applicable (1 GPU)"]
    assert not [
        e for e in page.elements if e.tag == "table" and e.section == "gpus-gpu-b" and "p2p" in e.classes
    ]
    [box] = page.having("gates-missing")
    assert box.section == "gpus-gpu-b"
    assert "GPU model 'NVIDIA RTX PRO 6000 Blackwell Server Edition' has no entry in" in box.text
    header = [e for e in page.elements if e.tag == "a" and e.attrs.get("href") == "#gpus"]
    assert header, "the header points at the hosts that lack facts"
    tables = [e for e in page.elements if e.tag == "details" and "gates" in e.classes]
    titles = [t.text.split(":")[0].strip() for t in tables]
    assert titles == [
        "Gates of gpu_probe on gpu-a",
        "Gates of gpu_probe on gpu-b",
        "Gates of torch_nccl_allreduce on gpu-a",
    ]
    assert "3 failing" in tables[0].text and "open" in tables[0].attrs and "open" not in tables[1].attrs
    rows = page.rows("gates-table")
    assert rows[0] == GATE_COLUMNS
    gemm = [r for r in rows if r[:3] == ["gemm_bf16_tflops.0", GPU0, "absolute"]]
    source = "NVIDIA H200: 989.4 TFLOP/s dense bf16 (thresholds/hardware/gpus.yml)"
    assert gemm == [
        ["gemm_bf16_tflops.0", GPU0, "absolute", "781.2", "989.4", "0.65", "min 643.1", source, "pass"]
    ]
    failing = [r for r in rows if r[-1] == "fail"]
    assert [r[0] for r in failing] == [
        "p2p_gbps.1.3",
        "gemm_bf16_tflops.2",
        "p2p_gbps.1.3",
    ]  # first in its table
    # a profile's gate beside the derived ones computes nothing: "-" where it has no figure
    assert ["wrong_total", "-", "-", "-", "-", "-", "max 0", "-", "-"] in rows
    assert not [r for r in rows if r[0] in ("loss_ratio", "tokens_per_s_total")]  # train_gpu_single: no table


def test_older_results_render_without_the_gpu_section(tmp_path: Path) -> None:
    """No gpu_probe, no derived gates, `gates` absent or empty: the page is the one it always was."""
    old = json.loads(OLD_RESULTS.read_text())
    page = html.render(old, tmp_path)
    assert page == html.render(old | {"gates": {}}, tmp_path)
    for new in ('id="gpus"', "gate-cell", "gates-missing", "gpu-grid", "gates-table", "heat-legend"):
        assert new not in page


def test_gpu_section_escapes_what_results_json_says(tmp_path: Path) -> None:
    results = probe_results()
    probe = results["tests"][0]
    probe["metrics"]["gpu"]["0"]["pci_bus_id"] = "<script>alert(1)</script>"
    probe["threshold"]["gates"][1]["source"] = '"><img src=x onerror=alert(2)>'
    results["gates"]["gpu-b"]["missing"] = ["<b>bold</b> & co"]
    page = html.render(results, tmp_path)
    assert "<script" not in page and "<img" not in page and "<b>bold" not in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page and "&lt;b&gt;bold&lt;/b&gt; &amp; co" in page
    assert "&#34;&gt;&lt;img src=x onerror=alert(2)&gt;" in page


def test_cell_states_from_gate_statuses() -> None:
    """Worst status wins; "not measured" is its own state; a profile gate (no status) colours nothing."""
    derived = {"min": 10.0, "limit": 20.0, "fraction": 0.5, "basis": "absolute", "source": "spec"}
    gates = {
        "a.0": [derived | {"status": "pass"}, derived | {"status": "fail", "basis": "relative"}],
        "a.1": [derived | {"status": "not measured"}],
        "a.2": [{"metric": "a.2", "min": 5}],
    }
    fail, unmeasured, profile = (gpu_grid.cell(m, 1.0, gates) for m in ("a.0", "a.1", "a.2"))
    assert (fail.state, fail.title) == ("fail", "fail, relative: min 10 = 0.5 x 20 (spec)")
    assert unmeasured.state == "unmeasured"
    assert (profile.state, profile.title) == ("none", "profile gate: min 5")
    assert gpu_grid.cell("a.3", None, gates).state == "none"


def test_pair_heat_scale_and_odd_metrics() -> None:
    best = gpu_grid.heat_style(400.0, 400.0)
    assert best.startswith("background: #08519c") and gpu_grid.heat_style(100.0, 400.0).startswith(
        "background: #f7fbff"
    )
    assert gpu_grid.heat_style(None, 400.0) == ""
    # GPUs named only by a count, a bool where a number belongs, pairs that are not a mapping
    metrics = {"gpu_count": 2, "gemm_bf16_tflops": {"0": True}, "p2p_gbps": []}
    host = gpu_grid.host_gpus("h", {"name": "gpu_probe", "status": "pass", "metrics": metrics}, {})
    assert [r.index for r in host.rows] == ["0", "1"] and host.rows[0].cells[0].value is None
    assert host.pairs is None and host.pairs_note == "pairs: not measured"
    assert gpu_grid.section({"tests": [], "gates": {}}) is None


def test_gpu_probe_report_renders_in_chromium(tmp_path: Path) -> None:
    page = tmp_path / "report.html"
    page.write_text(html.render(probe_results(), tmp_path))
    dom = check_rendered(page, tmp_path, "FAIL")
    rendered = Page(dom)
    assert {e.attrs["data-metric"] for e in rendered.having("gate-fail")} == {
        "gemm_bf16_tflops.2",
        "p2p_gbps.1.3",
    }
    assert "pairs: not applicable (1 GPU)" in dom and "GPUs and derived gates" in dom


def test_a_skipped_gpu_probe_adds_no_section(tmp_path: Path) -> None:
    """A host without GPUs (the local env on a CPU machine) skips gpu_probe: no GPU section for it."""
    skipped = {"name": "gpu_probe", "hosts": ["localhost"], "status": "skipped", "reason": "no GPU"}
    results = {"run_id": "r", "env": "local", "verdict": "PASS", "tests": [skipped], "gates": {}}
    assert gpu_grid.section(results) is None
    assert 'id="gpus"' not in html.render(results, tmp_path)
