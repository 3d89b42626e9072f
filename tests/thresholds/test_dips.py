"""A dip that repeats (issue 63): the probe's host copy rounds, judged per GPU against its own best round. A
real 4x H100 run (fixtures/h100x4-healthy), its probe given rounds as today's payload records them, is judged
again through the judge command's own code: one dip (as the healthy p2p-off run read, 28.2 of 55 GB/s)
passes; two fail naming the GPU and the rounds."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from pav.commands.judge import rejudge
from pav.reporting import bad_parts
from pav.results import TestResult
from pav.thresholds.dips import dip_checks

FIXTURES = Path(__file__).parent / "fixtures"
HEALTHY = "h100x4-healthy"  # recorded in one round: no rounds, as every fixture before issue 63
PROBE = Path("hosts/localhost/results/gpu_probe/gpu_probe.rank0.json")
GPU1 = "GPU 1 (00000000:00:07.0, GPU-7080f9b2-e352-8ccd-08d2-b024b4af225d)"


def with_rounds(tmp_path: Path, rounds: dict[str, dict[str, list[float]]]) -> Path:
    """The healthy run dir with its probe's rounds (metric -> GPU -> rounds); each GPU with none copies its
    recorded figure in all three, and each figure is the median of its rounds, as the payload reports."""
    run = tmp_path / HEALTHY
    shutil.copytree(FIXTURES / HEALTHY, run)
    report = json.loads((run / PROBE).read_text())
    metrics = report["metrics"]
    for metric in ("h2d_gbps", "d2h_gbps", "h2d_all_gbps", "d2h_all_gbps"):
        given = rounds.get(metric, {})
        metrics[f"{metric}_rounds"] = {k: given.get(k, [v, v, v]) for k, v in metrics[metric].items()}
        metrics[metric] = {k: sorted(r)[1] for k, r in metrics[f"{metric}_rounds"].items()}
    (run / PROBE).write_text(json.dumps(report))
    return run


def probe_of(run: Path) -> TestResult:
    found = rejudge(run)
    return next(r.test for r in found.tests if r.test.name == "gpu_probe")


def dips(test: TestResult) -> dict[str, dict[str, Any]]:
    return {g["metric"]: g for g in test.threshold["gates"] if g.get("basis") == "rounds"}


def test_one_dip_leaves_the_median_healthy_and_passes(tmp_path: Path) -> None:
    """h100x4-p2p-off's GPU 1 read 28.2 GB/s D2H in its one round, where the others read 55: a stall of the
    host, not the link. Among three rounds the median is the link's and the GPU passes."""
    test = probe_of(with_rounds(tmp_path, {"d2h_gbps": {"1": [54.98, 28.2, 55.01]}}))
    assert test.status == "pass", test.reason
    gate = dips(test)["d2h_gbps_rounds.1"]
    assert (gate["part"], gate["value"], gate["max"], gate["status"]) == (GPU1, 1, 1, "pass")
    assert test.metrics["d2h_gbps"]["1"] == 54.98
    # Every GPU's rounds alone are judged, both ways; at once they are recorded, not judged.
    assert set(dips(test)) == {f"{m}_rounds.{k}" for m in ("h2d_gbps", "d2h_gbps") for k in "0123"}


def test_two_dips_fail_naming_the_gpu_and_the_rounds(tmp_path: Path) -> None:
    test = probe_of(with_rounds(tmp_path, {"h2d_gbps": {"1": [28.1, 55.2, 27.9]}}))
    assert test.status == "fail"
    why = (
        f"{GPU1}: h2d_gbps dipped in rounds 1 and 3 of 3 (28.1, 27.9 GB/s against 55.2 in round 2): "
        "2 or more rounds under 0.8 x the GPU's best round"
    )
    assert why in test.reason.split("; ")
    assert dips(test)["h2d_gbps_rounds.1"]["reason"] == why
    # The bad parts lead with the GPU, its dips the worst of its figures.
    [part] = bad_parts.find({"tests": [vars(test)]})
    assert part.part == GPU1 and part.worst.metric == "h2d_gbps_rounds.1"
    assert "comes and goes" in part.worst.cause


def test_a_healthy_spread_of_rounds_passes(tmp_path: Path) -> None:
    """Healthy single rounds read 51.1-55.2 GB/s alone on 4x H100 (0.93 of the best)."""
    test = probe_of(with_rounds(tmp_path, {"h2d_gbps": {"0": [51.1, 55.2, 53.0]}}))
    assert test.status == "pass", test.reason
    assert dips(test)["h2d_gbps_rounds.0"]["value"] == 0


def test_dips_copying_at_once_are_recorded_not_judged(tmp_path: Path) -> None:
    """At once the host's shared path sets each round: its level moved by half between healthy one-round
    runs of one 4x H100 (23.8-51.8 GB/s D2H), so a dip there says nothing of one GPU."""
    test = probe_of(with_rounds(tmp_path, {"d2h_all_gbps": {"3": [36.4, 17.0, 16.5]}}))
    assert not any(m.startswith("d2h_all_gbps_rounds") for m in dips(test))
    assert test.metrics["d2h_all_gbps_rounds"]["3"] == [36.4, 17.0, 16.5]


def test_a_record_without_rounds_gets_no_dip_gate() -> None:
    """Every fixture before issue 63 was recorded with the best of 3 rounds, or one round: no rounds."""
    test = probe_of(FIXTURES / HEALTHY)
    assert test.status == "pass" and dips(test) == {}


@pytest.mark.parametrize(
    ("rounds", "dipped", "status"),
    [
        ([55.2, 28.1, 55.0, 54.9, 55.1], 1, "pass"),
        ([55.2, 28.1, 55.0, 27.0, 55.1], 2, "fail"),  # two of five: the median is healthy, the link is not
        ([44.2, 55.2, 44.17], 0, "pass"),  # 0.8 x 55.2 = 44.16 is the bound
        ([44.1, 55.2, 44.15], 2, "fail"),
        ([28.1, 28.1], 0, None),  # two rounds cannot tell a dip from the figure: not judged
    ],
)
def test_the_rule_counts_dips_against_the_best_round(
    rounds: list[float], dipped: int, status: str | None
) -> None:
    found = dip_checks({"h2d_gbps_rounds": {"0": rounds}}, {})
    if status is None:
        assert found == []
        return
    [gate] = found
    assert (gate["part"], gate["value"], gate["status"]) == ("GPU 0", dipped, status)
    if len(rounds) == 5 and status == "fail":
        assert gate["reason"].startswith(
            "GPU 0: h2d_gbps dipped in rounds 2 and 4 of 5 (28.1, 27 GB/s against"
        )
