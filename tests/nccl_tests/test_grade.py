"""Grading: correctness on every log, bandwidth gates where a profile sets them; no silent passes."""

from __future__ import annotations

from pathlib import Path

import pytest

from pav.errors import PavError
from pav.nccl_tests.grade import grade
from pav.nccl_tests.parse import parse_json_text, parse_text, read_log
from pav.thresholds.gate import Gate
from pav.thresholds.profiles import parse_nccl_gates as parse_gates
from pav.units import parse_size, size_label

FIXTURES = Path(__file__).resolve().parent / "fixtures"
H100 = FIXTURES / "oci_h100_2node_all_reduce_perf.txt"
GIB = 1 << 30


def text_of(name: str) -> str:
    return (FIXTURES / name).read_text()


@pytest.mark.parametrize(
    "name",
    [
        "coreweave_a100_all_reduce_perf.txt",
        "oci_h100_2node_all_reduce_perf.txt",
        "oci_a100_1node_all_reduce_perf.txt",
        "issue287_rtx5090_alltoall_perf.txt",
        "synthetic_h100_2node_all_reduce_perf.json",
    ],
)
def test_clean_runs_pass(name: str) -> None:
    result = grade(read_log(FIXTURES / name))
    assert result.status == "pass", result.reason


def test_old_layout_pass_says_what_was_checked() -> None:
    result = grade(read_log(FIXTURES / "coreweave_a100_all_reduce_perf.txt"))
    assert result.reason == "30 rows, out-of-bounds check OK"


def test_wrong_elements_fail() -> None:
    result = grade(read_log(FIXTURES / "olivia_gh200_wrong_all_reduce_perf.txt"))
    assert result.status == "fail"
    assert "wrong elements in 6 of 28 rows (first: 2M #wrong=27743)" in result.reason
    # That document shows the table without its trailer; the cut is reported too.
    assert "without the '# Avg bus bandwidth' trailer" in result.reason


def test_out_of_bounds_failed_fails() -> None:
    result = grade(read_log(FIXTURES / "rtx3090_inc_oob_failed_all_reduce_perf.txt"))
    assert result.status == "fail"
    assert "out-of-bounds values: 108 FAILED" in result.reason


def test_out_of_bounds_alone_fails_the_old_layout() -> None:
    text = text_of("coreweave_a100_all_reduce_perf.txt").replace("values : 0 OK", "values : 3 FAILED")
    result = grade(parse_text(text, "all_reduce_perf.log"))
    assert (result.status, result.reason) == ("fail", "out-of-bounds values: 3 FAILED")


def test_crash_after_the_table_fails() -> None:
    result = grade(read_log(FIXTURES / "issue322_crash_fragment.txt"))
    assert result.status == "fail"
    assert result.reason.startswith(
        "crashed: HCA-128: Test NCCL failure common.cu:1204 'unhandled cuda error"
    )
    assert "(+8 more)" in result.reason


def test_truncated_table_fails_naming_the_last_row() -> None:
    text = text_of("oci_h100_2node_all_reduce_perf.txt")
    cut = text[: text.index("  8589934592")]
    result = grade(parse_text(cut, "all_reduce_perf.log"))
    assert result.status == "fail"
    assert "output ends after 3 rows (last 4G) without the '# Avg bus bandwidth' trailer" in result.reason


def test_segfault_before_any_row_fails() -> None:
    text = text_of("oci_h100_2node_all_reduce_perf.txt")
    header_only = text[: text.index("  1073741824")] + "Segmentation fault (core dumped)\n"
    result = grade(parse_text(header_only))
    assert result.status == "fail"
    assert result.reason.startswith("crashed: Segmentation fault (core dumped)")
    assert "no result rows and no '# Avg bus bandwidth' trailer" in result.reason


def test_empty_log_fails() -> None:
    result = grade(parse_text(""))
    assert result.status == "fail" and "no result rows" in result.reason


def test_missing_row_inside_a_finished_table_fails() -> None:
    lines = text_of("oci_h100_2node_all_reduce_perf.txt").splitlines(keepends=True)
    text = "".join(line for line in lines if not line.startswith("  4294967296"))
    result = grade(parse_text(text))
    assert result.status == "fail"
    assert "missing rows: a 1G..16G sweep has 5 sizes, the float/sum table has 4" in result.reason


def test_sweep_ending_below_max_bytes_is_complete() -> None:
    # minBytes 8, maxBytes 1000000000, factor 2: the last size is 512M; nothing is missing.
    log = read_log(FIXTURES / "rtx3090_inc_oob_failed_all_reduce_perf.txt")
    assert "missing rows" not in grade(log).reason


def test_two_headers_in_one_log_fail() -> None:
    text = text_of("oci_a100_1node_all_reduce_perf.txt")
    result = grade(parse_text(text + text))
    assert result.status == "fail"
    assert "2 test headers in one log" in result.reason and "MPI=1" in result.reason


def test_validation_off_fails() -> None:
    text = text_of("oci_h100_2node_all_reduce_perf.txt").replace("validation: 1", "validation: 0")
    result = grade(parse_text(text))
    assert result.status == "fail" and "validation: 0" in result.reason


def test_nccl_tests_own_min_bw_check() -> None:
    text = text_of("oci_h100_2node_all_reduce_perf.txt").replace("458.452 ", "458.452 FAILED")
    result = grade(parse_text(text))
    assert result.status == "fail" and "NCCL_TESTS_MIN_BW check FAILED" in result.reason


def test_cut_off_json_fails() -> None:
    path = FIXTURES / "synthetic_h100_2node_all_reduce_perf.json"
    result = grade(parse_json_text(path.read_text()[:3000], "all_reduce_perf.json"))
    assert result.status == "fail" and result.reason.startswith("the -J JSON is cut off")


def test_gate_pass_names_measured_and_required() -> None:
    result = grade(read_log(H100), {"all_reduce": [Gate.busbw(8 * GIB, 337.5)]})
    assert result.status == "pass"
    assert "all_reduce 8G: busbw 463.90 >= 337.50 GB/s" in result.reason


def test_gate_fail_names_measured_and_required() -> None:
    result = grade(read_log(H100), {"all_reduce": [Gate.busbw(8 * GIB, 480.0)]})
    assert (result.status, result.reason) == (
        "fail",
        "all_reduce 8G: busbw 463.90 GB/s below the required 480.00 GB/s",
    )


def test_gate_for_a_size_not_in_the_log_is_not_measured() -> None:
    result = grade(read_log(H100), {"all_reduce": [Gate.busbw(32 * GIB, 100.0)]})
    assert result.status == "fail"
    assert "all_reduce 32G: not measured (the log's sizes: 1G..16G)" in result.reason


def test_gates_for_other_collectives_leave_correctness_only() -> None:
    result = grade(
        read_log(FIXTURES / "issue287_rtx5090_alltoall_perf.txt"), {"all_reduce": [Gate.busbw(8 * GIB, 1.0)]}
    )
    assert result.status == "pass"


def test_gates_need_to_know_the_collective() -> None:
    log = parse_text(H100.read_text(), "run.log")
    result = grade(log, {"all_reduce": [Gate.busbw(8 * GIB, 1.0)]})
    assert result.status == "fail" and "cannot tell which collective" in result.reason


def test_gate_matches_a_size_rounded_to_whole_elements() -> None:
    # 24 ranks: nccl-tests rounds 8G down to a multiple of 24 floats.
    text = H100.read_text().replace("  8589934592     2147483648", "  8589934560     2147483640")
    result = grade(parse_text(text, "all_reduce_perf.log"), {"all_reduce": [Gate.busbw(8 * GIB, 337.5)]})
    assert result.status == "pass", result.reason


def test_gate_uses_the_worst_row_of_a_size() -> None:
    text = H100.read_text()
    doubled = text.replace(
        "# Out of bounds values",
        "  8589934592    2147483648     float     sum      -1   34719  247.41  300.00      0"
        "    34720  247.41  463.89      0\n# Out of bounds values",
    )
    log = parse_text(doubled, "all_reduce_perf.log")
    result = grade(log, {"all_reduce": [Gate.busbw(8 * GIB, 337.5)]})
    assert "busbw 300.00 GB/s below the required 337.50 GB/s" in result.reason


@pytest.mark.parametrize(
    ("value", "size"),
    [("8G", 8 * GIB), ("8g", 8 * GIB), ("512M", 512 << 20), ("1.5K", 1536), (1024, 1024), ("4096", 4096)],
)
def test_parse_size(value: object, size: int) -> None:
    assert parse_size(value) == size


@pytest.mark.parametrize("value", ["8GB", "eight", "", True, "-1G"])
def test_parse_size_rejects(value: object) -> None:
    with pytest.raises(ValueError):
        parse_size(value)


def test_size_label() -> None:
    assert [size_label(n) for n in (8 * GIB, 512 << 20, 1536, 4)] == ["8G", "512M", "1536B", "4B"]


def test_parse_gates() -> None:
    gates = parse_gates({"all_reduce": [{"size": "8G", "min_busbw_gbps": 300, "why": "x"}]}, "p.yml")
    assert gates == {"all_reduce": [Gate.busbw(8 * GIB, 300.0, "x")]}
    assert parse_gates(None, "p.yml") == {}


@pytest.mark.parametrize(
    ("raw", "needle"),
    [
        ({"allreduce": []}, "unknown collective 'allreduce'"),
        ({"all_reduce": {"size": "8G"}}, "must be a list"),
        ({"all_reduce": [{"size": "8G"}]}, "needs 'size' and 'min_busbw_gbps'"),
        ({"all_reduce": [{"size": "8G", "min_busbw": 1, "min_busbw_gbps": 1}]}, "unknown key(s) min_busbw"),
        ({"all_reduce": [{"size": "lots", "min_busbw_gbps": 1}]}, "'lots' is not a size"),
        ([1, 2], "must map collectives"),
    ],
)
def test_parse_gates_errors_name_the_file_and_fix(raw: object, needle: str) -> None:
    with pytest.raises(PavError) as info:
        parse_gates(raw, "thresholds/x.yml")
    assert str(info.value).startswith("thresholds/x.yml: ") and needle in str(info.value)
