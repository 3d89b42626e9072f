"""The validation tests the driver knows: what each runs, where, and what it needs."""

from __future__ import annotations

import os
from dataclasses import dataclass, field, replace
from typing import Literal

from pav.errors import PavError

Scope = Literal["host", "cluster"]
# slurm: a check of Slurm itself; plain: FOR TESTING ONLY, ranks of plain Python (pav_payload.plain, no torch)
Launcher = Literal["torchrun", "nccl_tests", "mpirun", "slurm", "plain"]

# nccl-tests sizes from the field's habits: 512M to 8G by factor 2.
BIG_SIZES = "512M,1G,2G,4G,8G"
# A transformer big enough that GPU throughput, not launch overhead, sets tokens/s.
GPU_MODEL = ("--model", "transformer", "--d-model", "1024", "--layers", "8", "--seq-len", "1024",
             "--batch-size", "8", "--steps", "30")  # fmt: skip
FSDP_ARGS = (
    "train",
    "--mode",
    "fsdp",
    "--model",
    "transformer",
    "--size",
    "1b",
    "--fsdp-bf16",
    "--steps",
    "30",
)
# ResNet-50 at ImageNet shape (224x224, 1000 classes) on synthetic images. Batch 256 per GPU, as the
# field's ResNet-50 benchmarks run it: at 64 a step (33 ms on H200) is bound by kernel launches, so two
# processes side by side lost 6% with no communication at all and DDP's overlap 20%; at 256 (117 ms) the GPU
# is the bound and the same loss is 0.2% (scripts/bench-ddp, docs/benchmarks.md "Issue 46").
RESNET_MODEL = ("--model", "resnet50", "--batch-size", "256", "--steps", "30")
# The small-size sweep: latency, not bandwidth, dominates here (8 B to 2 MiB by factor 8).
SMALL_SIZES = "8,64,512,4K,32K,256K,2M"
OTHER_OPS = "all_gather,reduce_scatter,all_to_all,broadcast,send_recv"
NCCL_TESTS_SWEEP = ("-b", "512M", "-e", "8G", "-f", "2")
# The host-scope nccl-tests: each binary's op (nccl-tests' name) and the payload's name for that op.
NCCL_TESTS_OPS = (("all_reduce", "all_reduce"), ("all_gather", "all_gather"),
                  ("reduce_scatter", "reduce_scatter"), ("alltoall", "all_to_all"), ("sendrecv", "send_recv"),
                  ("broadcast", "broadcast"))  # fmt: skip
# Inter-node gates hold the algorithm fixed: Ring crosses the fabric at the HCAs' rate, while NCCL's own
# choice (tree, NVLS, CollNet) varies with size and version and would move the number the gate judges.
RING = {"NCCL_ALGO": "Ring"}
# NCCL's INFO lines of what it chose (network, paths, NVLS; pav.nccl_transport reads them), only from the
# tests whose transport is judged: INIT and NET alone keep the log to a few lines per rank and channel.
NCCL_CHOICES_LOGGED = {"NCCL_DEBUG": "INFO", "NCCL_DEBUG_SUBSYS": "INIT,NET"}


def gloo(ops: str, sizes: str) -> tuple[str, ...]:
    """The payload's collectives on CPU processes (gloo), results checked."""
    return ("collectives", "--backend", "gloo", "--ops", ops, "--sizes", sizes)


@dataclass(frozen=True)
class TestSpec:
    name: str
    description: str
    launcher: Launcher
    scope: Scope
    needs_gpu: bool
    args: tuple[str, ...] = field(default_factory=tuple)
    procs: int | None = None  # processes per host; None: every GPU (GPU tests) or pav_cpu_procs_per_host
    env: dict[str, str] = field(default_factory=dict)  # set for every process of the launch
    gates_of: str = ""  # judge by another test's gates (test-only variants of a real test)
    # GPUs a host needs: two ranks of a collective or DDP on one GPU prove nothing (and NCCL refuses them).
    min_gpus: int = 1
    # What the rest of the driver knows of a test, kept here so that a test is one unit: no other module
    # matches on its name (tests/driver/test_catalog_names.py holds them to it).
    #
    # The ops (the payload's names: all_reduce, all_to_all, send_recv, ...) of a host-scope collective
    # test that are gated on the host's bus limit (thresholds/derive.py: NVLink or PCIe), and where each
    # op's busbw is in its metrics: per op (the payload measures several: busbw_gbps.<op>.<size>) or not
    # (nccl-tests runs one op: busbw_gbps.<size>).
    busbw_ops: tuple[str, ...] = ()
    busbw_per_op: bool = True
    # A cluster-scope collective test gated on the fabric between hosts (derive_fabric: the slowest
    # host's RDMA ports): its busbw metric without the size, e.g. busbw_gbps.all_reduce.
    inter_node_metric: str = ""
    # Scaling efficiency, a metric of two tests (thresholds/scaling.py). Host scope: this DDP test's
    # per-GPU throughput over the 1-GPU run of scaling_baselines[0] on the same host (scaling_efficiency).
    # Cluster scope: its per-GPU throughput over the slowest host's own run of the first of
    # scaling_baselines that host did not skip (1-GPU hosts skip DDP) (scaling_efficiency_nodes).
    scaling_baselines: tuple[str, ...] = ()
    scaling_throughput: str = ""  # the throughput compared: tokens_per_s (language models), samples_per_s
    # A Slurm check (launcher slurm): the pav_payload.slurm_check subcommand its tasks run.
    slurm_check: str = ""
    # Run on the first (submitting) host alone, before any job and outside one: what sinfo/scontrol say
    # of the whole cluster needs no job, nor the shared folder; it is told how many nodes to expect.
    slurm_check_alone: bool = False
    # One task per node instead of one per GPU (or per pav_cpu_procs_per_host): what it checks is the
    # node's view of the shared folder, not each rank's.
    slurm_check_per_node: bool = False
    # reporting/compare.py prints its time_us per op and size beside the busbw table (a latency sweep).
    latency_table: bool = False
    # Its median throughput moves more between healthy runs than the faults it is for (FSDP: 9% on one
    # H200): only its steady figure (the 20th-percentile step) is compared across hosts (thresholds/fleet.py).
    steady_only: bool = False
    # A burn-in (pav_payload burn): its length comes from --burn-in / pav_burn_in_s (with_burn_in), its
    # per-GPU time series are judged by the burn-in gates (thresholds/burn_in.py), the report plots them.
    burn_in: bool = False
    # Runs the SDC check (pav_payload sdc.py): the FOR TESTING fault PAV_FAULT_SDC_GPU reaches it.
    sdc: bool = False
    # Sends traffic over every link of the host's GPUs: a recheck of a node marked for error_counters (the
    # counters' change over a run, thresholds/counters.py) runs these to see whether they still grow.
    link_traffic: bool = False
    # Measures each GPU and each GPU pair alone (pav_payload probe): its figures are judged by the gates
    # derived per GPU and per pair (thresholds/derive.py, relative.py) and drawn as the report's GPU grid.
    per_gpu_probe: bool = False
    # NCCL logs what it chose (NCCL_CHOICES_LOGGED in env): its log's INFO lines are recorded as the test's
    # nccl_transport, and the network between hosts is held to their fabric (thresholds/transport.py).
    nccl_transport: bool = False

    @property
    def payload(self) -> str:
        """The pav_payload subcommand a torchrun test runs (collectives, train, probe); "" for the others."""
        return self.args[0] if self.launcher == "torchrun" and self.args else ""

    @property
    def k8s_kind(self) -> str:
        """How a k8s run starts this test, whichever Kubeflow API runs it (pav.k8s.job_api maps it to a
        kind): "torch" (GPU torchrun tests) or "mpi" (nccl-tests); "" for a test the k8s platform cannot
        run (a CPU test)."""
        return K8S_KINDS.get(self.launcher, "") if self.needs_gpu else ""


K8S_KINDS = {"torchrun": "torch", "nccl_tests": "mpi"}
# The SDC check's bitwise equality needs cuBLAS's deterministic workspace, set before CUDA starts (a suite
# of its own: the other tests keep cuBLAS's default); GPUs numbered as NVML numbers them.
SDC_ENV = {"CUBLAS_WORKSPACE_CONFIG": ":4096:8", "CUDA_DEVICE_ORDER": "PCI_BUS_ID"}


def k8s_job_kind(spec: TestSpec) -> str:
    """The spec's k8s job flavor (torch, mpi), or the one line that takes a CPU test out of a k8s run: asked
    when the run's inputs are resolved (before anything is provisioned) and again when jobs are planned."""
    if not spec.k8s_kind:
        raise PavError(
            f"test {spec.name} runs through {spec.launcher} on CPUs; the k8s platform runs GPU torchrun "
            f"tests and nccl-tests only: take it out of pav_tests"
        )
    return spec.k8s_kind


CATALOG: dict[str, TestSpec] = {
    spec.name: spec
    for spec in (
        TestSpec(
            "torch_gloo_allreduce",
            "torch gloo all_reduce, result checked, on each host (CPU processes)",
            "torchrun",
            "host",
            False,
            gloo("all_reduce", "1K,64K,1M"),
        ),
        TestSpec(
            "ddp_cpu_train",
            "a few DDP steps of a small model on CPU; loss must fall, replicas stay equal",
            "torchrun",
            "host",
            False,
            ("train", "--model", "mlp", "--mode", "ddp", "--steps", "20", "--backend", "gloo"),
        ),
        TestSpec(
            "torch_gloo_collectives_multi",
            "torch gloo collectives across all hosts through torchrun c10d rendezvous, results checked",
            "torchrun",
            "cluster",
            False,
            gloo("all_reduce,all_gather,broadcast", "1K,1M"),
        ),
        TestSpec(
            "ddp_cpu_train_multi",
            "DDP steps across all hosts through torchrun c10d rendezvous; loss must fall",
            "torchrun",
            "cluster",
            False,
            ("train", "--model", "mlp", "--mode", "ddp", "--steps", "20", "--backend", "gloo"),
            scaling_baselines=("ddp_cpu_train",),
            scaling_throughput="samples_per_s",
        ),
        TestSpec(
            "mpi_allreduce",
            "MPI_Allreduce across all hosts through mpirun over SSH, result checked",
            "mpirun",
            "cluster",
            False,
            ("pav_mpi_allreduce",),
        ),
        TestSpec(
            "torch_nccl_allreduce",
            "torch NCCL all_reduce over all GPUs of each host, 512M-8G, result checked",
            "torchrun",
            "host",
            True,
            ("collectives", "--backend", "nccl", "--ops", "all_reduce", "--sizes", BIG_SIZES),
            min_gpus=2,
            busbw_ops=("all_reduce",),
            link_traffic=True,
        ),
        TestSpec(
            "torch_nccl_collectives",
            "torch NCCL all_gather, reduce_scatter, all_to_all, broadcast, send_recv over all GPUs, 512M-8G",
            "torchrun",
            "host",
            True,
            ("collectives", "--backend", "nccl", "--ops", OTHER_OPS, "--sizes", BIG_SIZES),
            min_gpus=2,
            busbw_ops=tuple(OTHER_OPS.split(",")),
        ),
        TestSpec(
            "torch_nccl_latency",
            "torch NCCL all_reduce latency over all GPUs, 8 B-2 MiB, 50 timed iterations per size",
            "torchrun",
            "host",
            True,
            (
                "collectives",
                "--backend",
                "nccl",
                "--ops",
                "all_reduce",
                "--sizes",
                SMALL_SIZES,
                "--warmup",
                "10",
                "--iters",
                "50",
            ),
            min_gpus=2,
            latency_table=True,
        ),
        TestSpec(
            "gpu_probe",
            "a process per GPU: GEMM, HBM copy at once; host copies alone and at once; each GPU pair's copy",
            "torchrun",
            "host",
            True,
            ("probe",),
            procs=1,  # it starts a process per GPU itself (probe_workers.py), then measures each pair alone
            per_gpu_probe=True,
        ),
        TestSpec(
            "gpu_burn",
            "burn-in (--burn-in): bf16 GEMM and HBM load on every GPU, NCCL all_reduce checks, NVML sampled, "
            "SDC at start and end; per-GPU gates on the time series",
            "torchrun",
            "host",
            True,
            ("burn",),
            env=SDC_ENV,
            burn_in=True,
            sdc=True,
        ),
        TestSpec(
            "sdc_check",
            "silent data corruption: a seeded GEMM chain on each GPU, bitwise equal over repeats and GPUs",
            "torchrun",
            "host",
            True,
            ("sdc",),
            env=SDC_ENV,
            sdc=True,
        ),
        TestSpec(
            "train_gpu_single",
            "1-GPU baseline: a transformer on synthetic tokens, tokens/s",
            "torchrun",
            "host",
            True,
            ("train", "--mode", "single", *GPU_MODEL),
            procs=1,
        ),
        TestSpec(
            "train_gpu_ddp",
            "DDP of the same transformer over all GPUs of a host: tokens/s/GPU and scaling vs 1 GPU",
            "torchrun",
            "host",
            True,
            ("train", "--mode", "ddp", *GPU_MODEL),
            min_gpus=2,
            scaling_baselines=("train_gpu_single",),
            scaling_throughput="tokens_per_s",
        ),
        TestSpec(
            "train_gpu_resnet50_single",
            "1-GPU baseline: ResNet-50 on synthetic 224x224 images, samples/s",
            "torchrun",
            "host",
            True,
            ("train", "--mode", "single", *RESNET_MODEL),
            procs=1,
        ),
        TestSpec(
            "train_gpu_resnet50_ddp",
            "DDP of ResNet-50 over all GPUs of a host: samples/s/GPU and scaling vs 1 GPU",
            "torchrun",
            "host",
            True,
            ("train", "--mode", "ddp", *RESNET_MODEL),
            min_gpus=2,
            scaling_baselines=("train_gpu_resnet50_single",),
            scaling_throughput="samples_per_s",
        ),
        TestSpec(
            "train_gpu_fsdp",
            "FSDP2 of a ~1.1B-parameter transformer over all GPUs of a host (bf16 compute): tokens/s/GPU",
            "torchrun",
            "host",
            True,
            FSDP_ARGS,
            # One rank is a valid FSDP run (nothing to shard over): a 1-GPU node measures the baseline that
            # train_gpu_fsdp_multi's node scaling divides by.
            steady_only=True,
        ),
        TestSpec(
            "torch_nccl_allreduce_multi",
            "torch NCCL all_reduce over every GPU of every host (inter-node, NCCL_ALGO=Ring), 512M-8G",
            "torchrun",
            "cluster",
            True,
            ("collectives", "--backend", "nccl", "--ops", "all_reduce", "--sizes", BIG_SIZES),
            env=RING | NCCL_CHOICES_LOGGED,
            inter_node_metric="busbw_gbps.all_reduce",
            nccl_transport=True,
        ),
        TestSpec(
            "train_gpu_ddp_multi",
            "DDP of train_gpu_ddp's transformer over every GPU of every host: tokens/s/GPU, vs 1 node",
            "torchrun",
            "cluster",
            True,
            ("train", "--mode", "ddp", *GPU_MODEL),
            # 1-GPU nodes run no DDP of their own: their 1-GPU run of the same model is the node's figure.
            scaling_baselines=("train_gpu_ddp", "train_gpu_single"),
            scaling_throughput="tokens_per_s",
        ),
        TestSpec(
            "train_gpu_fsdp_multi",
            "FSDP2 of train_gpu_fsdp's ~1.1B transformer over every GPU of every host: scaling vs 1 node",
            "torchrun",
            "cluster",
            True,
            FSDP_ARGS,
            scaling_baselines=("train_gpu_fsdp",),
            scaling_throughput="tokens_per_s",
        ),
        TestSpec(
            "nccl_tests_all_reduce_multi",
            "nccl-tests all_reduce_perf under mpirun, a rank per GPU of every host (NCCL_ALGO=Ring), 512M-8G",
            "nccl_tests",
            "cluster",
            True,
            ("all_reduce_perf", *NCCL_TESTS_SWEEP),
            env=RING | NCCL_CHOICES_LOGGED,
            inter_node_metric="busbw_gbps",
            nccl_transport=True,
        ),
        *(
            TestSpec(
                f"nccl_tests_{op}",
                f"nccl-tests {op}_perf over all GPUs of each host, 512M-8G",
                "nccl_tests",
                "host",
                True,
                (f"{op}_perf", *NCCL_TESTS_SWEEP),
                min_gpus=2,
                busbw_ops=(payload_op,),
                busbw_per_op=False,
            )
            for op, payload_op in NCCL_TESTS_OPS
        ),
        # Slurm's own checks (--launcher slurm only; docs/slurm.md): pav_payload.slurm_check in every task.
        TestSpec(
            "slurm_cluster_state",
            "sinfo/scontrol before any job: every node idle, none drained or down",
            "slurm",
            "cluster",
            False,
            slurm_check="cluster-state",
            slurm_check_alone=True,
        ),
        TestSpec(
            "slurm_cpu_binding",
            "each task of an srun step is bound to exactly its --cpus-per-task CPUs",
            "slurm",
            "cluster",
            False,
            slurm_check="cpu-binding",
        ),
        TestSpec(
            "slurm_gpu_binding",
            "each task sees exactly its GPU (CUDA_VISIBLE_DEVICES, nvidia-smi in the step)",
            "slurm",
            "cluster",
            True,
            slurm_check="gpu-binding",
        ),
        TestSpec(
            "slurm_shared_fs",
            "a file the batch script writes on the first node is read on every node",
            "slurm",
            "cluster",
            False,
            slurm_check="shared-fs",
            slurm_check_per_node=True,
        ),
    )
}

# The burn-in test --burn-in adds to a run.
BURN_IN = "gpu_burn"
# FOR TESTING ONLY: the local GPU (its local rank) whose SDC check flips one element (docs/thresholds.md).
SDC_FAULT_ENV = "PAV_FAULT_SDC_GPU"

# What a run tests where pav_tests is not set (settings.py; docs/configuration.md).
DEFAULT_TESTS = ("torch_gloo_allreduce", "ddp_cpu_train", "torch_nccl_allreduce", "nccl_tests_all_reduce")


# FOR TESTING ONLY (tests/faults): launches that hang until their timeout. Known only with PAV_FAULT_TESTS=1.
HANG = (*gloo("all_reduce", "1K"), "--inject-hang")
CPU_SDC = ("--sdc-n", "32", "--sdc-layers", "3", "--sdc-reps", "4")
CPU_BURN = ("--window-s", "1", "--sample-s", "0.5", "--gemm-n", "64", "--hbm-mib", "1",
            "--allreduce-mib", "0.01", *CPU_SDC)  # fmt: skip
EXIT = (*gloo("all_reduce", "1K"), "--inject-exit", "1")
PLANTED_SYSFS = (
    "/srv/pav-shared/pav-test-sysfs"  # fault_plain_link_downed: where its test plants a sysfs tree
)
FAULT_TESTS: dict[str, TestSpec] = {
    spec.name: spec
    for spec in (
        TestSpec("fault_hang", "FOR TESTING: rank 1 hangs", "torchrun", "host", False, (*HANG, "1")),
        TestSpec("fault_hang_multi", "FOR TESTING: rank 0 hangs", "torchrun", "cluster", False, (*HANG, "0")),
        TestSpec(
            "fault_rank_exit",
            "FOR TESTING: rank 1 exits with code 3",
            "torchrun",
            "host",
            False,
            EXIT,
        ),
        # CPU flavours of the burn-in and the SDC check (gloo, fp32, tiny sizes), judged by the real ones'
        # gates: the driver end to end on a machine without GPUs.
        TestSpec(
            "fault_burn_cpu",
            "FOR TESTING: gpu_burn on CPU ranks",
            "torchrun",
            "host",
            False,
            ("burn", "--backend", "gloo", *CPU_BURN),
            gates_of="gpu_burn",
            burn_in=True,
            sdc=True,
        ),
        TestSpec(
            "fault_sdc_cpu",
            "FOR TESTING: sdc_check on CPU ranks",
            "torchrun",
            "host",
            False,
            ("sdc", "--backend", "gloo", *CPU_SDC),
            gates_of="sdc_check",
            sdc=True,
        ),
        TestSpec(
            "fault_rank_exit_multi",
            "FOR TESTING: rank 1 exits with code 3",
            "torchrun",
            "cluster",
            False,
            EXIT,
        ),
        # The run's lifecycle without torch (issue 49): a launch of plain Python ranks (pav_payload.plain)
        # started, hung, killed, collected and judged as a torchrun launch is, for the faults whose subject
        # is the run, not torch (tests/faults: a hang, a host that dies, signals, a killed driver, secrets,
        # kept hosts). Their collective is a sum over TCP, judged by torch_gloo_allreduce's gate.
        TestSpec(
            "fault_plain",
            "FOR TESTING: plain Python ranks (no torch) sum a vector",
            "plain",
            "host",
            False,
            gates_of="torch_gloo_allreduce",
        ),
        TestSpec(
            "fault_plain_multi",
            "FOR TESTING: plain Python ranks (no torch) sum a vector across hosts",
            "plain",
            "cluster",
            False,
            gates_of="torch_gloo_allreduce",
        ),
        TestSpec(
            "fault_plain_hang",
            "FOR TESTING: plain Python rank 1 hangs",
            "plain",
            "host",
            False,
            ("--hang", "1"),
            gates_of="torch_gloo_allreduce",
        ),
        TestSpec(
            "fault_plain_hang_multi",
            "FOR TESTING: plain Python rank 0 hangs",
            "plain",
            "cluster",
            False,
            ("--hang", "0"),
            gates_of="torch_gloo_allreduce",
        ),
        # A link erring under traffic, where no real one can (issue 50): the agent adds 1 to the link_downed
        # counter of the sysfs tree tests/faults/test_error_counters.py plants on the host.
        TestSpec(
            "fault_plain_link_downed",
            "FOR TESTING: plain Python ranks; the planted RDMA port's link_downed counter grows",
            "plain",
            "host",
            False,
            ("--count-errors", f"{PLANTED_SYSFS}/infiniband/mlx5_0/ports/1/counters/link_downed"),
            gates_of="torch_gloo_allreduce",
        ),
        # A k8s run takes GPU tests only; the API-server double's pods run on CPU. Its node faults are the
        # double's (a broken node's pods fail): this test passes on every other node.
        TestSpec(
            "fault_gloo_k8s",
            "FOR TESTING: gloo all_reduce on each node of a k8s run (the API-server double's CPU pods)",
            "torchrun",
            "host",
            True,
            gloo("all_reduce", "1K"),
            procs=1,  # one rank a pod: its subject is the node marking, not the ranks (each imports torch)
            gates_of="torch_gloo_allreduce",
        ),
    )
}


SLOW_STEP_S = "0.2"  # fault_slow_host_multi: a healthy rank's step; a slow host's is 10 times as long


def _fault_tests() -> dict[str, TestSpec]:
    """FOR TESTING ONLY (bad-node isolation): cross-host launches of plain ranks (no torch: the subject is
    the isolation, not torch) in which every rank on the hosts of PAV_FAULT_HOST (comma-separated) sends a
    wrong vector, or works 10 times as long before the collective (a straggler, named by the per-host step
    rate each host measures for itself: pav.thresholds.fleet), judged by torch_gloo_collectives_multi's gates
    as the other plain tests are by torch_gloo_allreduce's."""
    host = os.environ.get("PAV_FAULT_HOST", "")
    wrong = TestSpec(
        "fault_wrong_host_multi", "FOR TESTING: wrong results on host(s) $PAV_FAULT_HOST", "plain", "cluster",
        False, ("--wrong-host", host), gates_of="torch_gloo_collectives_multi",
    )  # fmt: skip
    slow = TestSpec(
        "fault_slow_host_multi", "FOR TESTING: host(s) $PAV_FAULT_HOST 10 times slower", "plain", "cluster",
        False, ("--step-s", SLOW_STEP_S, "--slow-host", host), gates_of="torch_gloo_collectives_multi",
    )  # fmt: skip
    return FAULT_TESTS | {wrong.name: wrong, slow.name: slow}


def link_traffic() -> tuple[str, ...]:
    """The tests that send traffic over every link of a host's GPUs (TestSpec.link_traffic)."""
    return tuple(name for name, spec in CATALOG.items() if spec.link_traffic)


def spec_of(name: str) -> TestSpec | None:
    """A recorded test's spec, the test-only ones included (re-judging a run of them); None if unknown."""
    return (CATALOG | _fault_tests()).get(name)


def _known() -> dict[str, TestSpec]:
    return CATALOG | (_fault_tests() if os.environ.get("PAV_FAULT_TESTS") == "1" else {})


def refuse_unknown(names: list[str], where: str) -> None:
    """Names a user gave (where: the setting or option), each a test of the catalog."""
    known = _known()
    unknown = [n for n in names if n not in known]
    if not unknown:
        return
    # A recheck re-runs what failed, a FOR TESTING test too: say how it is known rather than "unknown".
    testing = [n for n in unknown if n in _fault_tests()]
    if testing:
        raise PavError(
            f"test(s) {', '.join(testing)} in {where} are FOR TESTING (tests/faults) and known only with "
            "PAV_FAULT_TESTS=1 in the environment; set it, or name tests of the catalog"
        )
    raise PavError(f"unknown test(s) {', '.join(unknown)} in {where}; known: {', '.join(CATALOG)}")


def select(names: list[str], where: str = "pav_tests") -> list[TestSpec]:
    """The run's tests, in the order given. Called once per run, by pav.run_inputs: every stage reads the
    selection from the run's inputs (tests/driver/test_run_inputs.py holds the tree to it)."""
    refuse_unknown(names, where)
    known = _known()
    return [_with_sdc_fault(known[n]) for n in names]


def with_burn_in(specs: list[TestSpec], seconds: int) -> list[TestSpec]:
    """The run's tests with a burn-in of `seconds` (> 0): each burn-in test selected runs that long, and
    gpu_burn joins the run where none was selected."""
    if not any(s.burn_in for s in specs):
        specs = [*specs, _with_sdc_fault(CATALOG[BURN_IN])]
    return [replace(s, args=(*s.args, "--duration-s", str(seconds))) if s.burn_in else s for s in specs]


def _with_sdc_fault(spec: TestSpec) -> TestSpec:
    """FOR TESTING ONLY: with PAV_FAULT_SDC_GPU=N in the driver's environment, every SDC check of the run
    flips one element on local GPU N (PAV_FAULT_SDC_REP: of that repetition, default 1), so it must FAIL."""
    gpu = os.environ.get(SDC_FAULT_ENV, "")
    if not spec.sdc or not gpu.strip():
        return spec
    rep = os.environ.get("PAV_FAULT_SDC_REP", "1")
    return replace(spec, args=(*spec.args, "--inject-sdc-gpu", gpu.strip(), "--inject-sdc-rep", rep.strip()))


# Slurm's own checks (launcher "slurm"), run first in catalog order whenever the launcher is slurm.
SLURM_CHECKS = tuple(spec.name for spec in CATALOG.values() if spec.launcher == "slurm")


def with_slurm_checks(specs: list[TestSpec]) -> list[TestSpec]:
    """--launcher slurm's tests: the Slurm checks first (the cluster state before any job), then the
    planned tests."""
    names = {s.name for s in specs}
    return [CATALOG[c] for c in SLURM_CHECKS if c not in names] + sorted(
        specs, key=lambda s: SLURM_CHECKS.index(s.name) if s.name in SLURM_CHECKS else len(SLURM_CHECKS)
    )


def probe() -> str:
    """The test that measures each GPU and pair alone (TestSpec.per_gpu_probe): the per-GPU gates' test."""
    return next(name for name, spec in CATALOG.items() if spec.per_gpu_probe)


def is_probe(test: str) -> bool:
    """Whether a test is the per-GPU probe (no test-only spec is)."""
    spec = CATALOG.get(test)
    return spec is not None and spec.per_gpu_probe
