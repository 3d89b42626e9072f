"""Readable at 64 hosts x 8 GPUs (issue 65): the summary of a 64-host run fits a screen, names the bad GPU
and the slow node first, and says "64 hosts sim-x-[0-63]" where it listed every host; report.html's GPU
grid shows all 512 GPUs with the bad one marked and first. The run: tests/report/large_run.py, synthesised
from real runs' records."""

from __future__ import annotations

import re

import pytest

from pav.reporting import html, summary
from tests.report import large_run
from tests.report.large_run import BAD_GPU, BAD_HOST, SLOW_HOST

# Each 64-host run is built and rendered once for the module (rendering reads it, never changes it): ~0.8
# CPU-s a render, once per test before (docs/benchmarks.md, session 30).


@pytest.fixture(scope="module")
def text() -> str:
    return summary.render(large_run.run())


@pytest.fixture(scope="module")
def page(tmp_path_factory: pytest.TempPathFactory) -> str:
    return html.render(large_run.run().to_dict(), tmp_path_factory.mktemp("large"))


@pytest.fixture(scope="module")
def healthy_page(tmp_path_factory: pytest.TempPathFactory) -> str:
    return html.render(large_run.healthy_run().to_dict(), tmp_path_factory.mktemp("healthy"))


def test_a_64_host_summary_fits_60_lines_of_120_columns(text: str) -> None:
    lines = text.splitlines()
    assert len(lines) <= 60, "\n".join(lines)
    assert max(len(line) for line in lines) <= summary.WIDTH == 120
    # The bad GPU and the slow node lead: the first bad part, then the node.
    assert lines[1].startswith("bad parts")
    assert lines[2].startswith(f"  {BAD_HOST} GPU {BAD_GPU} (") and "277.1 TFLOP/s" in lines[2]
    assert any(line.startswith(f"  {SLOW_HOST}:") for line in lines[3:10])


def test_hosts_alike_are_one_row_named_as_a_range(text: str) -> None:
    lines = text.splitlines()
    assert (
        "64 hosts sim-x-[0-63]  ok      8"
        in lines[lines.index("hosts                  status  gpus  tuning") + 1]
    )
    # No wall of names: never two host names joined, and never sim-x-10 before sim-x-2.
    assert "sim-x-0," not in text and "sim-x-1, " not in text
    rows = [line.split() for line in lines if line.startswith(("gpu_probe ", "torch_nccl_allreduce "))]
    assert rows == [
        ["torch_nccl_allreduce", SLOW_HOST, "fail", "host:", *rows[0][4:]],
        ["gpu_probe", BAD_HOST, "fail", "GPU", *rows[1][4:]],
        ["gpu_probe", "63", "hosts", "sim-x-[0-36,38-63]", "pass"],
        ["torch_nccl_allreduce", "63", "hosts", "sim-x-[0-11,13-63]", "pass"],
    ]


def test_failing_tests_come_before_passing_ones(text: str) -> None:
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("test  "))
    table = lines[start : lines.index("", start)]
    column = table[0].index("status")
    statuses = [row[column:].split()[0] for row in table[1:] if not row.startswith(" ")]  # not a folded rest
    assert statuses == ["fail"] * 4 + ["pass"] * 5


def test_the_report_maps_all_512_gpus_with_the_bad_one_marked_and_first(page: str) -> None:
    """report.html's map of every GPU: 64 rows in natural order, a cell per GPU, the one red cell the slow
    GPU, named above the map with a link to its host's grid, which leads the hosts' grids; the healthy
    hosts' grids fold under one summary."""
    start = page.index('<section class="gpu-map"')
    gpu_map = page[start : page.index("</section>", start)]
    cells = re.findall(r'<td class="map-cell map-(\w+)" data-gpu="([^"]+)"', gpu_map)
    wanted = [f"{host} GPU {gpu}" for host in large_run.HOSTS for gpu in range(large_run.GPUS)]
    assert [where for _, where in cells] == wanted  # all 512, once each, sim-x-2 before sim-x-10
    assert [where for state, where in cells if state != "pass"] == [f"{BAD_HOST} GPU {BAD_GPU}"]
    assert 'Every GPU: 512 on 64 hosts, <span class="flag">1 failing</span>' in gpu_map
    [named] = re.findall(
        r'<ul class="gpu-map-failing">\s*<li><a href="#gpus-([^"]+)"><b>[^<]+</b> GPU (\d)', gpu_map
    )
    assert named == (BAD_HOST, BAD_GPU)
    grids = re.findall(r'<section class="gpu-host" id="gpus-([^"]+)"', page)
    assert grids == [BAD_HOST]
    # The healthy hosts: a row each with the lowest of each figure, after the bad host's grid.
    healthy = page[page.index('<details class="gpu-healthy">') :]
    assert page.index('<details class="gpu-healthy">') > page.index(f'id="gpus-{BAD_HOST}"')
    lows = re.findall(r'<tr id="gpus-([^"]+)"><th>\1</th><td class="num">8</td>', healthy)
    assert lows == [h for h in large_run.HOSTS if h != BAD_HOST]
    # Each host's link on the map lands on its grid or its row.
    assert {f"gpus-{h}" for h in large_run.HOSTS} <= set(re.findall(r' id="([^"]+)"', page))


# The 64 x 8 page: 6.2 MB before healthy rows folded (issue 65), 0.41 MB after (docs/results.md).
PAGE_BYTES = 600_000


def test_the_64_host_page_is_small_and_keeps_the_bad_rows_in_full(page: str) -> None:
    """Under PAGE_BYTES, with the bad GPU's and the slow node's gate rows whole (host, figure, bound,
    status), the rest of each test's gates folded, and the page naming results.json for every row."""
    assert len(page.encode()) <= PAGE_BYTES
    gates = page[page.index('<h2 id="gates">') : page.index('<h2 id="bandwidth">')]
    kept = re.findall(
        r"<tr><td>([^<]+)</td><td>([^<]+)</td><td>[^<]+</td><td>(\w+)</td><td class=\"num\">([^<]+)</td>"
        r'.*?<td class="s-fail">fail</td></tr>',
        gates,
        re.S,
    )
    assert kept == [
        (BAD_HOST, f"gemm_bf16_tflops.{BAD_GPU}", "relative", "277.1"),
        (BAD_HOST, f"gemm_bf16_tflops.{BAD_GPU}", "absolute", "277.1"),
        (SLOW_HOST, "busbw_gbps.all_reduce.8589934592", "absolute", "166.7"),
        (SLOW_HOST, "busbw_gbps.8589934592", "absolute", "166.6"),
    ]
    assert '<td>gemm_bf16_tflops.N</td><td>absolute</td><td class="num">511</td>' in gates
    assert "results.json beside this file (tests[].threshold.gates)" in gates
    assert "<script" not in page and not re.search(r'(src|href)="\w+:', page)  # nothing run, nothing fetched


def test_a_healthy_64_host_page_is_small_too(healthy_page: str) -> None:
    """With no bad host the healthy grids fold all the same: a row per host with its lowest figures, each
    host's map link landing on its row."""
    assert len(healthy_page.encode()) <= PAGE_BYTES
    assert not re.findall(r'<section class="gpu-host"', healthy_page)
    assert re.findall(r'<tr id="gpus-([^"]+)"><th>', healthy_page) == list(large_run.HOSTS)
