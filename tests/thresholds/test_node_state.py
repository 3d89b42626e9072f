"""The node's state in the verdict (issue 50): each GPU's settings and state against the node policy
(gpu_health), the same software on every node (software_versions), and the error counters' change over the
run (error_counters). Healthy facts are what real machines' NVML said (tests/thresholds/node_state.py); each
fault is one of them changed as the fault would change it, and FAILs naming the part."""

from __future__ import annotations

from typing import Any

import pytest

from pav.errors import PavError
from pav.judging import Judge
from pav.marking import decide
from pav.reporting import bad_parts, causes
from pav.results import HostRecord, TestResult
from pav.thresholds import counters, gpu_state, health, versions
from pav.thresholds.node_policy import NodePolicy, node_policy, recorded_policy
from pav.thresholds.violations import POLICIES, SHARE
from tests.thresholds.node_state import around_load, changed, recorded

HEALTHY = ["h100x2-idle-1.json", "h100x2-before-load.json", "h100x2-after-load.json", "h200x4-idle-1.json",
           "h200x4-before-load.json", "h200x4-after-load.json"]  # fmt: skip
GPU0_H100 = "GPU 0 (00000000:00:06.0, GPU-5c0fead6-1a7f-0807-ace6-56c58e58e7ea)"


def health_of(facts: dict[str, Any], policy: NodePolicy | None = None) -> TestResult:
    return health.judge_host("gpu-node", facts["gpus"], facts, policy)


def problems(result: TestResult) -> list[dict[str, str]]:
    return list(result.threshold.get("problems") or [])


@pytest.mark.parametrize("name", HEALTHY)
def test_real_machines_state_is_as_the_default_policy_expects(name: str) -> None:
    result = health_of(recorded(name))
    assert (result.status, problems(result)) == ("pass", [])


@pytest.mark.parametrize(
    ("where", "key", "value", "problem"),
    [
        ("state", "persistence_mode", "disabled",
         "persistence mode disabled (expected enabled; pav_gpu_state.persistence_mode)"),
        ("state", "mig_mode", "enabled", "MIG mode enabled (expected disabled; pav_gpu_state.mig_mode)"),
        ("ecc", "mode_current", "disabled", "ECC disabled (expected enabled; pav_gpu_state.ecc_mode)"),
        ("state", "app_clock_sm_mhz", 1410,
         "application SM clock 1410 MHz under its default 1980 MHz (pav_gpu_state.app_clocks)"),
    ],
)  # fmt: skip
def test_a_setting_not_as_the_policy_expects_fails_as_a_configuration_problem(
    where: str, key: str, value: Any, problem: str
) -> None:
    facts = changed(recorded("h100x2-idle-1.json"))
    facts["gpus"]["devices"][0][where][key] = value
    result = health_of(facts)
    assert result.status == "fail"
    assert problems(result) == [
        {"part": GPU0_H100, "problem": f"{GPU0_H100}: {problem}", "category": "config"}
    ]
    [part] = bad_parts.find({"tests": [vars(result)]})
    assert part.category == gpu_state.CATEGORY
    assert part.line().startswith(f"gpu-node {GPU0_H100} (a configuration problem): ")
    assert "nvidia-smi -pm 1" in part.worst.cause
    assert "configuration problem: " in decide.reason("r1", part, ("gpu_health",))
    # The policy says what is meant: any leaves the setting unjudged (set on every GPU: ECC that differs
    # across a host's GPUs fails whatever the policy).
    for dev in facts["gpus"]["devices"]:
        dev[where][key] = value
    loose = node_policy(
        dict.fromkeys(("persistence_mode", "mig_mode", "ecc_mode", "app_clocks"), "any"), {}, "-e"
    )
    assert health_of(facts, loose).status == "pass"


def test_a_gpu_without_mig_is_as_good_as_one_with_it_disabled() -> None:
    facts = changed(recorded("h100x2-idle-1.json"))
    facts["gpus"]["devices"][0]["state"]["mig_mode"] = "unsupported"
    assert health_of(facts).status == "pass"
    assert health_of(facts, node_policy({"mig_mode": "enabled"}, {}, "-e")).status == "fail"


def test_ecc_that_differs_across_a_hosts_gpus_fails_where_the_policy_leaves_it_open() -> None:
    facts = changed(recorded("h100x2-idle-1.json"))
    facts["gpus"]["devices"][1]["ecc"]["mode_current"] = "disabled"
    result = health_of(facts, node_policy({"ecc_mode": "any"}, {}, "-e"))
    [found] = problems(result)
    assert found["problem"].endswith("ECC disabled where the host's other GPUs have it enabled")
    assert found["part"].startswith("GPU 1 (") and found["category"] == "config"


@pytest.mark.parametrize(
    ("key", "value", "problem"),
    [
        ("inforom_valid", False, "InfoROM corrupted (NVML's validation failed): the board needs service"),
        ("recovery_action", 2, "the driver asks for a node reboot"),
        ("fabric", {"state": 2, "status": 0, "clique_id": 0, "cluster_uuid": "", "health_mask": 0},
         "GPU fabric in progress, not completed"),
        ("fabric", {"state": 3, "status": 17, "clique_id": 0, "cluster_uuid": "", "health_mask": 0},
         "GPU fabric registration failed (status 17: see the Fabric Manager log)"),
        ("fabric", {"state": 3, "status": 0, "clique_id": 0, "cluster_uuid": "", "health_mask": 0b1001},
         "GPU fabric reports degraded bandwidth (health mask 0x9)"),
    ],
)  # fmt: skip
def test_a_gpu_state_fault_fails_naming_the_gpu_as_hardware(key: str, value: Any, problem: str) -> None:
    facts = changed(recorded("h200x4-idle-1.json"))
    facts["gpus"]["devices"][2]["state"][key] = value
    [found] = problems(health_of(facts))
    assert found["part"].startswith("GPU 2 (") and "category" not in found
    assert found["problem"].endswith(f": {problem}")
    assert causes.problem_cause(found["problem"]) != causes.problem_cause("anything else")


@pytest.mark.parametrize("fabric", [None, {"state": 0, "status": None, "health_mask": None}])
def test_a_board_without_an_nvswitch_fabric_is_no_problem(fabric: Any) -> None:
    """gpud PR #1147 flagged an H100 PCIe's "not supported" fabric as unhealthy: it is not."""
    facts = changed(recorded("h100x2-idle-1.json"))
    facts["gpus"]["devices"][0]["state"]["fabric"] = fabric
    assert health_of(facts).status == "pass"


def test_the_policy_settings_are_checked_naming_the_key() -> None:
    with pytest.raises(PavError, match=r"site\.yml: pav_gpu_state has no setting 'persistence'"):
        node_policy({"persistence": "enabled"}, {}, "site.yml")
    with pytest.raises(
        PavError, match=r"pav_gpu_state.app_clocks must be one of default, max, any, got 'high'"
    ):
        node_policy({"app_clocks": "high"}, {}, "-e")
    with pytest.raises(PavError, match=r"pav_expected_versions has no component 'cuda'"):
        node_policy({}, {"cuda": "12.8"}, "-e")
    policy = node_policy({"mig_mode": "any"}, {"driver": "580.159.04"}, "-e")
    assert recorded_policy(policy.record()) == policy
    assert recorded_policy(None) == NodePolicy()


# --- software_versions -------------------------------------------------------------------------------


def nodes(*facts: dict[str, Any]) -> dict[str, HostRecord]:
    return {f"node-{i}": HostRecord(f"node-{i}", facts=f) for i, f in enumerate(facts)}


def test_nodes_of_one_release_pass_and_the_table_shows_what_was_compared() -> None:
    [result] = versions.versions_results(
        nodes(recorded("h100x2-idle-1.json"), recorded("h100x2-idle-2.json"))
    )
    assert (result.name, result.status, result.hosts) == ("software_versions", "pass", ["node-0", "node-1"])
    table = result.threshold["versions"]
    assert table["driver"] == {"node-0": "580.159.04", "node-1": "580.159.04"}
    assert set(table) == {"driver", "cuda_driver", "vbios", "kernel", "torch", "nccl"}  # no HCA on these


def test_a_node_whose_driver_differs_from_the_others_is_named() -> None:
    odd = changed(recorded("h200x4-idle-1.json"))
    odd["gpus"]["driver"] = "575.57.08"
    [result] = versions.versions_results(
        nodes(recorded("h200x4-idle-1.json"), recorded("h200x4-idle-2.json"), odd)
    )
    assert result.status == "fail"
    problem = "node-2: driver 575.57.08 where 2 other node(s) have 580.159.04"
    assert problems(result) == [{"part": "node-2", "problem": problem, "category": "config"}]
    [part] = bad_parts.find({"tests": [vars(result)]})
    assert "software drift" in part.worst.cause


def test_two_nodes_that_differ_are_both_named_and_a_pin_names_the_one_off_it() -> None:
    other = changed(recorded("h100x2-idle-1.json"))
    other["torch"]["nccl"] = "2.27.3"
    pair = nodes(recorded("h100x2-idle-1.json"), other)
    [result] = versions.versions_results(pair)
    assert [p["part"] for p in problems(result)] == ["node-0", "node-1"]
    assert (
        problems(result)[0]["problem"]
        == "node-0: nccl differs across the nodes (node-0 2.28.9, node-1 2.27.3)"
    )
    [pinned] = versions.versions_results(pair, node_policy({}, {"nccl": "2.28.9"}, "-e"))
    assert problems(pinned) == [{"part": "node-1", "problem": "node-1: nccl 2.27.3, expected 2.28.9 "
                                 "(pav_expected_versions.nccl)", "category": "config"}]  # fmt: skip


def test_one_node_is_compared_with_the_pins_only() -> None:
    one = nodes(recorded("h100x2-idle-1.json"))
    assert versions.versions_results(one) == []
    [result] = versions.versions_results(one, node_policy({}, {"kernel": "6.8.0"}, "-e"))
    assert (
        result.reason == "node-0: kernel 6.18.44-fc-v657-gpu, expected 6.8.0 (pav_expected_versions.kernel)"
    )


# --- error_counters ----------------------------------------------------------------------------------


def counted(facts: dict[str, Any]) -> TestResult:
    [result] = counters.counters_results({"gpu-node": HostRecord("gpu-node", facts=facts)})
    return result


@pytest.mark.parametrize("machine", ["h100x2", "h200x4"])
def test_real_machines_counters_over_a_30_s_all_reduce_pass(machine: str) -> None:
    """The 4x H200's CRC-data grew by up to ~500 per link over the load (about 16/s), under DCGM's 100/s."""
    result = counted(around_load(machine))
    assert (result.name, result.status, problems(result)) == ("error_counters", "pass", [])
    assert result.metrics == {"seconds_between_reads": 35.0, "problems": 0}


def gpu0_counters(facts: dict[str, Any]) -> dict[str, Any]:
    return facts["gpus_after"]["devices"][0]["counters"]


@pytest.mark.parametrize(
    ("change", "problem"),
    [
        (lambda c: c["nvlink"][3].update(replay=c["nvlink"][3]["replay"] + 1),
         "NVLink link 3: 1 replay errors during the run (any fails)"),
        (lambda c: c["nvlink"][0].update(recovery=2),
         "NVLink link 0: 2 recovery errors during the run (any fails)"),
        (lambda c: c["nvlink"][1].update(crc_data=c["nvlink"][1]["crc_data"] + 3500),
         "NVLink link 1: 3500 CRC errors in 35 s (>= 100/s fails)"),
        (lambda c: c.update(pcie_replay=81), "81 PCIe replays during the run (> 80 fails)"),
        (lambda c: c.update(aer={"correctable": 0, "nonfatal": 1, "fatal": 0}),
         "1 nonfatal PCIe AER errors during the run (any fails)"),
    ],
)  # fmt: skip
def test_a_gpu_counter_that_grew_past_its_gate_fails_naming_the_gpu_and_link(
    change: Any, problem: str
) -> None:
    facts = changed(around_load("h100x2"))
    if "AER" in problem:
        facts["gpus"]["devices"][0]["counters"]["aer"] = {"correctable": 0, "nonfatal": 0, "fatal": 0}
    change(gpu0_counters(facts))
    result = counted(facts)
    assert result.status == "fail"
    assert problems(result) == [{"part": GPU0_H100, "problem": f"{GPU0_H100}: {problem}"}]
    [part] = bad_parts.find({"tests": [vars(result)]})
    assert part.line().startswith(f"gpu-node {GPU0_H100}: ") and "marginal" in part.worst.cause


def test_counts_at_their_gates_pass() -> None:
    facts = changed(around_load("h100x2"))
    gpu0_counters(facts)["pcie_replay"] = 80
    link = gpu0_counters(facts)["nvlink"][1]
    link["crc_data"] += 3499  # 99.97/s
    assert counted(facts).status == "pass"


def port(state: str = "ACTIVE", **counts: int) -> dict[str, Any]:
    names = (
        "symbol_error",
        "link_downed",
        "link_error_recovery",
        "port_rcv_errors",
        "excessive_buffer_overrun_errors",
    )
    return {"device": "mlx5_3", "port": 1, "state": state, "rate": "400 Gb/sec (4X NDR)",
            "link_layer": "InfiniBand", "fw_ver": "28.39.1002",
            "counters": {n: counts.get(n, 0) for n in names}}  # fmt: skip


@pytest.mark.parametrize(
    ("after", "problem"),
    [
        (port(link_downed=1), "mlx5_3 port 1: link_downed +1 during the run (any fails)"),
        (port(symbol_error=400), "mlx5_3 port 1: symbol_error +400 in 35 s (> 10/s fails)"),
        (port(link_error_recovery=3), "mlx5_3 port 1: link_error_recovery +3 in 35 s (> 5/min fails)"),
        (port("DOWN"), "mlx5_3 port 1: went from ACTIVE to DOWN during the run"),
    ],
)
def test_an_rdma_port_that_erred_during_the_run_fails_naming_it(after: dict[str, Any], problem: str) -> None:
    facts = changed(around_load("h200x4"))
    facts["gpus"]["rdma"], facts["gpus_after"]["rdma"] = [port()], [after]
    result = counted(facts)
    assert problems(result) == [{"part": "mlx5_3 port 1", "problem": problem}]
    facts["gpus_after"]["rdma"] = [port(symbol_error=300)]  # 8.6/s: under NVSentinel's 10/s
    assert counted(facts).status == "pass"


def test_no_second_read_no_counters_no_result() -> None:
    facts = recorded("h100x2-idle-1.json")
    assert counters.counters_results({"a": HostRecord("a", facts=facts)}) == []
    cpu = {"gpus": {"source": "none", "devices": [], "rdma": []}, "gpus_after": {"source": "none"}}
    assert counters.counters_results({"b": HostRecord("b", facts=cpu)}) == []
    assert not counters.has_counters(cpu["gpus"]) and counters.has_counters(facts["gpus"])


# --- clock violation time over the run (issue 63) -----------------------------------------------------------

GPU2_H200 = "GPU 2 (00000000:00:08.0, GPU-e23e0990-0cf6-858d-d4b7-19002afa3d2f)"
RUN_S = 165.9  # the seconds between the reads, as a default-set run's


def with_violations(after_s: dict[str, float], gpu: int = 2) -> dict[str, Any]:
    """The 4x H200's reads around its load, each GPU's violation counters added as NVML gives them (ns since
    the driver loaded: some power and low-utilization time already); `gpu` held back after_s more seconds
    per policy by the second read."""
    facts = changed(around_load("h200x4"))
    facts["gpus_after"]["read_at"] = RUN_S
    since_load = {"power": 812.4, "low_utilization": 3600.0}
    for read, extra in (("gpus", {}), ("gpus_after", after_s)):
        for dev in facts[read]["devices"]:
            held = {p: since_load.get(p, 0.0) + (extra.get(p, 0.0) if dev["index"] == gpu else 0.0)
                    for p in POLICIES}  # fmt: skip
            dev["counters"]["violations"] = {f"{p}_ns": round(s * 1e9) for p, s in held.items()}
            dev["counters"]["violations"]["not_supported"] = []
    return facts


@pytest.mark.parametrize(
    ("policy", "problem"),
    [
        ("thermal", "thermal violation 14.2 s of the 165.9 s run (8.6%): the GPU held its clocks back for "
                    "heat under load"),
        ("sync_boost", "sync-boost violation 14.2 s of the 165.9 s run (8.6%): the GPU held its clocks to "
                       "a slower GPU of its sync-boost group"),
    ],
)  # fmt: skip
def test_a_gpu_held_back_for_heat_or_sync_boost_under_load_fails_naming_it(policy: str, problem: str) -> None:
    result = counted(with_violations({policy: 14.2, "power": 120.0}))
    assert result.status == "fail"
    assert problems(result) == [{"part": GPU2_H200, "problem": f"{GPU2_H200}: {problem}"}]
    assert result.metrics["violation_s"]["2"][policy] == 14.2
    [part] = bad_parts.find({"tests": [vars(result)]})
    assert part.line().startswith(f"gpu-node {GPU2_H200}: ") and "under load" in part.worst.cause


def test_power_cap_time_is_recorded_not_judged() -> None:
    """A GPU at its power limit under dense GEMMs is how it is meant to run: 150 of 165.9 s passes."""
    result = counted(with_violations({"power": 150.0, "low_utilization": 15.0, "board_limit": 3.0}))
    assert (result.status, problems(result)) == ("pass", [])
    assert result.metrics["violation_s"]["2"] == {
        "power": 150.0, "thermal": 0.0, "sync_boost": 0.0, "board_limit": 3.0, "low_utilization": 15.0,
    }  # fmt: skip
    assert result.metrics["violation_s"]["0"]["power"] == 0.0


def test_heat_up_to_one_percent_of_the_run_passes() -> None:
    assert SHARE == 0.01
    assert counted(with_violations({"thermal": 1.659})).status == "pass"  # 1.0% of 165.9 s
    assert counted(with_violations({"thermal": 1.7})).status == "fail"


def test_reads_without_violation_counters_judge_none() -> None:
    """Facts read before issue 63 (the fixtures' recordings as they are), or a policy NotSupported on the
    board (null both times): nothing to judge, nothing recorded."""
    plain = counted(around_load("h200x4"))
    assert plain.status == "pass" and "violation_s" not in plain.metrics
    older_first = with_violations({"thermal": 30.0})
    for dev in older_first["gpus"]["devices"]:
        del dev["counters"]["violations"]
    assert counted(older_first).status == "pass" and "violation_s" not in counted(older_first).metrics
    unsupported = with_violations({})
    for read in ("gpus", "gpus_after"):
        unsupported[read]["devices"][2]["counters"]["violations"].update(thermal_ns=None)
    assert "thermal" not in counted(unsupported).metrics["violation_s"]["2"]


def test_violation_counters_alone_make_a_read_worth_judging() -> None:
    facts = with_violations({"thermal": 30.0})
    for read in ("gpus", "gpus_after"):
        for dev in facts[read]["devices"]:
            dev["counters"] |= {"pcie_replay": None, "nvlink": [], "aer": {}}
    assert counters.has_counters(facts["gpus"])
    assert counted(facts).status == "fail"


# --- in the run's judgement ----------------------------------------------------------------------------


def test_the_judge_gives_every_facts_result_and_a_recheck_sends_traffic_for_the_counters() -> None:
    hosts = nodes(around_load("h100x2"), around_load("h100x2"))
    judge = Judge.make("auto", hosts, policy=node_policy({}, {"driver": "580.159.04"}, "-e"))
    found = sorted((t.name, tuple(t.hosts), t.status) for t in judge.health())
    assert found == [
        ("error_counters", ("node-0",), "pass"), ("error_counters", ("node-1",), "pass"),
        ("gpu_health", ("node-0",), "pass"), ("gpu_health", ("node-1",), "pass"),
        ("software_versions", ("node-0", "node-1"), "pass"),
    ]  # fmt: skip
    recheck = {"node-0": ("software_versions", "gpu_health", "error_counters", "ddp_cpu_train")}
    assert decide.to_launch(recheck) == ("torch_nccl_allreduce", "ddp_cpu_train")
