"""Each failure in report.html: its likely cause from a small rule table, and a short redacted log excerpt;
and the likely cause of a bad part (bad_parts.py) from its failing figure or health problem."""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pav.secrets.redact import redact_string, redact_text

CORRUPTION = (
    "data corruption: a bad GPU (ECC/Xid errors: nvidia-smi -q -d ECC, dmesg) or a bad NVLink/InfiniBand link"
)
DEGRADED_LINK = (
    "degraded link: an NVLink down, a PCIe fallback (nvidia-smi topo -m), "
    "an InfiniBand port down or at a lower rate (ibstat), or the wrong NCCL_IB_HCA"
)
SLOW_TRAINING = (
    "slow training: throttled GPU clocks (nvidia-smi -q -d PERFORMANCE), CPU or NUMA binding, "
    "or the same link problems that lower bandwidth"
)
# A figure the run never produced names no hardware: what stopped it is in the test's reason and log.
NOT_MEASURED = (
    "not measured: the test did not produce this figure (it stopped early, ran other sizes or ops, or its "
    "baseline did not run); the test's reason and log excerpt say why"
)
NOT_LEARNING = "training did not learn: wrong numerics on a GPU, or a broken payload"
# (pattern on the test's reason, likely cause). First match wins, so the specific rules come first.
RULES: tuple[tuple[str, str], ...] = (
    # First: a test the signal cut short says nothing of its hosts, whatever else its reason names.
    (r"interrupted", "the run was interrupted (SIGINT/SIGTERM) before this test gave a result"),
    # Before the rest: the launcher named the rank that failed first, and the others' errors follow from it.
    (
        r"\(the first to fail\)",
        "a rank died first (its exit code or signal in the reason) and the other ranks lost it: see its "
        "host's log (a crash, the kernel's OOM killer in dmesg, a GPU fault) before the others' errors",
    ),
    (
        r"timeout|timed out",
        "a hang or a straggler: a rank stuck in a collective (a dead link, a peer that never joined) "
        "or one host far slower than the rest; compare the hosts' wall times and an NCCL_DEBUG=INFO log",
    ),
    (
        r"unreachable|left the run|no result came back|host \S+ (is )?down",
        "host down or unreachable over SSH: check that it is up, sshd answers, and its pinned host key",
    ),
    (
        r"wrong(_total)?[=\s]*[1-9]|#wrong|wrong elements|wrong result|out-of-bounds|replicas",
        CORRUPTION,
    ),
    (
        r"busbw[^;]*below|NCCL_TESTS_MIN_BW",
        DEGRADED_LINK,
    ),
    (
        r"(tokens|samples)_per_s\S*=.*below|scaling_efficiency\S*=.*below",
        SLOW_TRAINING,
    ),
    (r"loss_ratio\S*=.*above", NOT_LEARNING),
    (
        r"no threshold is set",
        "the profile has no gate for this test: add one to thresholds/PROFILE.yml or pick "
        "a profile that covers it (pav_threshold_profile)",
    ),
    (
        r"was not measured|not measured",
        "the gate's metric was not produced: the test ran other sizes or ops "
        "than the profile gates, or it stopped early",
    ),
    (r"rc=127|exited 127", "a command was not found on the host (rc 127): the tool is not installed there"),
    (
        r"ranks wrote a result|launcher failed|exited \d+|crash|not valid JSON",
        "a rank or the launcher crashed before reporting: see the log excerpt",
    ),
)
# A bad part's likely cause from its worst figure: (pattern on "PART METRIC", likely cause); first match wins.
FIGURE_RULES: tuple[tuple[str, str], ...] = (
    (
        r"burn_in_last_tflops",
        "the GPU fell behind under sustained load: another process on it (nvidia-smi lists them), cooling "
        "that saturates (temperature and clocks in the burn-in charts), or a power limit under load",
    ),
    (
        r"burn_in_throttled_windows",
        "the GPU's clocks were held back by hardware or heat under load: cooling, airflow, a power brake "
        "(nvidia-smi -q -d PERFORMANCE); the minute it began is in the reason",
    ),
    (
        r"burn_in_new_ecc|burn_in_fault_xids",
        "the GPU's memory or the GPU itself faulted under load: drain the node, reset the GPU and run the "
        "burn-in again; a repeat means an RMA (nvidia-smi -q -d ECC,ROW_REMAPPER)",
    ),
    (
        r"gemm_bf16_tflops",
        "the GPU computes slower than it should: another process on it (nvidia-smi lists them), clocks held "
        "back (nvidia-smi -q -d PERFORMANCE) or a capped power limit",
    ),
    (
        r"hbm_copy_gbps",
        "the GPU's memory is slower than it should be: another process on it, clocks held back, "
        "or memory errors (nvidia-smi -q -d ECC)",
    ),
    (
        r"(h2d|d2h)_gbps_rounds",
        "the GPU's host copies dip in some rounds and not others: a PCIe link that comes and goes "
        "(retraining, replays: the error_counters result, nvidia-smi -q -d PCIE), a marginal riser or slot",
    ),
    (
        r"h2d|d2h",
        "copies between the GPU and host memory are slow: PCIe trained below its generation or width "
        "(nvidia-smi -q -d PCIE), the wrong NUMA node, or another process copying",
    ),
    (
        r"p2p_gbps",
        "copies between these GPUs are slow: an NVLink down (nvidia-smi nvlink -s), peer access off "
        "(IOMMU, PCIe ACS), or a busy GPU at either end",
    ),
    (
        r"^host busbw",
        "the host's collectives are slow: a busy or slow GPU (its own line, if any), an NVLink down, "
        "peer-to-peer off (NCCL_P2P_DISABLE) or too few channels (NCCL_MAX_NCHANNELS)",
    ),
    (r"wrong_total", CORRUPTION),
    (
        r"nccl_transport",
        "NCCL did not run over the fabric the hosts are set up for (an HCA it did not find, NCCL_IB_DISABLE, "
        "or a fabric set up wrong): the line says what NCCL logged and the fix",
    ),
    (r"busbw", DEGRADED_LINK),
    (r"_per_s|scaling_efficiency", SLOW_TRAINING),
    (r"loss_ratio", NOT_LEARNING),
)
# gpu_health's problems, by what the problem says.
PROBLEM_RULES: tuple[tuple[str, str], ...] = (
    (r"available before the tests", "a user problem, not the hardware: another process holds the host's "
     "memory (a job that did not end, a data loader, a notebook); end it, then run again"),
    (r"PID \d+ .*holds|in use by no process", "a user problem, not the hardware: another process holds the "
     "GPU (a job that did not end, a notebook, someone else's run); end it, then run again"),
    (r"^SDC: ", "silent data corruption: the GPU computed another result from the same inputs; drain it and "
     "run the vendor's diagnostics (dcgmi diag -r 4), replace it if they or a re-run agree"),
    (r"pav_gpu_state\.|ECC disabled where", "a GPU setting not as the node policy expects: set it "
     "(nvidia-smi -pm 1; -mig 0; -e 1 and a reboot; -rac), or change pav_gpu_state if meant so"),
    (r"pav_expected_versions|other node\(s\) have|differs across the nodes", "software drift: install the "
     "same driver, CUDA, NCCL, torch, VBIOS and HCA firmware on every node, or pin pav_expected_versions"),
    (r"InfoROM", "a corrupted InfoROM: the board needs service (nvidia-smi -q -d INFOROM)"),
    (r"driver asks for", "the driver needs the GPU reset or the node rebooted: do that, then run again"),
    (r"GPU fabric", "the NVSwitch fabric did not take the GPU: check nvidia-fabricmanager (its service and "
     "log) and nvidia-smi -q's Fabric section"),
    (r"NVLink link \d+: .*(replay|recovery|CRC)", "a marginal NVLink link erring under traffic (nvidia-smi "
     "nvlink -e): reseat or replace the board, or its NVSwitch tray"),
    (r"PCIe replays|AER", "a marginal PCIe link: its riser, slot, seating or the GPU (nvidia-smi -q -d PCIE; "
     "the AER counters in sysfs)"),
    (r"link_downed|symbol_error|link_error_recovery|port_rcv_errors|buffer_overrun|went from ACTIVE",
     "a marginal InfiniBand or RoCE link: its cable, transceiver or switch port (perfquery, ibdiagnet)"),
    (r"NVLink link \d+ down", "an NVLink link down: reset the GPU; a link that stays down is a board or "
     "NVSwitch fault (nvidia-smi nvlink -s)"),
    (r"PCIe link trained", "a bad riser, slot or seating (nvidia-smi -q -d PCIE)"),
    (r"ECC|row remapping|Xid", "a failing GPU: drain it, reset it, and replace it if the errors return "
     "(nvidia-smi -q -d ECC,ROW_REMAPPER; dmesg)"),
    (r"thermal violation", "the GPU throttled for heat under load: cooling, airflow, fans or the inlet "
     "temperature (nvidia-smi -q -d TEMPERATURE,PERFORMANCE during a load)"),
    (r"sync-boost violation", "the GPU was held to a slower GPU of its sync-boost group under load: that "
     "GPU's own line, or the group's setting (nvidia-smi -q -d PERFORMANCE)"),
    (r"clocks held back", "cooling or power: the hardware slows the GPU (nvidia-smi -q -d PERFORMANCE)"),
    (r"power limit", "a power cap someone set (nvidia-smi -q -d POWER; nvidia-smi -pl restores it)"),
    (r"HCA is missing", "an HCA gone from the bus or its driver (lspci, ibstat)"),
    (r"DOWN|not active|Gb/sec", "an InfiniBand or RoCE port down or slow: its cable, transceiver or "
     "switch port (ibstat)"),
)  # fmt: skip
SHOWN = ("fail", "error", "interrupted")  # the statuses report.html lists under failures
EXCERPT_LINES = 20
EXCERPT_CHARS = 2400
_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
_ENV_TOKEN = re.compile(r"\b[A-Za-z_][A-Za-z0-9_]*=\S+")


@dataclass
class Failure:
    test: str
    hosts: list[str]
    status: str
    reason: str
    cause: str
    log: str  # run-dir path of the excerpt's log, or ""
    excerpt: str


def likely_cause(test: dict[str, Any]) -> str:
    reason = str(test.get("reason", ""))
    for pattern, cause in RULES:
        if re.search(pattern, reason, re.IGNORECASE):
            return cause
    if test.get("status") == "error":
        return "the test could not produce a result: see the log excerpt"
    return "see the reason and the log excerpt"


def figure_cause(part: str, metric: str) -> str:
    """The likely cause of a part's failing figure (part: "host", "fabric", a GPU or pair label)."""
    return _first(FIGURE_RULES, f"{part} {metric}") or "see the test's reason below"


def problem_cause(problem: str) -> str:
    return _first(PROBLEM_RULES, problem) or "see the host's facts (facts.gpus, facts.rdma)"


def _first(rules: tuple[tuple[str, str], ...], text: str) -> str:
    return next((cause for pattern, cause in rules if re.search(pattern, text)), "")


def failures(results: dict[str, Any], run_dir: Path, secrets: Iterable[str] = ()) -> list[Failure]:
    known = set(secrets)
    out = []
    for test in results.get("tests", []):
        if test.get("status") not in SHOWN:
            continue
        log = _log_of(test, run_dir)
        excerpt = excerpt_of(run_dir / log, known) if log else ""
        reason = redact_text(str(test.get("reason", "")), known)
        out.append(
            Failure(
                test["name"], test.get("hosts", []), test["status"], reason, likely_cause(test), log, excerpt
            )
        )
    return out


def _log_of(test: dict[str, Any], run_dir: Path) -> str:
    """The failing test's launcher log; the one the reason names first."""
    logs = [a for a in test.get("artifacts", []) if a.endswith("launcher.log")]
    named = [a for a in logs if a in str(test.get("reason", ""))]
    for path in named + logs:
        if (run_dir / path).is_file():
            return path
    return ""


def excerpt_of(path: Path, secrets: set[str]) -> str:
    """The log's last lines (where a crash or a hang shows), without colour codes or secrets."""
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return ""
    lines = [_ANSI.sub("", line).rstrip() for line in text.splitlines() if line.strip()]
    tail = "\n".join(lines[-EXCERPT_LINES:])[-EXCERPT_CHARS:]
    tail = redact_text(tail, secrets)
    return _ENV_TOKEN.sub(lambda m: redact_string(m.group(0)), tail)
