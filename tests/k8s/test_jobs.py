"""Following and collecting jobs, with no cluster: the pod's own script run for real on this machine (CPU,
gloo), its log turned back into result files and judged as on hosts; kubectl JSON parsed from fixtures
shaped like a real cluster's (kubeflow training-operator v1.8 and core v1 Pod objects). The same through the
real kubectl and an API-server double: tests/k8s/test_kubectl.py."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from pav import catalog, paths
from pav.errors import PavError
from pav.evaluate import evaluate_launch
from pav.k8s import jobs, render
from pav.k8s_config import load_config
from pav.k8s_fabric import fabric_env
from pav.launch import Launch
from pav.settings import load_settings
from pav.thresholds.profiles import load_profile
from pav.thresholds.scaling import split_gates

FIXTURES = Path(__file__).parent / "fixtures"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.slow  # torchrun and a torch rank: out of the fast lane (issue 49)
def test_the_pod_script_runs_and_its_log_gives_back_judged_results(tmp_path: Path) -> None:
    """The PyTorchJob container's command, with what the operator would set (PET_*), on one CPU process."""
    spec = catalog.CATALOG["torch_gloo_allreduce"]
    out = tmp_path / "pod-results"
    script = render._torch_script(spec).replace(render.RESULTS, str(out))
    env = {
        **os.environ,
        "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}",
        "PYTHONPATH": str(paths.PAYLOAD),
        "PET_NNODES": "1",
        "PET_NPROC_PER_NODE": "1",
        "PET_NODE_RANK": "0",
        "PET_MASTER_ADDR": "127.0.0.1",
        "PET_MASTER_PORT": str(free_port()),
    }
    proc = subprocess.run(["bash", "-c", script], env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    job = render.Job(**{**_job_fields(), "test": spec.name, "gpus_per_worker": 1, "procs_per_worker": 1})
    launch = Launch(spec.name, "torchrun", "cluster", 600)
    run_dir = tmp_path / "run"
    pod = jobs.PodState(f"{job.name}-worker-0", "worker", "Succeeded")
    jobs.save_log(launch, job, pod, proc.stdout, run_dir)
    stored = run_dir / "hosts" / pod.name / "results" / spec.name
    assert sorted(p.name for p in stored.iterdir()) == [
        "launcher.log", "launcher.rc", "launcher.time",
        f"{spec.name}.rank0.json",
    ]  # fmt: skip
    assert "pav: memlock=" in (stored / "launcher.log").read_text()
    measured, _ = split_gates(load_profile("cpu").get(spec.name, []))
    (result,) = evaluate_launch(launch, run_dir, measured)
    assert result.status == "pass", result.reason
    assert json.loads((stored / f"{spec.name}.rank0.json").read_text())["world_size"] == 1


def _job_fields() -> dict[str, object]:
    inventory = paths.INVENTORIES / "nebius-eu-k8s"
    (planned,) = render.plan_jobs(
        catalog.select(["torch_nccl_allreduce"]),
        load_config(inventory),
        fabric_env(load_settings(inventory)),
        1,
        "r1",
        lambda _: 60,
    )
    return {k: getattr(planned, k) for k in planned.__dataclass_fields__}


def test_a_pod_that_died_is_an_error_naming_its_rc(tmp_path: Path) -> None:
    job = render.Job(**_job_fields())
    launch = Launch(job.test, "torchrun", "cluster", 600)
    log = "NCCL WARN NET/IB : no device found\n=== pav-file launcher.rc\n1\n=== pav-end\n"
    jobs.save_log(launch, job, jobs.PodState(f"{job.name}-worker-0", "worker", "Failed"), log, tmp_path)
    (result,) = evaluate_launch(launch, tmp_path, [])
    assert result.status == "error"
    assert "0 of 8 ranks wrote a result" in result.reason and "worker-0 rc=1" in result.reason
    assert (tmp_path / "k8s" / job.name / f"{job.name}-worker-0.log").read_text() == log


def test_split_log_keeps_the_pods_own_output_apart() -> None:
    own, files = jobs.split_log("a\n=== pav-file x.json\n{\n}\n=== pav-end\nb\n")
    assert own == "a\nb\n"
    assert files == {"x.json": "{\n}\n"}


def test_job_state_and_pod_states_from_kubectl_json() -> None:
    job = json.loads((FIXTURES / "pytorchjob-running.json").read_text())
    pods = json.loads((FIXTURES / "pods.json").read_text())
    assert jobs.job_state(job) == "Running"
    assert jobs.job_state({"status": {}}) == "Created"
    states = jobs.pod_states(pods)
    assert [(p.role, p.phase, p.reason) for p in states] == [
        ("worker", "Running", ""),
        ("worker", "Pending", "Unschedulable"),
        ("worker", "Pending", "ImagePullBackOff"),
    ]
    planned = render.Job(**{**_job_fields(), "name": "pav-torch-nccl-allreduce-r1"})
    line = jobs.progress_line(planned, "Running", states)
    assert line == (
        "  torch_nccl_allreduce: Running [worker-0 Running, worker-1 Pending (Unschedulable), "
        "worker-2 Pending (ImagePullBackOff)]"
    )


def test_mpijob_launch_names_the_nccl_tests_binary(tmp_path: Path) -> None:
    """Across nodes (…_multi) the launcher's log is the test's; one node at a time, each worker's node gets
    the log and rc the launcher printed under that worker's name, and is judged alone."""
    inventory = paths.INVENTORIES / "nebius-eu-k8s"
    cluster, host = render.plan_jobs(
        catalog.select(["nccl_tests_all_reduce_multi", "nccl_tests_all_reduce"]),
        load_config(inventory), fabric_env(load_settings(inventory)), 2, "r1", lambda _: 60,
    )  # fmt: skip
    assert "-np 16 " in cluster.script and "-x NCCL_IB_HCA" in cluster.script
    assert cluster.env["NCCL_ALGO"] == "Ring"  # the catalog's env for the test comes along
    assert "-x NCCL_ALGO" in cluster.script  # to every rank on every node
    launch = Launch(cluster.test, "nccl_tests", "cluster", 60)
    launcher = jobs.PodState(f"{cluster.name}-launcher-x7k2p", "launcher", "Succeeded")
    jobs.save_log(launch, cluster, launcher, "", tmp_path)
    jobs.save_log(
        launch, cluster, jobs.PodState(f"{cluster.name}-worker-0", "worker", "Succeeded"), "", tmp_path
    )
    assert launch.argv_by_host == {launcher.name: ["all_reduce_perf"]}
    assert '-np 8 -H "$host:8"' in host.script and "< /etc/mpi/hostfile" in host.script
    workers = [f"{host.name}-worker-{i}" for i in range(2)]
    log = "".join(f"=== pav-file {w}/launcher.rc\n0\n=== pav-end\n" for w in workers)
    log += "=== pav-file launcher.rc\n0\n=== pav-end\n"
    launch = Launch(host.test, "nccl_tests", host.scope, 60)
    launcher = jobs.PodState(f"{host.name}-launcher-x7k2p", "launcher", "Succeeded")
    pods = [launcher, *(jobs.PodState(w, "worker", "Succeeded") for w in workers)]
    jobs.save_log(launch, host, launcher, log, tmp_path, jobs.nodes_of(pods))
    assert launch.argv_by_host == {w: ["all_reduce_perf"] for w in workers}
    assert (tmp_path / "hosts" / workers[1] / "results" / host.test / "launcher.rc").read_text() == "0\n"


def test_a_pod_log_writes_only_plain_files_of_the_jobs_own_nodes(tmp_path: Path) -> None:
    """Whatever runs in the pod writes its log: a marker that climbs out of the run dir, names an absolute
    path or a node outside the job is skipped, saying so, and gives no host a result."""
    inventory = paths.INVENTORIES / "nebius-eu-k8s"
    _, host = render.plan_jobs(
        catalog.select(["nccl_tests_all_reduce_multi", "nccl_tests_all_reduce"]),
        load_config(inventory), fabric_env(load_settings(inventory)), 2, "r1", lambda _: 60,
    )  # fmt: skip
    run_dir = tmp_path / "run"
    outside = tmp_path / "outside"
    worker = jobs.PodState(f"{host.name}-worker-0", "worker", "Succeeded", node="gpu-node-0")
    launcher = jobs.PodState(f"{host.name}-launcher-x7k2p", "launcher", "Succeeded", node="cpu-node")
    names = [
        "../../escaped/x",
        f"{outside}/x",
        "other-node/launcher.rc",
        f"{worker.name}/..",
        f"{worker.name}/launcher.rc",
    ]
    log = "".join(f"=== pav-file {n}\n0\n=== pav-end\n" for n in names)
    launch = Launch(host.test, "nccl_tests", host.scope, 60)
    notes: list[str] = []
    jobs.save_log(launch, host, launcher, log, run_dir, jobs.nodes_of([launcher, worker]), notes.append)
    assert launch.argv_by_host == {"gpu-node-0": ["all_reduce_perf"]}
    assert (run_dir / "hosts" / "gpu-node-0" / "results" / host.test / "launcher.rc").read_text() == "0\n"
    assert sorted(p.name for p in (run_dir / "hosts").iterdir()) == ["gpu-node-0"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run"]
    assert len(notes) == 4 and all("skipped" in n for n in notes)
    assert any("'other-node/launcher.rc'" in n for n in notes)
    # A pod of the job its controller deleted before it was seen (JobSet's finished node pods): the
    # launcher still names it by the job's own naming, and its file is kept under that name.
    unseen = Launch(host.test, "nccl_tests", host.scope, 60)
    jobs.save_log(unseen, host, launcher, f"=== pav-file {host.name}-node-0-1/launcher.rc\n0\n=== pav-end\n",
                  run_dir, jobs.nodes_of([launcher]), notes.append)  # fmt: skip
    assert list(unseen.argv_by_host) == [f"{host.name}-node-0-1"] and len(notes) == 4
    # A name that only starts like the job's (issue 62): no pod of it had it, so no host is added for it.
    phantoms = [f"{host.name}-anything", f"{host.name}-node-0-{host.workers}", f"{host.name}-worker-99"]
    log = "".join(f"=== pav-file {n}/launcher.rc\n0\n=== pav-end\n" for n in phantoms)
    phantom = Launch(host.test, "nccl_tests", host.scope, 60)
    jobs.save_log(phantom, host, launcher, log, run_dir, jobs.nodes_of([launcher]), notes.append)
    assert phantom.argv_by_host == {} and len(notes) == 7, notes
    assert sorted(p.name for p in (run_dir / "hosts").iterdir()) == ["gpu-node-0", f"{host.name}-node-0-1"]


def test_cpu_tests_are_refused_on_k8s() -> None:
    inventory = paths.INVENTORIES / "nebius-eu-k8s"
    with pytest.raises(PavError, match="take it out of pav_tests"):
        render.plan_jobs(
            catalog.select(["torch_gloo_allreduce"]),
            load_config(inventory),
            fabric_env(load_settings(inventory)),
            2,
            "r1",
            lambda _: 60,
        )


def test_an_mpijob_whose_worker_failed_before_the_launcher_ends_at_once() -> None:
    """Under WaitForWorkersReady a worker that died means no launcher ever: following it to the job's
    deadline would hang the run for the whole test timeout."""
    inventory = paths.INVENTORIES / "nebius-eu-k8s"
    (job,) = render.plan_jobs(
        catalog.select(["nccl_tests_all_reduce"]),
        load_config(inventory),
        fabric_env(load_settings(inventory)),
        2,
        "r1",
        lambda _: 600,
    )
    failed = jobs.PodState(f"{job.name}-worker-1", "worker", "Failed", "Error")
    running = jobs.PodState(f"{job.name}-worker-0", "worker", "Running")
    assert jobs._worker_failed_before_launch([running, failed])
    assert not jobs._worker_failed_before_launch(
        [running, jobs.PodState(f"{job.name}-launcher-x", "launcher", "Running"), failed]
    )
