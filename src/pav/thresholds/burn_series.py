"""A burn-in's and an SDC check's rank reports folded into a test's metrics (evaluate.summarize): one time
series per GPU, one point per window, with the figures the burn-in gates read (thresholds/burn_in.py). The
raw NVML samples stay in the rank reports (the test's artifacts)."""

from __future__ import annotations

from typing import Any

from pav.thresholds.health import FATAL_XIDS, THROTTLES

# What each window keeps in results.json: the rank report's field -> the short name.
WINDOW_FIELDS = {"start_s": "start_s", "end_s": "end_s", "tflops": "tflops", "hbm_gbps": "hbm_gbps",
                 "sm_clock_min_mhz": "sm_mhz_min", "temp_max_c": "temp_c_max", "power_max_w": "power_w_max",
                 "reasons": "reasons", "ecc_uncorrected": "ecc_uncorrected"}  # fmt: skip


def summarize_burn(ranks: list[dict[str, Any]]) -> dict[str, Any]:
    gpus: dict[str, dict[str, Any]] = {}
    ident: dict[str, Any] = {}
    for rank in sorted(ranks, key=lambda r: r.get("rank", 0)):
        metrics = rank.get("metrics") or {}
        for key, value in (metrics.get("gpu") or {}).items():
            ident[str(key)] = value
            gpus[str(key)] = gpu_series(metrics)
    config = next(
        (r.get("metrics", {}).get("config") for r in ranks if r.get("metrics", {}).get("config")), {}
    )
    out: dict[str, Any] = {
        "gpu": ident,
        "wrong_total": sum(int((r.get("metrics") or {}).get("wrong_total") or 0) for r in ranks),
        "sdc_mismatches": sum(int((r.get("metrics") or {}).get("sdc_mismatches") or 0) for r in ranks),
        "burn_in": {"duration_s": config.get("duration_s"), "window_s": config.get("window_s"), "gpus": gpus},
    }
    for name in ("first_tflops", "last_tflops", "sm_mhz_min", "temp_c_max", "throttled_windows",
                 "new_ecc_uncorrected", "new_ecc_corrected", "fault_xids"):  # fmt: skip
        out[f"burn_in_{name}"] = {k: g[name] for k, g in gpus.items() if g.get(name) is not None}
    return out


def gpu_series(metrics: dict[str, Any]) -> dict[str, Any]:
    windows = [
        {short: w.get(name) for name, short in WINDOW_FIELDS.items()} for w in metrics.get("windows") or []
    ]
    samples = metrics.get("samples") or []
    ecc_unc = [s.get("ecc_uncorrected") for s in samples if s.get("ecc_uncorrected") is not None]
    ecc_cor = [s.get("ecc_corrected") for s in samples if s.get("ecc_corrected") is not None]
    xids = metrics.get("xids") or []
    return {
        "device_type": metrics.get("device_type"),
        "windows": windows,
        "samples": len(samples),
        "nvml": metrics.get("nvml") or "",
        "xid_source": metrics.get("xid_source"),
        "xid_note": metrics.get("xid_note") or "",
        "xids": xids,
        "first_tflops": windows[0]["tflops"] if windows else None,
        "last_tflops": windows[-1]["tflops"] if windows else None,
        "sm_mhz_min": _least([w["sm_mhz_min"] for w in windows]),
        "temp_c_max": _most([w["temp_c_max"] for w in windows]),
        "throttled_windows": sum(1 for w in windows if THROTTLES & set(w["reasons"] or []))
        if samples
        else None,
        "new_ecc_uncorrected": max(ecc_unc) - ecc_unc[0] if ecc_unc else None,
        "new_ecc_corrected": max(ecc_cor) - ecc_cor[0] if ecc_cor else None,
        "fault_xids": sum(1 for x in xids if x.get("xid") in FATAL_XIDS),
        "sdc": [_sdc(c) for c in (metrics.get("sdc") or {}).values() if isinstance(c, dict)],
    }


def _sdc(check: dict[str, Any]) -> dict[str, Any]:
    """An SDC check at the burn-in's start or end, without its digest: what names the GPU that differed."""
    keep = ("reps", "distinct", "mismatch_count", "mismatches")
    return {k: check[k] for k in keep if k in check}


def summarize_sdc(ranks: list[dict[str, Any]]) -> dict[str, Any]:
    ident: dict[str, Any] = {}
    per_gpu: dict[str, Any] = {}
    for rank in ranks:
        metrics = rank.get("metrics") or {}
        for key, value in (metrics.get("gpu") or {}).items():
            ident[str(key)] = value
            per_gpu[str(key)] = _with_device(metrics.get("sdc"), rank.get("device"))
    total = sum(int((r.get("metrics") or {}).get("sdc_mismatches") or 0) for r in ranks)
    return {"gpu": ident, "sdc": per_gpu, "sdc_mismatches": total}


def _with_device(record: Any, device: Any) -> Any:
    """The check's record and the kind of device it ran on (the rank's `device`: "cuda:0" -> cuda, cpu), so
    that the part an SDC names is a GPU or a CPU rank (sdc_parts.py), as a burn-in's series says it."""
    if not isinstance(record, dict) or not isinstance(device, str) or not device:
        return record
    return {**record, "device_type": device.split(":")[0]}


def _least(values: list[Any]) -> Any:
    present = [v for v in values if isinstance(v, int | float)]
    return min(present) if present else None


def _most(values: list[Any]) -> Any:
    present = [v for v in values if isinstance(v, int | float)]
    return max(present) if present else None
