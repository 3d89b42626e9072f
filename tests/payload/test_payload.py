"""The payload run for real: torchrun with two CPU ranks on gloo, plus unit tests of its arithmetic."""

import json
import math
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import torch
from pav_payload.bandwidth import OPS, algbw_gbps, bus_factor
from pav_payload.cli import build_parser, main
from pav_payload.models import SIZES, ModelConfig, build_model, transformer_parameters
from pav_payload.resnet import ResNet50
from pav_payload.sizes import parse_size, parse_sizes
from pav_payload.suite_launch import DONE
from pav_payload.train import resolve_train_args

from tests.conftest import PAYLOAD

TORCHRUN = Path(sys.executable).with_name("torchrun")
NPROC = 2
TOP_LEVEL_KEYS = {
    "schema_version",
    "test_id",
    "kind",
    "rank",
    "world_size",
    "local_rank",
    "local_world_size",
    "node_rank",
    "hostname",
    "backend",
    "device",
    "device_name",
    "torch_version",
    "nccl_version",
    "status",
    "reason",
    "started",
    "ended",
    "metrics",
    "params",
}
RESULT_KEYS = {
    "op",
    "size_bytes",
    "count",
    "dtype",
    "time_us",
    "algbw_gbps",
    "busbw_gbps",
    "wrong",
    "skipped",
}

Reports = list[dict[str, Any]]


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(PAYLOAD), env.get("PYTHONPATH")]))
    env["OMP_NUM_THREADS"] = "1"
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    return env


def _run(argv: list[str], out: Path | None, timeout: int = 120) -> subprocess.CompletedProcess[str]:
    out_args = [] if out is None else ["--out", str(out)]
    proc = subprocess.run(
        [*argv, *out_args], env=_env(), capture_output=True, text=True, timeout=timeout, check=False
    )
    # Shown by pytest only when a test fails.
    print(proc.stdout, proc.stderr, sep="\n")
    return proc


@dataclass(frozen=True)
class Launched:
    """One test of a suite launch: its exit code (the worst over its ranks: what a launch of its own would
    exit with; None if it never ended) and its ranks' reports."""

    code: int | None
    out: Path
    args: tuple[str, ...]

    @property
    def reports(self) -> Reports:
        return [_load(self.out, self.args, rank) for rank in range(NPROC)]


def suite(
    out: Path, tests: dict[str, tuple[str, ...]]
) -> tuple[subprocess.CompletedProcess[str], dict[str, Launched]]:
    """Several tests in one torchrun launch (pav_payload.suite, as a run's validate stage launches them):
    torchrun, the torch import and the process group start once, not once per test (issue 49). Each test
    writes its ranks' reports to a folder of its own as it would alone, and its exit code to suite.done."""
    plan = [{"test": name, "args": [*args, "--out", str(out / name)]} for name, args in tests.items()]
    launcher = [str(TORCHRUN), "--standalone", f"--nproc_per_node={NPROC}", "-m", "pav_payload"]
    proc = _run([*launcher, "suite", "--plan-json", json.dumps(plan)], None, timeout=600)
    launched = {}
    for name, args in tests.items():
        done = out / name / DONE
        code = int(done.read_text().split()[0]) if done.exists() else None
        launched[name] = Launched(code, out / name, args)
    return proc, launched


# Launches of one process without torchrun, each as `python -m pav_payload ARGS` would run it (exit code:
# main's), all in one Python process so that torch is imported once, not once per test (issue 49).
ALONE: dict[str, tuple[str, ...]] = {
    "single": ("train", "--mode", "single", "--steps", "6", "--test-id", "solo"),
    "no_learning": ("train", "--mode", "single", "--steps", "3", "--lr", "0"),
    "fsdp_bf16": ("train", "--mode", "fsdp", "--fsdp-bf16", "--steps", "2"),
    "bfloat16": ("collectives", "--dtype", "bfloat16"),
}
ONE_PROCESS = """
import json, os, sys
from pav_payload.cli import main
codes = {}
for name, args in json.loads(sys.argv[1]).items():
    codes[name] = main([*args, "--out", os.path.join(sys.argv[2], name)])
print(json.dumps(codes), flush=True)
os._exit(0)  # as pav_payload.__main__ leaves: past gloo's threads
"""


@pytest.fixture(scope="module")
def alone(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[int, dict[str, Any]]]:
    out = tmp_path_factory.mktemp("alone")
    proc = _run([sys.executable, "-c", ONE_PROCESS, json.dumps(ALONE), str(out)], None)
    codes = json.loads(proc.stdout.splitlines()[-1])
    return {name: (codes[name], _load(out / name, args, 0)) for name, args in ALONE.items()}


def _load(out: Path, args: tuple[str, ...], rank: int) -> dict[str, Any]:
    test_id = args[args.index("--test-id") + 1] if "--test-id" in args else args[0]
    return json.loads((out / f"{test_id}.rank{rank}.json").read_text())


# --- unit tests -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [("1", 1), ("1K", 1024), ("64k", 65536), ("1M", 1 << 20), ("2G", 2 << 30), (" 3KiB ", 3072), ("8B", 8)],
)
def test_parse_size(text: str, expected: int) -> None:
    assert parse_size(text) == expected


@pytest.mark.parametrize("text", ["", "K", "1T", "-1", "0", "1.5M", "abc"])
def test_parse_size_rejects(text: str) -> None:
    with pytest.raises(ValueError):
        parse_size(text)


def test_parse_sizes_list() -> None:
    assert parse_sizes("1K, 64K,1M") == [1024, 65536, 1 << 20]


@pytest.mark.parametrize(
    ("op", "n", "factor"),
    [
        ("all_reduce", 2, 1.0),
        ("all_reduce", 8, 1.75),
        ("all_reduce", 1, 0.0),
        ("all_gather", 4, 0.75),
        ("reduce_scatter", 8, 0.875),
        ("all_to_all", 2, 0.5),
        ("broadcast", 16, 1.0),
        ("send_recv", 2, 1.0),
    ],
)
def test_bus_factor(op: str, n: int, factor: float) -> None:
    assert bus_factor(op, n) == pytest.approx(factor)


def test_bus_factor_rejects_unknown_op() -> None:
    with pytest.raises(ValueError):
        bus_factor("all_sum", 2)


def test_algbw_units() -> None:
    # 1e9 bytes in one second is 1 GB/s (decimal, as nccl-tests).
    assert algbw_gbps(10**9, 1e6) == pytest.approx(1.0)


def test_transformer_parameter_formula() -> None:
    model = build_model(ModelConfig("transformer", d_model=64, layers=3, seq_len=16, heads=8, vocab_size=50))
    assert sum(p.numel() for p in model.parameters()) == transformer_parameters(64, 3, 16, 50)


def test_1b_preset_size() -> None:
    preset = SIZES["1b"]
    count = transformer_parameters(preset.d_model, preset.layers, preset.seq_len, preset.vocab_size)
    assert count == 1_142_467_840


def _resolved(*argv: str) -> dict[str, Any]:
    args = build_parser().parse_args(["train", *argv])
    resolve_train_args(args)
    return vars(args)


def test_size_preset_scaled_down_by_flags() -> None:
    args = _resolved("--model", "transformer", "--mode", "fsdp", "--size", "1b", "--layers", "2")
    assert (args["d_model"], args["layers"], args["heads"], args["vocab_size"]) == (2048, 2, 16, 32000)
    assert (args["seq_len"], args["batch_size"], args["lr"]) == (2048, 4, 3e-4)
    plain = _resolved("--model", "transformer")
    assert (plain["d_model"], plain["layers"], plain["vocab_size"], plain["seq_len"]) == (128, 2, 1000, 64)
    assert (plain["batch_size"], plain["lr"]) == (32, 3e-3)
    assert (_resolved()["d_model"], _resolved()["lr"]) == (256, 1e-2)


@pytest.mark.parametrize(
    "argv", [("--size", "1b"), ("--mode", "ddp", "--fsdp-bf16"), ("--mode", "single", "--fsdp-bf16")]
)
def test_train_flag_conflicts_rejected(argv: tuple[str, ...]) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["train", *argv])
    assert exc.value.code == 2


# --- collectives ----------------------------------------------------------------------------------


# The torchrun launches of this module that end in pass or fail, as one suite launch (issue 49): each test's
# own args, reports and exit code, as its own launch would give them. That a failing rank's exit code comes
# out of torchrun is proven by tests/payload/test_burn.py's 3-rank launch of its own.
FSDP_DIMS = ("--d-model", "64", "--layers", "2", "--seq-len", "16", "--batch-size", "8")
SUITE: dict[str, tuple[str, ...]] = {
    "collectives": ("collectives", "--ops", ",".join(OPS), "--sizes", "1K,64K,6", "--warmup", "1",
                    "--iters", "3"),
    **{f"ddp_{model}": ("train", "--model", model, "--steps", "6", "--seq-len", "32", "--batch-size", "16")
       for model in ("mlp", "transformer")},
    "fsdp": ("train", "--mode", "fsdp", "--model", "transformer", "--steps", "10", *FSDP_DIMS),
    "resnet50": ("train", "--mode", "ddp", "--model", "resnet50", "--steps", "8",
                 "--d-model", "8", "--image-size", "32", "--batch-size", "8"),
    "diverged_ddp": ("train", "--mode", "ddp", "--steps", "3", "--inject-param-skew", "1"),
    "diverged_fsdp": ("train", "--mode", "fsdp", "--steps", "3", "--inject-param-skew", "1"),
    "wrong_result": ("collectives", "--ops", "all_reduce,all_to_all", "--inject-wrong", "1"),
}  # fmt: skip


@pytest.fixture(scope="module")
def launched(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Launched]:
    proc, tests = suite(tmp_path_factory.mktemp("suite"), SUITE)
    assert proc.returncode == 0  # a test that passed or failed ends no suite; an error would
    return tests


@pytest.fixture(scope="module")
def collectives(launched: dict[str, Launched]) -> tuple[int | None, Reports]:
    return launched["collectives"].code, launched["collectives"].reports


@pytest.mark.slow  # real payload processes (torchrun)
def test_collectives_all_ops_pass(collectives: tuple[int | None, Reports]) -> None:
    code, reports = collectives
    assert code == 0
    for rank, report in enumerate(reports):
        assert set(report) == TOP_LEVEL_KEYS
        assert (report["status"], report["reason"], report["kind"]) == ("pass", "", "collectives")
        assert (report["rank"], report["world_size"], report["backend"], report["device"]) == (
            rank,
            2,
            "gloo",
            "cpu",
        )
        assert report["schema_version"] == 1 and report["nccl_version"] is None
        results = report["metrics"]["results"]
        assert [r["op"] for r in results] == [op for op in OPS for _ in range(3)]
        for result in results:
            assert set(result) == RESULT_KEYS
            assert result["wrong"] == 0 and result["skipped"] == ""
            times = result["time_us"]
            assert 0 < times["min"] <= times["median"] <= times["max"]


@pytest.mark.slow  # real payload processes (torchrun)
def test_collectives_sizes_follow_nccl_tests(
    collectives: tuple[int | None, Reports],
) -> None:
    _, reports = collectives
    for result in reports[0]["metrics"]["results"]:
        assert result["size_bytes"] == result["count"] * 4  # float32
        if result["op"] in ("all_gather", "reduce_scatter", "all_to_all"):
            assert result["count"] % NPROC == 0  # whole blocks per rank
    sizes = {(r["op"], r["size_bytes"]) for r in reports[0]["metrics"]["results"]}
    assert ("all_gather", 1024) in sizes and ("all_reduce", 4) in sizes and ("all_gather", 8) in sizes


@pytest.mark.slow  # real payload processes (torchrun)
def test_collectives_busbw_factors(collectives: tuple[int | None, Reports]) -> None:
    _, reports = collectives
    expected = {"all_reduce": 1.0, "all_gather": 0.5, "reduce_scatter": 0.5, "all_to_all": 0.5}
    for result in reports[1]["metrics"]["results"]:
        factor = result["busbw_gbps"] / result["algbw_gbps"]
        assert factor == pytest.approx(expected.get(result["op"], 1.0))
        algbw = result["size_bytes"] / (result["time_us"]["median"] * 1e-6) / 1e9
        assert result["algbw_gbps"] == pytest.approx(algbw)


@pytest.mark.slow  # real payload processes (torchrun)
def test_collectives_wrong_result_fails(launched: dict[str, Launched]) -> None:
    test = launched["wrong_result"]
    assert test.code == 1  # fail: what a launch of its own exits with
    healthy, corrupted = test.reports
    assert healthy["status"] == "pass"
    assert corrupted["status"] == "fail" and "wrong results in 6 of 6 checks" in corrupted["reason"]
    assert all(r["wrong"] == 1 for r in corrupted["metrics"]["results"])


@pytest.mark.slow  # real payload processes (torchrun)
def test_error_leaves_report_and_exit_2(alone: dict[str, tuple[int, dict[str, Any]]]) -> None:
    # bfloat16 is refused on CPU after the (one-rank, storeless) process group is up: the error path
    # must still tear down and report.
    code, report = alone["bfloat16"]
    assert code == 2
    assert report["status"] == "error" and "bfloat16" in report["reason"]
    assert report["backend"] == "gloo" and report["world_size"] == 1 and report["ended"]


# --- train ----------------------------------------------------------------------------------------


@pytest.mark.slow  # real payload processes (torchrun)
@pytest.mark.parametrize("model", ["mlp", "transformer"])
def test_train_ddp_learns(launched: dict[str, Launched], model: str) -> None:
    test = launched[f"ddp_{model}"]
    reports = test.reports
    assert test.code == 0
    for report in reports:
        assert set(report) == TOP_LEVEL_KEYS
        assert (report["status"], report["kind"], report["backend"]) == ("pass", "train", "gloo")
        metrics = report["metrics"]
        assert metrics["loss_last"] < 0.9 * metrics["loss_first"]
        assert metrics["param_checksum_spread"] == 0 and metrics["params_identical"] is True
        assert metrics["samples_per_s"] > 0 and metrics["peak_memory_bytes"] > 0
        assert metrics["warmup_steps"] == 2 and len(metrics["losses"]) == 6
        assert (metrics["tokens_per_s"] is None) == (model == "mlp")
    # The curve is averaged over ranks, and replicas hold the same weights.
    assert reports[0]["metrics"]["losses"] == reports[1]["metrics"]["losses"]
    assert reports[0]["metrics"]["param_checksum"] == reports[1]["metrics"]["param_checksum"]


@pytest.mark.slow  # real payload processes (torchrun)
def test_train_fsdp_learns(launched: dict[str, Launched]) -> None:
    reports = launched["fsdp"].reports
    assert launched["fsdp"].code == 0
    for report in reports:
        assert set(report) == TOP_LEVEL_KEYS
        assert (report["status"], report["kind"], report["backend"]) == ("pass", "train", "gloo")
        metrics = report["metrics"]
        assert (metrics["mode"], metrics["model"], metrics["compute_dtype"]) == (
            "fsdp",
            "transformer",
            "float32",
        )
        # The whole model's count, not this rank's shard.
        assert metrics["parameters"] == transformer_parameters(64, 2, 16, 1000)
        assert metrics["loss_last"] < 0.9 * metrics["loss_first"]
        assert metrics["param_checksum_spread"] == 0 and metrics["params_identical"] is True
        assert metrics["tokens_per_s"] > 0 and metrics["peak_memory_bytes"] > 0
        assert metrics["warmup_steps"] == 2 and len(metrics["losses"]) == 10
    assert reports[0]["metrics"]["losses"] == reports[1]["metrics"]["losses"]
    assert reports[0]["metrics"]["param_checksum"] == reports[1]["metrics"]["param_checksum"]


def test_resnet50_is_the_standard_architecture() -> None:
    # torchvision's resnet50() has 25,557,032 parameters; the width flag scales every stage with it.
    assert sum(p.numel() for p in ResNet50().parameters()) == 25_557_032
    assert ResNet50(8)(torch.randn(2, 3, 32, 32)).shape == (2, 1000)


@pytest.mark.slow  # real payload processes (torchrun)
def test_train_resnet50_ddp_learns(launched: dict[str, Launched]) -> None:
    reports = launched["resnet50"].reports
    assert launched["resnet50"].code == 0
    for report in reports:
        assert (report["status"], report["kind"]) == ("pass", "train")
        metrics = report["metrics"]
        assert (metrics["mode"], metrics["model"]) == ("ddp", "resnet50")
        assert metrics["loss_last"] < 0.9 * metrics["loss_first"]
        assert metrics["samples_per_s"] > 0 and metrics["tokens_per_s"] is None
        assert metrics["params_identical"] is True
    assert reports[0]["metrics"]["param_checksum"] == reports[1]["metrics"]["param_checksum"]


@pytest.mark.slow  # real payload processes (torchrun)
@pytest.mark.parametrize("mode", ["ddp", "fsdp"])
def test_train_diverged_replicas_fail(launched: dict[str, Launched], mode: str) -> None:
    # Under FSDP the skew hits rank 1's gathered copy, as a corrupt all-gather would.
    reports = launched[f"diverged_{mode}"].reports
    assert launched[f"diverged_{mode}"].code == 1  # fail (a launch of its own: exit code 1)
    for report in reports:
        assert report["status"] == "fail" and "replicas diverged" in report["reason"]
        assert (
            report["metrics"]["param_checksum_spread"] != 0 and report["metrics"]["params_identical"] is False
        )


@pytest.mark.slow  # real payload processes (torchrun)
def test_train_single_without_torchrun(alone: dict[str, tuple[int, dict[str, Any]]]) -> None:
    code, report = alone["single"]
    assert code == 0
    assert report["status"] == "pass" and report["test_id"] == "solo"
    assert report["backend"] == "none" and report["world_size"] == 1
    assert not math.isnan(report["metrics"]["loss_last"])


@pytest.mark.slow  # real payload processes (torchrun)
def test_train_fsdp_bf16_needs_cuda(alone: dict[str, tuple[int, dict[str, Any]]]) -> None:
    code, report = alone["fsdp_bf16"]
    assert code == 2
    assert report["status"] == "error" and "--fsdp-bf16 needs CUDA" in report["reason"]


@pytest.mark.slow  # real payload processes (torchrun)
def test_train_that_does_not_learn_fails(alone: dict[str, tuple[int, dict[str, Any]]]) -> None:
    code, report = alone["no_learning"]
    assert code == 1
    assert report["status"] == "fail" and "loss did not fall" in report["reason"]
