"""Parsing real nccl-tests outputs (fixtures/README.md names each source): old and new tables, -J JSON."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pav.errors import PavError
from pav.nccl_ops import KNOWN_OPS
from pav.nccl_tests.parse import Device, op_from_name, parse_json, parse_json_text, parse_text, read_log

FIXTURES = Path(__file__).resolve().parent / "fixtures"


def fixture(name: str) -> Path:
    return FIXTURES / name


def test_old_layout_has_redop_and_max_error_but_no_root_or_wrong() -> None:
    log = read_log(fixture("coreweave_a100_all_reduce_perf.txt"))
    assert log.format == "text"
    assert log.op == "all_reduce"  # from the file name: this output names no binary
    assert (log.min_bytes, log.max_bytes, log.step_factor, log.validation) == (4, 2147483648, 2, 1)
    assert len(log.rows) == 30 and not log.bad_lines
    first, last = log.rows[0], log.rows[-1]
    assert (first.size_bytes, first.count, first.type) == (4, 1, "float")
    assert (first.redop, first.root) == ("sum", None)
    assert first.out_of_place is not None and first.out_of_place.error == 5e-07
    assert first.out_of_place.wrong is None and first.wrong is None
    assert last.out_of_place is not None and last.in_place is not None
    assert (last.out_of_place.time_us, last.out_of_place.busbw_gbps) == (95238.0, 44.74)
    assert last.in_place.busbw_gbps == 44.72
    assert (log.oob_count, log.avg_busbw_gbps, log.finished) == (0, 13.0489, True)
    assert log.devices[0].host == "nccl-test-128-worker-0" and log.devices[0].name == "NVIDIA A100-SXM4-80GB"


def test_new_layout_has_root_and_wrong_columns() -> None:
    log = read_log(fixture("oci_h100_2node_all_reduce_perf.txt"))
    assert [r.size_bytes for r in log.rows] == [1 << 30, 2 << 30, 4 << 30, 8 << 30, 16 << 30]
    row = log.rows[3]
    assert (row.redop, row.root, row.wrong) == ("sum", -1, 0)
    assert row.out_of_place is not None and row.out_of_place.busbw_gbps == 463.90
    assert row.out_of_place.algbw_gbps == 247.41 and row.out_of_place.time_us == 34719.0
    assert len(log.devices) == 16
    assert {d.host for d in log.devices} == {"instance-20240722-0952", "instance-20240722-0955"}
    assert (log.devices[15].rank, log.devices[15].device) == (15, 7)
    assert log.avg_busbw_gbps == 458.452 and log.finished


def test_newest_header_names_the_collective_and_version() -> None:
    log = parse_text(fixture("oci_a100_1node_all_reduce_perf.txt").read_text(), "run.log")
    assert log.op == "all_reduce"  # '# Collective test starting: all_reduce_perf'
    assert (log.step_bytes, log.step_factor) == (1048576, None)
    wrong = read_log(fixture("olivia_gh200_wrong_all_reduce_perf.txt"))
    assert wrong.tests_version == "2.17.9"


def test_alltoall_none_redop_and_na_in_place_wrong() -> None:
    # The binary's name comes from the command line captured above the table.
    log = parse_text(fixture("issue287_rtx5090_alltoall_perf.txt").read_text(), "capture.log")
    assert log.op == "alltoall"
    (row,) = log.rows
    assert (row.redop, row.root) == ("none", -1)
    assert row.out_of_place is not None and row.out_of_place.wrong == 0
    assert row.in_place is not None and row.in_place.wrong is None  # N/A: alltoall has no in-place check
    assert row.in_place.algbw_gbps == 43046.10  # wider than its column, still one token
    assert row.wrong == 0


def test_wrong_counts_in_g_notation() -> None:
    log = read_log(fixture("rtx3090_inc_oob_failed_all_reduce_perf.txt"))
    assert len(log.rows) == 27 and not log.bad_lines
    assert log.rows[0].wrong == 8
    last = log.rows[-1].out_of_place
    assert last is not None and last.wrong == 268435000  # printed as 2.68435e+08
    assert log.oob_count == 108


def test_json_report_reads_like_the_same_runs_table() -> None:
    text_log = read_log(fixture("oci_h100_2node_all_reduce_perf.txt"))
    json_log = read_log(fixture("synthetic_h100_2node_all_reduce_perf.json"))
    assert json_log.format == "json"
    assert json_log.op == "all_reduce"  # from args[0]
    assert json_log.rows == text_log.rows
    assert [(d.rank, d.host, d.device, d.name) for d in json_log.devices] == [
        (d.rank, d.host, d.device, d.name) for d in text_log.devices
    ]
    assert (json_log.oob_count, json_log.avg_busbw_gbps, json_log.finished) == (0, 458.452, True)
    assert json_log.avg_busbw_check is None  # "unchecked"
    assert json_log.nccl_errors == []  # nccl-tests writes [""] after a clean run
    assert (json_log.min_bytes, json_log.max_bytes, json_log.step_factor) == (1 << 30, 16 << 30, 2)
    assert json_log.ranks == text_log.ranks == 16  # 16 processes of 1 thread x 1 GPU (-g 1)
    for log in (json_log, text_log):
        assert (log.threads, log.gpus_per_thread) == (1, 1)


def test_json_of_one_process_driving_two_gpus_reads_like_its_table() -> None:
    # -g 2: the report's `devices` names the process's first GPU only; the table names both.
    text_log = read_log(fixture("synthetic_h200_g2_all_reduce_perf.txt"))
    json_log = read_log(fixture("synthetic_h200_g2_all_reduce_perf.json"))
    for log in (json_log, text_log):
        assert (log.threads, log.gpus_per_thread) == (1, 2)
    assert json_log.ranks == text_log.ranks == 2
    both = [Device(0, "h200-node-01", 0, "NVIDIA H200"), Device(1, "h200-node-01", 1, "NVIDIA H200")]
    assert json_log.devices == text_log.devices == both
    # The JSON keeps %lf's six decimals, the table two (or fewer for wide values).
    assert len(json_log.rows) == len(text_log.rows) == 5
    for got, printed in zip(json_log.rows, text_log.rows, strict=True):
        assert (got.size_bytes, got.count, got.type, got.redop, got.root, got.wrong) == (
            printed.size_bytes, printed.count, printed.type, printed.redop, printed.root, printed.wrong
        )  # fmt: skip
        for mine, theirs in ((got.out_of_place, printed.out_of_place), (got.in_place, printed.in_place)):
            assert mine is not None and theirs is not None
            assert mine.busbw_gbps == pytest.approx(theirs.busbw_gbps, abs=0.005)
            assert mine.time_us == pytest.approx(theirs.time_us, abs=0.05)
    assert json_log.avg_busbw_gbps == pytest.approx(text_log.avg_busbw_gbps, abs=5e-4)


def _g2_report(**config: int) -> str:
    text = fixture("synthetic_h200_g2_all_reduce_perf.json").read_text()
    for key, value in config.items():
        text = text.replace(f'"{key}":{"1" if key == "nthreads" else "2"},', f'"{key}":{value},', 1)
    return text


@pytest.mark.parametrize(
    ("config", "ranks"),
    [
        ({}, 2),  # 1 process x 1 thread x 2 GPUs
        ({"nthreads": 2, "ngpus": 1}, 2),  # -t 2 -g 1: threads are ranks too
        ({"nthreads": 2, "ngpus": 4}, 8),
        ({"ngpus": 1}, 1),  # truly one rank
    ],
)
def test_json_ranks_are_processes_times_threads_times_gpus(config: dict[str, int], ranks: int) -> None:
    log = parse_json_text(_g2_report(**config))
    assert log.ranks == ranks
    assert [(d.rank, d.device) for d in log.devices] == [(i, i) for i in range(ranks)]


def test_json_of_several_processes_each_driving_several_gpus() -> None:
    # The 2-node H100 run as 2 processes (one per host) of -g 8: the report names ranks 0 and 8 only.
    data = json.loads(fixture("synthetic_h100_2node_all_reduce_perf.json").read_text())
    data["config"]["ngpus"] = 8
    data["config"]["devices"] = [d for d in data["config"]["devices"] if d["rank"] in (0, 8)]
    log = parse_json(data)
    table = read_log(fixture("oci_h100_2node_all_reduce_perf.txt"))
    assert log.ranks == 16
    assert [(d.rank, d.host, d.device, d.name) for d in log.devices] == [
        (d.rank, d.host, d.device, d.name) for d in table.devices
    ]


def test_cut_off_json_is_malformed_not_an_exception() -> None:
    text = fixture("synthetic_h100_2node_all_reduce_perf.json").read_text()
    log = parse_json_text(text[: len(text) // 2], "ar_all_reduce_perf.json")
    assert log.malformed.startswith("the -J JSON is cut off")
    assert log.op == "all_reduce" and not log.rows


def test_json_nulls_and_nan_strings() -> None:
    text = fixture("synthetic_h100_2node_all_reduce_perf.json").read_text()
    text = text.replace('"out_of_place":{"time":4511.200000,"alg_bw":238.020000,"bus_bw":446.280000,', "", 1)
    text = text.replace('"nwrong":0.000000},"in_place"', '"out_of_place":null,"in_place"', 1)
    text = text.replace('"bus_bw":456.120000', '"bus_bw":"nan"', 1)
    log = parse_json_text(text)
    assert log.rows[0].out_of_place is None and log.rows[0].in_place is not None
    assert log.rows[1].in_place is not None and log.rows[1].in_place.busbw_gbps is None


def test_mpirun_tagged_output_parses_the_same() -> None:
    plain = fixture("oci_h100_2node_all_reduce_perf.txt").read_text()
    tagged = "".join(f"[1,0]<stdout>:{line}\n" for line in plain.splitlines())
    assert parse_text(tagged).rows == parse_text(plain).rows


def test_garbled_row_is_kept_as_bad_line() -> None:
    text = fixture("oci_h100_2node_all_reduce_perf.txt").read_text()
    # NCCL's INFO output landed in the middle of a row.
    text = text.replace(
        "  2147483648     536870912     float     sum      -1   8825.9",
        "  2147483648     536870912     float     sum      -1host:1:1 [0] NCCL INFO Channel 00",
    )
    log = parse_text(text)
    assert len(log.rows) == 4
    assert len(log.bad_lines) == 1 and log.bad_lines[0].startswith("2147483648")


def test_nan_values_read_as_missing() -> None:
    text = fixture("oci_h100_2node_all_reduce_perf.txt").read_text().replace("446.28", "  -nan")
    row = parse_text(text).rows[0]
    assert row.out_of_place is not None and row.out_of_place.busbw_gbps is None


def test_fragment_without_header_still_yields_rows_and_crash() -> None:
    log = read_log(fixture("issue322_crash_fragment.txt"))
    assert len(log.rows) == 5 and log.rows[-1].size_bytes == 16 << 30
    assert log.crash_lines[0].startswith("HCA-128: Test NCCL failure common.cu:1204")
    assert log.op is None and not log.finished


def test_lines_after_the_trailer_are_not_rows() -> None:
    mpi_note = "2 more processes have sent help message help-mpi-btl-openib.txt\n"
    text = fixture("oci_a100_1node_all_reduce_perf.txt").read_text() + mpi_note
    log = parse_text(text)
    assert len(log.rows) == 1 and not log.bad_lines


@pytest.mark.parametrize(
    ("name", "op"),
    [
        ("all_reduce_perf", "all_reduce"),
        ("/opt/nccl-tests/build/reduce_perf", "reduce"),
        ("all_reduce_perf_mpi", "all_reduce"),
        ("nccl_alltoall_perf", "alltoall"),
        ("logs/host1-reduce_scatter_perf.log", "reduce_scatter"),
        ("alltoallv_perf", "alltoallv"),
        ("results.log", None),
    ],
)
def test_op_from_name(name: str, op: str | None) -> None:
    assert op_from_name(name) == op


def test_every_collective_a_profile_may_gate_is_named_by_its_binary() -> None:
    """nccl_ops' order matters: reduce must not win over all_reduce, nor scatter over reduce_scatter."""
    assert {op: op_from_name(f"nccl_{op}_perf_mpi") for op in KNOWN_OPS} == {op: op for op in KNOWN_OPS}


def test_unreadable_file_is_a_pav_error(tmp_path: Path) -> None:
    with pytest.raises(PavError, match="cannot read"):
        read_log(tmp_path / "missing.log")
