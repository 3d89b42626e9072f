"""--platform k8s --dry-run (pav.stages.k8s_dry_run) in process, on the repository's k8s env, and which
tests the k8s platform runs as which job kind (pav.k8s.kinds): the plan lists one job per test, of the kind
kinds gives it, and every manifest it names is written, policy-checked, into the run dir; nothing is
created."""

from __future__ import annotations

import dataclasses
from dataclasses import fields
from pathlib import Path

import pytest

from pav import catalog
from pav.catalog import k8s_job_kind as job_kind
from pav.context import Options, RunContext
from pav.envs import resolve_env
from pav.errors import PavError
from pav.k8s import job_api
from pav.provisioning.nebius import SERVICE_ACCOUNT, TOKEN
from pav.settings import load_settings
from pav.stages.k8s_dry_run import dry_run
from tests.driver.contexts import context

ENV = "nebius-eu-k8s"


@pytest.fixture
def k8s_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> RunContext:
    monkeypatch.setenv("PAV_STATE_DIR", str(tmp_path / "state"))
    for name in (TOKEN, *SERVICE_ACCOUNT):
        monkeypatch.delenv(name, raising=False)
    env = resolve_env(ENV)
    chosen = load_settings(env.inventory_dir)
    # The env's settings, its pav_hosts (a name the helper takes for its own host count) as --hosts would.
    given = {f.name: getattr(chosen, f.name) for f in fields(chosen) if f.name != "hosts"}
    ctx = context(0, provisions=True, options=Options(hosts=chosen.hosts), **given)
    ctx.env = env
    ctx.run_dir = tmp_path / "run"
    return ctx


def test_the_plan_lists_a_job_per_test_and_writes_its_manifests(
    k8s_run: RunContext, capsys: pytest.CaptureFixture[str]
) -> None:
    assert dry_run(k8s_run) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"env: {ENV} (platform k8s)\nrun dir: {k8s_run.run_dir}\nstages:\n")
    assert "isolate" not in out.split("cluster:")[0]  # a failing node is named by per-node results
    assert f"  Nebius Managed Kubernetes, {k8s_run.options.hosts} GPU node(s)" in out
    assert f"threshold profile: {k8s_run.settings.threshold_profile}\n" in out
    assert "job API: TrainJob (trainer.kubeflow.org/v1alpha1, Kubeflow Trainer v2) (k8s_job_api: auto;" in out
    jobs = out.split("jobs (")[1].split("manifests (")[0].splitlines()[1:]
    assert [line.split()[-1] for line in jobs] == k8s_run.settings.tests
    for line in jobs:
        spec = catalog.CATALOG[line.split()[-1]]
        assert line.split()[0] == job_api.kind(job_api.TRAINER, job_kind(spec)) == "TrainJob"
        assert ("per node" if spec.scope == "host" else "across nodes") in line
    listed = out.split("manifests (")[1].split("after the report:")[0].splitlines()[1:]
    written = sorted(p.name for p in (k8s_run.run_dir / "manifests").iterdir())
    assert sorted(name.strip() for name in listed) == written
    assert len(written) > len(jobs)  # the jobs, and what they use (the payload's ConfigMap, the runtimes)
    assert {"00-clustertrainingruntime-torch.yaml", "00-clustertrainingruntime-mpi.yaml"} <= set(written)
    assert out.endswith("after the report:\n  nothing beyond the run dir (--metrics-textfile, --pushgateway, "
                        "--on-fail, --recheck)\n")  # fmt: skip


def test_the_plan_says_where_the_verdict_goes_and_which_nodes_it_marks(
    k8s_run: RunContext, capsys: pytest.CaptureFixture[str]
) -> None:
    k8s_run.options.on_fail, k8s_run.options.pushgateway = "taint", "http://user:pw@gw:9091"
    k8s_run.options.metrics_textfile = Path("/var/lib/node_exporter")
    assert dry_run(k8s_run) == 0
    after = capsys.readouterr().out.split("after the report:\n")[1].splitlines()
    assert after == [
        f"  metrics textfile: /var/lib/node_exporter/pav-{ENV}.prom (written, then renamed)",
        "  pushgateway: http://gw:9091 (job pav, one group per env and host)",
        "  --on-fail taint: after a FAIL, cordon each node its bad parts name, taint it "
        "pav.io/unhealthy=TEST:NoSchedule and annotate it with the run and the part",
    ]
    k8s_run.options.recheck = k8s_run.options.dry_run = True
    assert dry_run(k8s_run) == 0
    out = capsys.readouterr().out
    assert "  --recheck: only the nodes this tool tainted, each with the tests it failed; untaint" in out
    assert out.count("TrainJob ") >= 1  # a dry run finds no nodes: it shows every job


def test_k8s_job_api_v1_plans_pytorchjobs_and_mpijobs(
    k8s_run: RunContext, capsys: pytest.CaptureFixture[str]
) -> None:
    k8s_run.settings = dataclasses.replace(
        k8s_run.settings, k8s=dataclasses.replace(k8s_run.settings.k8s, job_api="v1")
    )
    assert dry_run(k8s_run) == 0
    out = capsys.readouterr().out
    assert "job API: PyTorchJob / MPIJob (kubeflow.org, the v1 training-operator and MPI operator) " in out
    jobs = out.split("jobs (")[1].split("manifests (")[0].splitlines()[1:]
    assert {line.split()[0] for line in jobs} == {"PyTorchJob", "MPIJob"}
    assert not any("clustertrainingruntime" in p.name for p in (k8s_run.run_dir / "manifests").iterdir())


def test_without_credentials_the_plan_says_what_is_missing(
    k8s_run: RunContext, capsys: pytest.CaptureFixture[str]
) -> None:
    dry_run(k8s_run)
    out = capsys.readouterr().out
    assert f"  variables: cannot be set yet: no Nebius credentials: {TOKEN} is not set" in out
    assert not (k8s_run.run_dir.parent / "state" / "terraform.tfstate").exists()


def test_with_credentials_the_plan_shows_the_variables(
    k8s_run: RunContext, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv(TOKEN, "a-token-for-the-plan")
    values = tmp_path / "terraform.yml"
    values.write_text("parent_id: project-e00a\ninfiniband_fabric: fabric-3\n")
    monkeypatch.setenv("PAV_TFVARS", str(values))
    dry_run(k8s_run)
    out = capsys.readouterr().out
    variables = out.split("  variables:\n")[1].split("  kubeconfig:")[0]
    assert "    parent_id = project-e00a\n" in variables
    assert f"    node_count = {k8s_run.options.hosts}\n" in variables
    assert "a-token-for-the-plan" not in out


def test_gpu_torchrun_tests_are_torch_jobs_and_nccl_tests_mpi_jobs() -> None:
    kinds = {name: job_kind(spec) for name, spec in catalog.CATALOG.items() if spec.needs_gpu and
             spec.launcher in ("torchrun", "nccl_tests")}  # fmt: skip
    assert kinds and set(kinds.values()) == {"torch", "mpi"}
    assert all(
        (kind == "mpi") == catalog.CATALOG[name].launcher.startswith("nccl") for name, kind in kinds.items()
    )


@pytest.mark.parametrize("name", [n for n, s in catalog.CATALOG.items() if not s.needs_gpu])
def test_a_cpu_test_is_refused_naming_the_fix(name: str) -> None:
    spec = catalog.CATALOG[name]
    with pytest.raises(PavError) as exc:
        job_kind(spec)
    assert str(exc.value) == (
        f"test {name} runs through {spec.launcher} on CPUs; the k8s platform runs GPU torchrun tests and "
        "nccl-tests only: take it out of pav_tests"
    )
