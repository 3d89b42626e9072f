"""The stages of a k8s run, functions of the run's context; pav.platform gives them to the pipeline."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path

from pav.ansible_exec import run_playbook
from pav.context import RunContext
from pav.errors import PavError
from pav.k8s import job_api, jobs, provision, render, taint
from pav.k8s.kubectl import Kubectl
from pav.k8s_fabric import fabric_env
from pav.k8s_policy import check_manifest
from pav.ownership import clear_leftover
from pav.stages import report, teardown

MANAGED = "app.kubernetes.io/managed-by=provision-and-validate"


def manifests(ctx: RunContext, api: str) -> tuple[list[render.Job], list[render.Manifest]]:
    config = ctx.settings.k8s
    env = fabric_env(ctx.settings)
    planned = render.plan_jobs(
        ctx.inputs.tests,
        config,
        env,
        ctx.inputs.host_count,
        ctx.results.run_id,
        ctx.inputs.timeouts.for_test,
        api=api,
    )
    planned = pin(planned, ctx.inputs.rechecked)  # only in a recheck: each job on the nodes that failed it
    labels = render.job_labels(ctx.results.run_id, "payload")
    return planned, render.render(planned, config.namespace, labels)


def kubectl(ctx: RunContext) -> Kubectl:
    path = provision.kubeconfig_path(ctx.env)
    if not path.is_file():
        raise PavError(f"no kubeconfig at {path}: run the provision stage, or set KUBECONFIG")
    return Kubectl(path, ctx.settings.k8s.namespace)


def provision_stage(ctx: RunContext) -> str:
    if not ctx.env.provisions:
        return f"existing cluster: {provision.kubeconfig_path(ctx.env)}"
    ctx.provisioned["k8s"] = True
    if ctx.options.reuse:
        path = provision.kubeconfig_path(ctx.env)
        return f"reused the cluster run {ctx.options.reuse} kept; kubeconfig {path}"
    first = clear_leftover(ctx, lambda: provision.destroy(ctx.env))
    path = provision.apply(ctx.env, ctx.inputs.host_count, ctx.results.run_id, ctx.options.max_hours)
    ctx.results.state_dir = str(path.parent)
    return f"{first}cluster up; kubeconfig {path}"


def choose_api(ctx: RunContext, kube: Kubectl) -> str:
    """The job API from k8s_job_api and what the cluster serves now, recorded in results.json (k8s)."""
    setting = ctx.settings.k8s.job_api
    cluster = job_api.served(kube)
    api = job_api.choose(setting, cluster)
    found = [name for name, on in (("trainer", cluster.trainer), ("v1", cluster.v1)) if on] or ["neither"]
    ctx.results.k8s = {
        "job_api": api,
        "api": job_api.DESCRIBED[api],
        "chosen_by": f"k8s_job_api: {setting}; the cluster served: {', '.join(found)}",
    }
    return api


def configure_stage(ctx: RunContext) -> str:
    """roles/training_operator on the controller: the pinned operators of the chosen API (Kubeflow Trainer v2
    and JobSet, or the v1 operators), and a check that GPUs are there."""
    kube = kubectl(ctx)
    api = choose_api(ctx, kube)
    config = ctx.settings.k8s
    inventory = ctx.run_dir / "inventory" / "k8s.yml"
    inventory.parent.mkdir(parents=True, exist_ok=True)
    # The controller's own Python runs the modules: interpreter discovery may find none that works.
    inventory.write_text(
        "all:\n  hosts:\n    localhost:\n      ansible_connection: local\n"
        "      ansible_python_interpreter: '{{ ansible_playbook_python }}'\n"
    )
    outcome = run_playbook(
        "configure",
        "k8s.yml",
        inventory,
        ["localhost"],
        ctx.run_dir / "ansible" / "configure",
        {
            **ctx.extravars(),
            "training_operator_kubeconfig": str(kube.kubeconfig),
            "training_operator_required_gpus_per_node": config.node_shape().gpus,
            "training_operator_job_api": api,
        },
        verbose=ctx.options.verbose,
    )
    if outcome.rc != 0:
        why = "; ".join(outcome.failures.get("localhost", [])) or outcome.status
        raise PavError(f"installing the operators failed: {why}")
    installed = "Kubeflow Trainer v2 and JobSet" if api == job_api.TRAINER else "the v1 operators"
    return f"{installed} ready ({ctx.results.k8s['chosen_by']}); GPU nodes found"


def validate_stage(ctx: RunContext) -> str:
    kube = kubectl(ctx)
    api = ctx.results.k8s.get("job_api") or choose_api(ctx, kube)  # configure's choice, when it ran
    job_api.require_served(api, job_api.served(kube))
    planned, rendered = manifests(ctx, api)
    render.write(rendered, ctx.run_dir / "manifests")
    namespace = f"apiVersion: v1\nkind: Namespace\nmetadata:\n  name: {kube.namespace}\n"
    kube.run("apply", "--server-side", "-f", "-", stdin=namespace)  # idempotent: exists on a later run
    for manifest in rendered:
        check_manifest(manifest.body, manifest.name)  # again: a file edited in the run dir is what goes
    for manifest in rendered:
        if manifest.kind in ("ConfigMap", "ClusterTrainingRuntime"):
            jobs.submit(kube, manifest)
    by_test = {m.test: m for m in rendered if m.test}
    for job in planned:  # one at a time: each takes every GPU of every node
        print(f"submitting {job.kind} {job.name} ({job.test})", flush=True)
        jobs.submit(kube, by_test[job.test])
        _, pods = jobs.follow(kube, job)
        ctx.launches.append(jobs.collect(kube, job, pods, ctx.run_dir))
        jobs.add_host_records(ctx.results.hosts, job, pods)
        # Logs taken: the job and its pods go now (cleanPodPolicy None kept them for this), so a job left
        # running past its deadline frees the GPUs for the next one. --keep leaves them for a look.
        if not ctx.options.keep:
            kube.run(
                "delete", jobs.RESOURCE[job.kind], job.name, "--ignore-not-found", "--wait=false", check=False
            )
    ran = f"{len(planned)} job(s) ran as {job_api.DESCRIBED[api]}"
    return f"{ran}; logs under {Path('k8s')}/, results under hosts/"


def collect_stage(ctx: RunContext) -> str:
    """Each job's logs and result files were taken as it ended (the operator deletes finished jobs after
    k8s_ttl_seconds_after_finished); this records what came back."""
    pods = sorted({h for launch in ctx.launches for h in launch.hosts})
    return f"results of {len(ctx.launches)} job(s) from {len(pods)} pod(s) under hosts/; raw logs under k8s/"


def report_stage(ctx: RunContext) -> str:
    """The report (the pipeline marks or returns nodes after it, pav.marking)."""
    return report.run(ctx)


def pin(jobs: list[render.Job], rechecked: Mapping[str, tuple[str, ...]]) -> list[render.Job]:
    """A recheck's jobs (pav.marking): each test's job on the nodes that failed it alone, tolerating the
    tool's taint and the cordon (the scheduler keeps every other pod off them); a test no node failed is
    dropped. Without a recheck (a dry run finds no nodes) every job as planned."""
    if not rechecked:
        return jobs
    out = []
    for job in jobs:
        nodes = [n for n, tests in rechecked.items() if job.test in tests]
        if nodes:
            tolerations = [dict(t) for t in taint.RECHECK_TOLERATIONS]
            out.append(replace(job, workers=len(nodes), node_names=nodes, tolerations=tolerations))
    return out


def teardown_stage(ctx: RunContext) -> str:
    """Delete the run's jobs, then destroy what was provisioned: a failed delete (API gone, a type the
    server lacks) never keeps a paid cluster up. Its error is raised after the destroy."""
    if ctx.options.keep:
        return f"kept (--keep): jobs and cluster left; {teardown.KEPT_LINES}"
    notes, failed = [], []
    path = provision.kubeconfig_path(ctx.env)
    if path.is_file():
        # This run's jobs; a teardown-only run removes every job the tool left in the namespace.
        selector = f"pav-run-id={render.run_label(ctx.results.run_id)}" if ctx.wants("validate") else MANAGED
        try:
            notes.append(jobs.delete(kubectl(ctx), selector))
        except PavError as exc:
            failed.append(str(exc))
    if ctx.env.provisions:
        destroyed = provision.destroy(ctx.env)
        ctx.results.destroyed = destroyed
        notes.append(f"destroyed {len(destroyed)} resource(s)")
    if failed:
        raise PavError("; ".join([*failed, *notes]))
    return "; ".join(notes) or "nothing to remove"
