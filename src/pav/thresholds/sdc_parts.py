"""The GPU an SDC check caught, as a part: sdc_check's and gpu_burn's per-GPU SDC records (burn_series.py)
become threshold problems naming the GPU, which the report's bad parts list (reporting/bad_parts.py) as
they list gpu_health's. The test's status is the payload's: a mismatch already failed it."""

from __future__ import annotations

from typing import Any

from pav.thresholds.burn_in import gpu_label


def sdc_records(metrics: dict[str, Any]) -> dict[str, list[dict[str, Any]]]:
    """Each local GPU's SDC records: sdc_check's one check, or gpu_burn's checks at its start and end, each
    with the `device_type` it ran on where the record or the burn-in's series says it (a CPU rank of a test
    on CPUs is no GPU)."""
    out: dict[str, list[dict[str, Any]]] = {}
    for key, record in (metrics.get("sdc") or {}).items():
        if isinstance(record, dict):
            out[str(key)] = [record]
    for key, series in ((metrics.get("burn_in") or {}).get("gpus") or {}).items():
        kind = {"device_type": series["device_type"]} if series.get("device_type") else {}
        checks = [{**r, **kind} for r in (series.get("sdc") or []) if isinstance(r, dict)]
        if checks:
            out.setdefault(str(key), []).extend(checks)
    return out


def sdc_problems(metrics: dict[str, Any], labels: dict[str, str]) -> list[dict[str, str]]:
    """One problem per GPU whose results differed: its first mismatch, and how many checks saw one."""
    problems = []
    for key, records in sorted(sdc_records(metrics).items()):
        wrong = [r for r in records if int(r.get("mismatch_count") or 0) > 0]
        if not wrong:
            continue
        kind = next((r.get("device_type") for r in records if r.get("device_type")), None)
        label = labels.get(key) or gpu_label(key, (metrics.get("gpu") or {}).get(key), kind)
        first = (wrong[0].get("mismatches") or [{}])[0]
        where = (
            f"repetition {first.get('rep')} of {wrong[0].get('reps')} differs from "
            f"{first.get('against', 'the others')} at element {first.get('element')}: "
            f"{first.get('got')} instead of {first.get('want')}"
            if first
            else f"{wrong[0].get('distinct')} distinct results over {wrong[0].get('reps')} repetitions"
        )
        more = f" ({len(wrong)} of {len(records)} SDC checks)" if len(records) > 1 else ""
        problems.append({"part": label, "problem": f"SDC: {where}{more}"})
    return problems
