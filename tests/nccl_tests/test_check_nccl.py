"""check-nccl run in-process through argparse: tables, the stable JSON, exit codes, one-line errors."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest

from pav import paths
from pav.commands.check_nccl import add_arguments, run

FIXTURES = Path(__file__).resolve().parent / "fixtures"
H100 = str(FIXTURES / "oci_h100_2node_all_reduce_perf.txt")
A100 = str(FIXTURES / "oci_a100_1node_all_reduce_perf.txt")
WRONG = str(FIXTURES / "olivia_gh200_wrong_all_reduce_perf.txt")
REPORT = str(FIXTURES / "synthetic_h100_2node_all_reduce_perf.json")
# -J reports of one process driving 2 GPUs of one host (all_reduce_perf -g 2 -J FILE.json). A report recorded
# on a GPU machine joins as one more line: pytest.param("real_h100_g2_all_reduce_perf.json", id="real-h100").
G2_REPORTS = [
    pytest.param("synthetic_h200_g2_all_reduce_perf.json", id="synthetic-h200"),
    pytest.param("real_h100_g2_all_reduce_perf.json", id="real-h100"),
]
RECORD_KEYS = {"file", "op", "status", "reason", "rows", "avg_busbw_gbps", "busbw_applicable", "devices"}
ROW_KEYS = {"size_bytes", "count", "type", "wrong", "out_of_place", "in_place"}
PLACEMENT_KEYS = {"time_us", "algbw_gbps", "busbw_gbps"}
DEVICE_KEYS = {"rank", "host", "device", "name"}


def check(*argv: str) -> int:
    parser = argparse.ArgumentParser(prog="check-nccl")
    add_arguments(parser)
    return run(parser.parse_args(list(argv)))


def test_all_pass_exits_0_with_a_table(capsys: pytest.CaptureFixture[str]) -> None:
    assert check(H100, REPORT) == 0
    out = capsys.readouterr().out
    assert out.count("all_reduce, 16 ranks on 2 hosts: PASS") == 2
    assert "       8G  float    sum        463.90     463.89        0" in out
    assert "avg busbw 458.452 GB/s" in out


def test_any_fail_exits_1(capsys: pytest.CaptureFixture[str]) -> None:
    assert check(H100, WRONG) == 1
    out = capsys.readouterr().out
    assert "all_reduce, 16 ranks on 4 hosts: FAIL" in out and "wrong elements in 6 of 28 rows" in out


def test_json_is_the_stable_schema(capsys: pytest.CaptureFixture[str]) -> None:
    assert check("--json", H100, WRONG) == 1
    records = json.loads(capsys.readouterr().out)
    assert [r["status"] for r in records] == ["pass", "fail"]
    for rec in records:
        assert set(rec) == RECORD_KEYS
        assert all(set(row) == ROW_KEYS for row in rec["rows"])
        assert all(set(row["out_of_place"]) == PLACEMENT_KEYS for row in rec["rows"])
        assert all(set(dev) == DEVICE_KEYS for dev in rec["devices"])
    first = records[0]
    assert (first["file"], first["op"], first["avg_busbw_gbps"]) == (H100, "all_reduce", 458.452)
    assert first["rows"][3] == {
        "size_bytes": 8589934592,
        "count": 2147483648,
        "type": "float",
        "wrong": 0,
        "out_of_place": {"time_us": 34719.0, "algbw_gbps": 247.41, "busbw_gbps": 463.90},
        "in_place": {"time_us": 34720.0, "algbw_gbps": 247.41, "busbw_gbps": 463.89},
    }
    assert first["devices"][8] == {
        "rank": 8,
        "host": "instance-20240722-0955",
        "device": 0,
        "name": "NVIDIA H100 80GB HBM3",
    }
    assert records[1]["rows"][21]["wrong"] == 18134 + 9609


def test_old_layout_rows_have_no_wrong_count(capsys: pytest.CaptureFixture[str]) -> None:
    assert check("--json", str(FIXTURES / "coreweave_a100_all_reduce_perf.txt")) == 0
    (rec,) = json.loads(capsys.readouterr().out)
    assert {row["wrong"] for row in rec["rows"]} == {None}


def test_unreadable_file_exits_2_with_one_error_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    missing = tmp_path / "nope.log"
    assert check(H100, str(missing)) == 2
    out, err = capsys.readouterr()
    assert "Traceback" not in out + err
    assert err.splitlines() == [f"error: cannot read {missing}: No such file or directory; check the path"]
    assert "PASS" in out  # the readable log is still graded


def test_unreadable_file_in_json_is_an_error_record(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert check("--json", str(tmp_path), H100) == 2  # a directory
    out, err = capsys.readouterr()
    records = json.loads(out)
    assert records[0]["status"] == "error" and "Is a directory" in records[0]["reason"]
    assert set(records[0]) == RECORD_KEYS and records[0]["rows"] == []
    assert records[1]["status"] == "pass"
    assert len(err.splitlines()) == 1 and err.startswith("error: ")


def test_profile_gates(capsys: pytest.CaptureFixture[str]) -> None:
    assert check("--profile", "h100-sxm-8gpu", H100) == 0
    assert "all_reduce 8G: busbw 463.90 >= 337.50 GB/s" in capsys.readouterr().out
    # That A100 run measured 10G only: the 8G gate is not met silently, it fails as not measured.
    assert check("--profile", "h100-sxm-8gpu", A100) == 1
    assert "all_reduce 8G: not measured" in capsys.readouterr().out


def test_profile_without_nccl_tests_grades_correctness_only(capsys: pytest.CaptureFixture[str]) -> None:
    assert check("--profile", "cpu", A100) == 0
    assert "PASS" in capsys.readouterr().out


def test_unknown_profile_exits_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert check("--profile", "nope", H100) == 2
    out, err = capsys.readouterr()
    assert out == ""
    [line] = err.splitlines()
    assert line == f"error: unknown threshold profile 'nope'; known: auto, {_known_profiles()}; fix --profile"


def test_profile_auto_picks_by_the_gpus_the_log_names(capsys: pytest.CaptureFixture[str]) -> None:
    assert check("--profile", "auto", H100) == 0  # 2 hosts x 8 "NVIDIA H100 80GB HBM3"
    out = capsys.readouterr().out
    assert f"{H100}: profile auto picked h100-sxm-8gpu" in out
    assert "all_reduce 8G: busbw 463.90 >= 337.50 GB/s" in out


def test_profile_auto_without_device_lines_says_to_name_one(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bare = tmp_path / "no_devices.txt"
    lines = Path(H100).read_text().splitlines(keepends=True)
    bare.write_text("".join(ln for ln in lines if " device " not in ln))
    assert check("--profile", "auto", str(bare)) == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert err.splitlines() == [
        f"error: {bare}: --profile auto picks by the GPUs a log names, and this one names none; "
        f"give the profile instead (known: {_known_profiles()})"
    ]


def test_bad_profile_section_exits_2(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "bad.yml").write_text("profile: bad\nnccl_tests:\n  all_reduce:\n    - size: 8G\n")
    monkeypatch.setattr(paths, "THRESHOLDS", tmp_path)
    assert check("--profile", "bad", H100) == 2
    err = capsys.readouterr().err
    assert err.splitlines() == [
        f"error: {tmp_path / 'bad.yml'}: each gate of nccl_tests.all_reduce needs 'size' and 'min_busbw_gbps'"
    ]


def _known_profiles() -> str:
    return ", ".join(sorted(p.stem for p in paths.THRESHOLDS.glob("*.yml")))


def test_one_rank_has_no_bus_bandwidth(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # The real 8-rank A100 log cut down to its first rank: nccl-tests prints a copy-to-itself busbw there.
    real = (FIXTURES / "oci_a100_1node_all_reduce_perf.txt").read_text().splitlines()
    one = [ln for ln in real if "Rank" not in ln or "Rank  0 " in ln]
    log = tmp_path / "one_rank.txt"
    log.write_text("\n".join(one) + "\n")
    assert check(str(log), "--json") == 0
    [rec] = json.loads(capsys.readouterr().out)
    assert rec["busbw_applicable"] is False and rec["avg_busbw_gbps"] is None
    assert rec["rows"][0]["out_of_place"]["busbw_gbps"] is None
    assert rec["rows"][0]["out_of_place"]["algbw_gbps"] == 132.69


@pytest.mark.parametrize("name", G2_REPORTS)
def test_one_process_driving_two_gpus_has_bus_bandwidth(
    name: str, capsys: pytest.CaptureFixture[str]
) -> None:
    # -J names only the process's first GPU; its config's nthreads x ngpus says the process drove 2 ranks.
    path = str(FIXTURES / name)
    assert check(path, "--json") == 0
    [rec] = json.loads(capsys.readouterr().out)
    assert rec["status"] == "pass" and rec["busbw_applicable"] is True
    assert rec["avg_busbw_gbps"] is not None and rec["avg_busbw_gbps"] > 0
    first, second = rec["devices"]  # one process: its ranks sit on consecutive CUDA devices of its host
    assert (first["rank"], second["rank"], second["device"]) == (0, 1, first["device"] + 1)
    assert len({(d["host"], d["name"]) for d in rec["devices"]}) == 1
    for row in rec["rows"]:
        for placement in (row["out_of_place"], row["in_place"]):
            assert placement["busbw_gbps"] is not None and placement["busbw_gbps"] > 0
            # all_reduce's busbw is algbw x 2(n-1)/n, which is algbw itself for n = 2 ranks
            assert placement["busbw_gbps"] == pytest.approx(placement["algbw_gbps"], rel=1e-6)
    assert check(path) == 0
    assert "all_reduce, 2 ranks on 1 host: PASS" in capsys.readouterr().out


def test_one_process_driving_two_gpus_is_gated_by_its_profile(capsys: pytest.CaptureFixture[str]) -> None:
    report = str(FIXTURES / "synthetic_h200_g2_all_reduce_perf.json")
    assert check("--profile", "auto", report) == 0  # 2x "NVIDIA H200" on one host
    out = capsys.readouterr().out
    assert f"{report}: profile auto picked h200-2gpu" in out
    assert "all_reduce 8G: busbw 347.38 >= 315.00 GB/s" in out


def test_one_rank_json_report_has_no_bus_bandwidth(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    one = tmp_path / "all_reduce_perf.json"
    text = (FIXTURES / "synthetic_h200_g2_all_reduce_perf.json").read_text()
    one.write_text(text.replace('"ngpus":2,', '"ngpus":1,', 1))  # the same run with -g 1: one rank
    assert check(str(one), "--json") == 0
    [rec] = json.loads(capsys.readouterr().out)
    assert rec["busbw_applicable"] is False and rec["avg_busbw_gbps"] is None
    assert {row["out_of_place"]["busbw_gbps"] for row in rec["rows"]} == {None}
    assert len(rec["devices"]) == 1
