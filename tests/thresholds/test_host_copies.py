"""Host copies are gated by what bounds each figure (issue 36): a GPU copying alone by its own PCIe link
(absolute), every GPU copying at once by the host's own GPUs (relative: what they share on the way to host
memory is not in the facts)."""

from __future__ import annotations

from pav.results import verdict_of
from tests.thresholds.test_derive import hgx
from tests.thresholds.test_given_gpus import judged, probe_metrics

HEALTHY_AT_ONCE = {"0": 44.0, "1": 55.0, "2": 51.0, "3": 49.0}  # the spread seen on a healthy 4x H100


def at_once(h2d: dict[str, float]) -> dict[str, object]:
    metrics = probe_metrics([0, 1, 2, 3], None)
    return metrics | {"h2d_all_gbps": h2d, "d2h_all_gbps": dict(HEALTHY_AT_ONCE)}


def test_every_gpu_copying_at_once_under_its_alone_pcie_bar_still_passes() -> None:
    # 44 GB/s at once is under 0.65 x 63 (the bar of one GPU's own link), and is no fault: the host shares.
    test = judged(hgx(4), at_once(dict(HEALTHY_AT_ONCE)))
    assert verdict_of([test]) == "PASS", test.reason
    gates = {(g["metric"], g["basis"]): g for g in test.threshold["gates"]}
    assert "median" in gates["h2d_all_gbps.0", "relative"]["source"]
    assert ("h2d_all_gbps.0", "absolute") not in gates
    assert "PCIe gen5 x16" in gates["h2d_gbps.0", "absolute"]["source"]


def test_a_gpu_far_under_its_peers_at_once_fails_named() -> None:
    test = judged(hgx(4), at_once({**HEALTHY_AT_ONCE, "2": 20.0}))
    assert test.status == "fail"
    assert test.reason.startswith("GPU 2 (") and "h2d_all_gbps.2 20 GB/s" in test.reason


def test_a_gpu_slow_alone_fails_by_its_own_link() -> None:
    metrics = probe_metrics([0, 1, 2, 3], None)
    metrics["h2d_gbps"] = {**metrics["h2d_gbps"], "3": 30.0}  # an x8 link, say
    test = judged(hgx(4), metrics)
    assert test.status == "fail" and "GPU 3 (" in test.reason and "h2d_gbps.3 30 GB/s" in test.reason
