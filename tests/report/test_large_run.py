"""Readable at 64 hosts x 8 GPUs (issue 65): the summary of a 64-host run fits a screen, names the bad GPU
and the slow node first, and says "64 hosts sim-x-[0-63]" where it listed every host; report.html's GPU
grid shows all 512 GPUs with the bad one marked and first. The run: tests/report/large_run.py, synthesised
from real runs' records."""

from __future__ import annotations

from pav.reporting import summary
from tests.report import large_run
from tests.report.large_run import BAD_GPU, BAD_HOST, SLOW_HOST


def test_a_64_host_summary_fits_60_lines_of_120_columns() -> None:
    lines = summary.render(large_run.run()).splitlines()
    assert len(lines) <= 60, "\n".join(lines)
    assert max(len(line) for line in lines) <= summary.WIDTH == 120
    # The bad GPU and the slow node lead: the first bad part, then the node.
    assert lines[1].startswith("bad parts")
    assert lines[2].startswith(f"  {BAD_HOST} GPU {BAD_GPU} (") and "277.1 TFLOP/s" in lines[2]
    assert any(line.startswith(f"  {SLOW_HOST}:") for line in lines[3:10])


def test_hosts_alike_are_one_row_named_as_a_range() -> None:
    text = summary.render(large_run.run())
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


def test_failing_tests_come_before_passing_ones() -> None:
    lines = summary.render(large_run.run()).splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("test  "))
    table = lines[start : lines.index("", start)]
    column = table[0].index("status")
    statuses = [row[column:].split()[0] for row in table[1:] if not row.startswith(" ")]  # not a folded rest
    assert statuses == ["fail"] * 4 + ["pass"] * 5
