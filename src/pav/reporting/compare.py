"""The payload's collectives beside nccl-tests: busbw per op and size from both tools, and their ratio."""

from __future__ import annotations

from typing import Any

from pav.catalog import spec_of

# nccl-tests binary names -> the payload's op names.
NCCL_TO_PAYLOAD = {
    "all_reduce": "all_reduce",
    "all_gather": "all_gather",
    "reduce_scatter": "reduce_scatter",
    "alltoall": "all_to_all",
    "sendrecv": "send_recv",
}


def busbw_table(
    tests: list[dict[str, Any]], hosts: list[str]
) -> list[tuple[str, int, float | None, float | None]]:
    """(op, size_bytes, payload busbw, nccl-tests busbw) for every op and size either tool measured on
    exactly these hosts: one host's NVLink numbers are never paired with a run across hosts."""
    payload: dict[tuple[str, int], float] = {}
    nccl: dict[tuple[str, int], float] = {}
    for test in tests:
        if list(test["hosts"]) != list(hosts) or test["status"] not in ("pass", "fail"):
            continue
        metrics = test.get("metrics", {})
        if is_nccl_tests(test):
            op = NCCL_TO_PAYLOAD.get(str(metrics.get("op")), str(metrics.get("op")))
            for size, value in (metrics.get("busbw_gbps") or {}).items():
                if value is not None:
                    nccl[(op, int(size))] = float(value)
        elif _payload_test(test, "collectives"):
            for op, sizes in (metrics.get("busbw_gbps") or {}).items():
                for size, value in sizes.items():
                    payload[(op, int(size))] = float(value)
    keys = sorted(set(payload) | set(nccl))
    return [(op, size, payload.get((op, size)), nccl.get((op, size))) for op, size in keys]


def is_nccl_tests(test: dict[str, Any]) -> bool:
    """A recorded test of nccl-tests (its metrics: one op's busbw per size), by its catalog spec."""
    spec = spec_of(test["name"])  # None: a recorded test this release does not know
    return spec is not None and spec.launcher == "nccl_tests"


def _payload_test(test: dict[str, Any], kind: str) -> bool:
    """A recorded GPU test of the payload's `kind` (collectives: NCCL busbw per op and size; train)."""
    spec = spec_of(test["name"])
    return spec is not None and spec.needs_gpu and spec.payload == kind


def host_sets(tests: list[dict[str, Any]], hosts: list[str]) -> list[list[str]]:
    """Each host alone, then every set of hosts a test spanned, in the order the tests ran."""
    sets = [[h] for h in hosts]
    for test in tests:
        if len(test["hosts"]) > 1 and list(test["hosts"]) not in sets:
            sets.append(list(test["hosts"]))
    return sets


# Below this payload/nccl-tests ratio the two tools disagree enough that one of them is not to be trusted.
RATIO_FLOOR = 0.95


def cross_check(tests: list[dict[str, Any]], hosts: list[str]) -> list[dict[str, Any]]:
    """results.json's cross_check: every op and size both tools measured on a host, with the ratio."""
    rows = []
    for members in host_sets(tests, hosts):
        for op, size, mine, theirs in busbw_table(tests, members):
            if mine and theirs:
                ratio = round(mine / theirs, 3)
                rows.append(
                    {"host": ",".join(members), "scope": "host" if len(members) == 1 else "cluster",
                     "op": op, "size_bytes": size, "payload_busbw_gbps": mine,
                     "nccl_tests_busbw_gbps": theirs, "ratio": ratio, "low": ratio < RATIO_FLOOR}
                )  # fmt: skip
    return rows


def render(results: dict[str, Any]) -> str:
    lines = []
    for members in host_sets(results["tests"], list(results["hosts"])):
        rows = busbw_table(results["tests"], members)
        if not rows:
            continue
        host = ",".join(members)
        lines.append(f"host {host}: busbw GB/s (payload = torch.distributed NCCL, nccl = nccl-tests)")
        lines.append(f"{'op':<15} {'size':>11} {'payload':>9} {'nccl':>9} {'ratio':>6}")
        for op, size, mine, theirs in rows:
            ratio = f"{mine / theirs:.2f}" if mine and theirs else "-"
            lines.append(f"{op:<15} {size:>11} {_num(mine):>9} {_num(theirs):>9} {ratio:>6}")
        lines.extend(_training(results["tests"], host))
        lines.extend(_latency(results["tests"], host))
    return "\n".join(lines) + "\n"


def _latency(tests: list[dict[str, Any]], host: str) -> list[str]:
    out = []
    for test in tests:
        times = test.get("metrics", {}).get("time_us", {})
        spec = spec_of(test["name"])  # None: a recorded test this release does not know
        if spec is not None and spec.latency_table and host in test["hosts"]:
            for op, by_size in times.items():
                sizes = sorted(by_size, key=int)
                out.append(f"{op} latency us: " + ", ".join(f"{s} B {by_size[s]:.1f}" for s in sizes))
    return out


def _training(tests: list[dict[str, Any]], host: str) -> list[str]:
    out = []
    for test in tests:
        if _payload_test(test, "train") and host in test["hosts"]:
            m = test.get("metrics", {})
            unit = "tokens" if m.get("tokens_per_s_per_rank_min") is not None else "samples"
            per_gpu = _num(m.get(f"{unit}_per_s_per_rank_min"))
            out.append(
                f"{test['name']}: {test['status']}, {unit}/s/GPU {per_gpu}, "
                f"world {m.get('world_size')}, step {_num(m.get('step_time_s_median'), 4)} s, "
                f"scaling {_num(m.get('scaling_efficiency'), 3)}"
            )
    return out


def _num(value: float | None, digits: int = 1) -> str:
    return "-" if value is None else f"{value:.{digits}f}"
