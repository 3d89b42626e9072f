"""Issue 64: a record made before a workload change is judged as what it measured. `judge` says which
tests ran another workload than this release's and judges their throughput by no gate of today's, where it
used to FAIL them against a gate for another workload; their correctness is judged as before."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from pav.commands.judge import rejudge, render
from tests.thresholds.test_real_gpu_runs import FIXTURES

RUN = "h200x2b-healthy-default"  # 2x H200, ResNet-50 at batch 256 per GPU
RANKS = ("train_gpu_resnet50_ddp", "train_gpu_resnet50_single")


def resnet_at(tmp_path: Path, batch: int) -> Path:
    """The run's ResNet-50 ranks as a run before the batch change (64) recorded them: their parameters,
    and their throughput at 1,716 images/s per GPU (what the 2x H200 then measured, docs/benchmarks.md)."""
    run = tmp_path / RUN
    shutil.copytree(FIXTURES / RUN, run)
    for test in RANKS:
        for rank in (run / "hosts/localhost/results" / test).glob("*.rank*.json"):
            data = json.loads(rank.read_text())
            data["params"]["batch_size"] = batch
            data["metrics"]["samples_per_s"] = 1716.6
            rank.write_text(json.dumps(data))
    return run


def test_a_record_of_another_batch_says_so_instead_of_failing(tmp_path: Path) -> None:
    found = rejudge(resnet_at(tmp_path, 64), "h200-2gpu")
    judged = {r.test.name: r.test for r in found.tests}
    for name in RANKS:
        assert judged[name].status == "pass", judged[name].reason
        [note] = [n for n in judged[name].threshold["not_applicable"] if n["metric"] == "workload"]
        assert note["not_applicable"].startswith(
            "recorded with batch_size 64, now 256 in this release's workload"
        )
    assert "   WORKLOAD train_gpu_resnet50_single, train_gpu_resnet50_ddp: recorded with batch_size 64" in (
        render(found)
    )


def test_the_same_figure_at_todays_batch_fails_its_gate(tmp_path: Path) -> None:
    """The control: the figure itself is what fails, where the workload is today's."""
    found = rejudge(resnet_at(tmp_path, 256), "h200-2gpu")
    judged = {r.test.name: r.test for r in found.tests}
    assert judged["train_gpu_resnet50_ddp"].status == "fail"
    assert "samples_per_s_per_rank_min" in judged["train_gpu_resnet50_ddp"].reason
    assert "WORKLOAD" not in render(found)
