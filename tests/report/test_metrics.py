"""The run as Prometheus metrics (pav.reporting.metrics), rendered from the real GPU runs of the calibration
record as the report holds them, and held against promtool's lint: per host and per GPU the verdict, each
test's status, busbw, TFLOP/s (as FLOP/s), each gate's margin, the run's time and end."""

from __future__ import annotations

import json
import os
import stat
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from pav.reporting import exposition, metrics, metrics_export, metrics_gpus, pushgateway
from pav.results import HostRecord, RunResults, TestResult
from tests.report.prom import Series, assert_lint_clean, families, one, parse, pick
from tests.report.test_bad_parts import CALIBRATION, judged_run
from tests.thresholds.test_real_gpu_runs import X2B_GPU1

BUSY = "h100x2b-gpu-busy-gpu1"
HEALTHY = ("h100x2b-healthy", "h100x4-healthy")
# The unit or kind each family name ends with (Prometheus' naming: base units, _info for labels).
SUFFIXES = ("_seconds", "_bytes_per_second", "_flops_per_second", "_ratio", "_info", "_verdict", "_status")
VALUE_LABELS = {"env", "host", "gpu", "peer_gpu", "test", "op", "size_bytes", "gate", "basis", "direction"}
STATE_LABELS = {"verdict", "status"}
INFO_LABELS = {
    "pav_run_info": {"run_id", "profile"},
    "pav_gpu_info": {"model", "uuid", "pci_bus_id"},
    "pav_failed_link_info": {"between"},
}


def text_of(results: dict[str, Any]) -> str:
    return exposition.render(metrics.families(results))


def recorded_run(fixture: str) -> RunResults:
    """The run judged again as the report holds it, with the end and wall time it recorded."""
    run = judged_run(fixture)
    recorded = json.loads((CALIBRATION / fixture / "results.json").read_text())
    run.ended, run.timing = recorded["ended"], recorded["timing"]
    return run


def test_the_busy_gpu_run_names_gpu_1_at_277_tflops() -> None:
    text = text_of(recorded_run(BUSY).to_dict())
    assert_lint_clean(text)
    series = parse(text)
    where = {"env": "local", "host": "localhost"}
    assert one(series, "pav_run_verdict", env="local", verdict="FAIL") == 1
    assert one(series, "pav_host_verdict", **where, verdict="FAIL") == 1
    # GPU 1, the hogged one, in base units: 277 TFLOP/s is 2.77e14 FLOP/s; GPU 0 kept its 793.4.
    flops = "pav_gpu_gemm_bf16_flops_per_second"
    assert one(series, flops, **where, gpu="1", test="gpu_probe") == pytest.approx(2.77e14)
    assert one(series, flops, **where, gpu="0", test="gpu_probe") == pytest.approx(7.934e14)
    assert one(series, "pav_gpu_verdict", **where, gpu="1", verdict="FAIL") == 1
    assert one(series, "pav_gpu_verdict", **where, gpu="0", verdict="PASS") == 1
    uuid = X2B_GPU1.split(", ")[1].rstrip(")")
    assert one(series, "pav_gpu_info", **where, gpu="1", uuid=uuid, pci_bus_id="00000000:00:07.0") == 1
    # Its gates' margins: 277 against 0.7 x 989.4 (absolute) and 0.9 x the best GPU (relative), both < 1.
    margin = "pav_gate_margin_ratio"
    gate = {"test": "gpu_probe", "gate": "gemm_bf16_tflops.1", "gpu": "1"}
    assert one(series, margin, **where, **gate, basis="absolute") == pytest.approx(277 / 692.58)
    assert one(series, margin, **where, **gate, basis="relative") < 1
    assert one(series, margin, **where, test="gpu_probe", gate="gemm_bf16_tflops.0", basis="absolute") > 1
    # The host's collectives: busbw in bytes/s at every size, the 8 GiB one under its gate.
    busbw = {"test": "torch_nccl_allreduce", "op": "all_reduce", "size_bytes": "8589934592"}
    assert one(series, "pav_busbw_bytes_per_second", **where, **busbw) == pytest.approx(160.288e9, rel=1e-4)
    assert len(pick(series, "pav_busbw_bytes_per_second", **where, test="nccl_tests_all_reduce")) == 5
    assert one(series, "pav_test_status", **where, test="gpu_probe", status="fail") == 1
    assert one(series, "pav_test_status", **where, test="train_gpu_single", status="pass") == 1
    ended = datetime(2026, 11, 26, 17, 33, 32, tzinfo=UTC).timestamp()  # its results.json's "ended"
    assert one(series, "pav_run_timestamp_seconds", env="local") == ended
    assert one(series, "pav_run_duration_seconds", env="local") == 57


@pytest.mark.parametrize("fixture", HEALTHY)
def test_a_healthy_run_passes_its_run_hosts_gpus_and_every_margin(fixture: str) -> None:
    run = recorded_run(fixture)
    text = text_of(run.to_dict())
    assert_lint_clean(text)
    series = parse(text)
    assert one(series, "pav_run_verdict", env="local", verdict="PASS") == 1
    for host, record in run.hosts.items():
        assert one(series, "pav_host_verdict", host=host, verdict="PASS") == 1
        gpus = pick(series, "pav_gpu_verdict", host=host, verdict="PASS")
        assert len(gpus) == record.facts["gpu"]["count"] and all(s.value == 1 for s in gpus)
    margins = pick(series, "pav_gate_margin_ratio")
    assert margins and all(s.value >= 1 for s in margins), [s for s in margins if s.value < 1]


@pytest.mark.parametrize("fixture", (BUSY, *HEALTHY))
def test_names_and_labels_follow_prometheus_conventions(fixture: str) -> None:
    text = text_of(recorded_run(fixture).to_dict())
    declared = families(text)
    series = parse(text)
    assert {s.name for s in series} == set(declared)
    for name, (help_text, kind) in declared.items():
        assert name.startswith("pav_") and name.endswith(SUFFIXES) and help_text and kind == "gauge", name
    for s in series:
        allowed = VALUE_LABELS | STATE_LABELS | INFO_LABELS.get(s.name, set())
        assert set(s.labels) <= allowed, (s.name, set(s.labels) - allowed)
        if s.name.endswith("_info"):
            assert s.value == 1
    # A state set holds exactly one 1 per thing it describes.
    for name, state in (("pav_run_verdict", "verdict"), ("pav_host_verdict", "verdict"),
                        ("pav_gpu_verdict", "verdict"), ("pav_test_status", "status")):  # fmt: skip
        groups = _by_other_labels(pick(series, name), state)
        assert groups and all(sorted(values) == [0] * (len(values) - 1) + [1] for values in groups.values())


def _by_other_labels(series: list[Series], state: str) -> dict[tuple[tuple[str, str], ...], list[float]]:
    out: dict[tuple[tuple[str, str], ...], list[float]] = {}
    for s in series:
        key = tuple(sorted((k, v) for k, v in s.labels.items() if k != state))
        out.setdefault(key, []).append(s.value)
    return out


def across_hosts(verdict: str = "FAIL", error: str = "") -> dict[str, Any]:
    """Three hosts; an allreduce across them failed, and isolation's pair re-runs named h2."""
    hosts = ["h0", "h1", "h2"]
    run = RunResults("r1", "sim", "inv", "run", "cpu", verdict=verdict, error=error)
    run.hosts = {h: HostRecord(h) for h in hosts}
    run.tests = [
        TestResult("torch_gloo_allreduce", hosts, "fail", "wrong bytes", metrics={"wrong_total": 3}),
        *(TestResult("ddp_cpu_train", [h], "pass", metrics={"wall_s": 4.5}) for h in hosts),
    ]
    run.isolation = {"suspects": [{"host": "h2", "reason": "pairs with h2 fail"}]}
    run.timing = {"run_s": 312.0}
    return run.to_dict()


def test_a_test_across_hosts_fails_only_the_host_isolation_named() -> None:
    text = text_of(across_hosts())
    assert_lint_clean(text)
    series = parse(text)
    assert one(series, "pav_host_verdict", host="h2", verdict="FAIL") == 1
    assert one(series, "pav_host_verdict", host="h0", verdict="PASS") == 1
    # The test's outcome is every host's it spans, as junit.xml has it.
    for host in ("h0", "h1", "h2"):
        assert one(series, "pav_test_status", host=host, test="torch_gloo_allreduce", status="fail") == 1
        assert one(series, "pav_test_duration_seconds", host=host, test="ddp_cpu_train") == 4.5
    assert one(series, "pav_run_duration_seconds", env="sim") == 312
    assert not pick(series, "pav_gpu_verdict")  # no GPU host, no GPU series


def test_a_run_that_could_not_finish_is_error_for_the_hosts_it_does_not_fail() -> None:
    series = parse(text_of(across_hosts("ERROR", "configure failed")))
    assert one(series, "pav_run_verdict", verdict="ERROR") == 1
    assert one(series, "pav_host_verdict", host="h2", verdict="FAIL") == 1
    assert one(series, "pav_host_verdict", host="h1", verdict="ERROR") == 1


def test_a_gate_names_one_gpu_by_its_index() -> None:
    assert metrics_gpus.gpu_index(X2B_GPU1) == "1" and metrics_gpus.gpu_index("GPU 12") == "12"
    for part in ("GPU 0 -> GPU 1", "host", "fabric", "mlx5_0/1", "GPUs"):
        assert metrics_gpus.gpu_index(part) is None, part


def test_gpus_known_only_to_nvidia_smi_are_still_listed() -> None:
    """A host whose NVML facts are missing: its GPUs from preflight's nvidia-smi rows, judged by nothing."""
    results = across_hosts()
    row = ["0", "NVIDIA H200", "143771", "570.1", "00000000:18:00.0", "Disabled", "96.00"]
    results["hosts"]["h0"]["facts"] = {"gpu": {"count": 1, "devices": [row]}}
    series = parse(text_of(results))
    info = {"host": "h0", "gpu": "0", "model": "NVIDIA H200", "pci_bus_id": "00000000:18:00.0"}
    assert one(series, "pav_gpu_info", **info) == 1
    assert one(series, "pav_gpu_verdict", host="h0", gpu="0", verdict="NONE") == 1


def test_label_values_are_escaped() -> None:
    results = across_hosts()
    odd = 'rack "7"\\b\nnode'
    results["tests"][1]["hosts"] = [odd]
    text = text_of(results)
    assert_lint_clean(text)
    assert one(parse(text), "pav_test_status", host=odd, test="ddp_cpu_train", status="pass") == 1


def test_the_textfile_is_the_tools_own_per_env() -> None:
    assert metrics_export.textfile_name("nebius-eu") == "pav-nebius-eu.prom"
    assert metrics_export.textfile_name("../x y") == "pav-.._x_y.prom"


def test_the_textfile_follows_no_link_planted_in_its_directory(tmp_path: Path) -> None:
    """node_exporter's directory may be writable by others: a link at the temp name (the old one was
    .NAME.PID.tmp) or at the file's own name must not carry the metrics or a chmod to the file it names."""
    textfiles, secret, other = tmp_path / "textfiles", tmp_path / "secret", tmp_path / "other"
    textfiles.mkdir()
    for path in (secret, other):
        path.write_text("root only\n")
        path.chmod(0o600)
    name = metrics_export.textfile_name("sim")
    (textfiles / f".{name}.{os.getpid()}.tmp").symlink_to(secret)
    (textfiles / name).symlink_to(other)
    [written] = metrics_export.export(across_hosts(), textfiles, None)
    assert written.ok, written.detail
    for path in (secret, other):
        assert path.read_text() == "root only\n" and stat.S_IMODE(path.stat().st_mode) == 0o600
    target = textfiles / name
    assert not target.is_symlink() and stat.S_IMODE(target.stat().st_mode) == 0o644
    assert (
        one(parse(target.read_text()), "pav_test_status", host="h2", test="ddp_cpu_train", status="pass") == 1
    )


def test_a_textfile_that_could_not_be_put_in_place_leaves_no_temp(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def refuse(*_: object) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(metrics_export.os, "replace", refuse)
    [failed] = metrics_export.export(across_hosts(), tmp_path, None)
    assert not failed.ok and failed.detail.startswith("No space left on device; fix:")
    assert not list(tmp_path.iterdir())


def test_a_grouping_value_with_a_slash_goes_base64_and_credentials_stay_out() -> None:
    assert pushgateway.grouping_path({"env": "sim", "host": "h0"}) == "/metrics/job/pav/env/sim/host/h0"
    assert pushgateway.grouping_path({"env": "a/b"}) == "/metrics/job/pav/env@base64/YS9i"
    assert pushgateway.public_url("https://u:secret@gw.example:9091/p") == "https://gw.example:9091/p"
    assert pushgateway.check_url("gw:9091") is not None and pushgateway.check_url("http://gw:9091") is None


def test_no_target_builds_or_sends_nothing(tmp_path: Path) -> None:
    assert metrics_export.export(across_hosts(), None, None) == []
    assert not list(tmp_path.iterdir())


def test_a_run_the_metrics_cannot_be_built_from_is_a_failed_export(tmp_path: Path) -> None:
    results = across_hosts()
    results["ended"] = "the night before"
    [failed] = metrics_export.export(results, tmp_path, "http://127.0.0.1:9")
    assert not failed.ok and failed.detail.startswith("internal error: ValueError(")
    assert not list(tmp_path.iterdir())
