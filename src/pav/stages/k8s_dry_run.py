"""--platform k8s --dry-run: the plan and the manifests a run would submit (the run: pav.platform)."""

from __future__ import annotations

import os

from pav import plan, rundir
from pav.context import STAGES, RunContext
from pav.errors import PavError
from pav.k8s import job_api, provision
from pav.k8s.kubectl import Kubectl
from pav.provisioning import nebius
from pav.stages import k8s as stages
from pav.stages.k8s import manifests
from pav.thresholds.profiles import planned_profile


def dry_run(ctx: RunContext) -> int:
    """The plan, and the manifests the run would submit written into RUN/manifests/: nothing else changes."""
    api, why = planned_api(ctx)
    planned, rendered = manifests(ctx, api)
    rundir.prepare(ctx.run_dir)
    written = stages.render.write(rendered, ctx.run_dir / "manifests")
    lines = [f"env: {ctx.env.name} (platform k8s)", f"run dir: {ctx.run_dir}", "stages:"]
    # No isolate stage on k8s: a failing node is named by the per-node results of host-scope tests.
    shown = [s for s in STAGES if s != "isolate"]
    lines += [f"  [{'run ' if ctx.wants(s) or s == 'report' else 'skip'}] {s}" for s in shown]
    lines.append("cluster:")
    if ctx.env.provisions:
        nodes = ctx.inputs.host_count
        lines.append(
            f"  Nebius Managed Kubernetes, {nodes} GPU node(s), Terraform root {ctx.env.terraform_dir}"
        )
        try:
            provision.check_kubectl_auth(os.environ)
            preview = nebius.preview(ctx.env, ctx.inputs.host_count)
            lines += ["  variables:", *(f"    {k} = {v}" for k, v in sorted(preview.items()))]
        except PavError as exc:
            lines.append(f"  variables: cannot be set yet: {exc}")
    lines.append(f"  kubeconfig: {provision.kubeconfig_path(ctx.env)}")
    lines.append(f"threshold profile: {planned_profile(ctx.inputs.profile, 'k8s')}")
    lines.append(f"job API: {job_api.DESCRIBED[api]} ({why})")
    lines.append("jobs (one at a time, each on every GPU of every node; per node: each pod its own world):")
    lines += [
        f"  {j.kind:<10} {j.name:<50} {j.workers}x{j.gpus_per_worker} GPU  "
        f"{'per node' if j.scope == 'host' else 'across nodes':<12} {j.test}"
        for j in planned
    ]
    lines.append(f"manifests ({len(written)}, policy-checked): {ctx.run_dir / 'manifests'}")
    lines += [f"  {p.name}" for p in written]
    lines += plan.after_report(ctx)
    print("\n".join(lines), flush=True)
    return 0


def planned_api(ctx: RunContext) -> tuple[str, str]:
    """The API the run would use, and why. An existing cluster whose kubeconfig answers is asked what it
    serves (reading only); otherwise the plan is a fresh cluster's, which the run would give Kubeflow Trainer
    v2 (unless k8s_job_api: v1), and the run decides again against the cluster at configure."""
    setting = ctx.settings.k8s.job_api
    path = provision.kubeconfig_path(ctx.env)
    if setting == "auto" and not ctx.env.provisions and path.is_file():
        try:
            cluster = job_api.served(Kubectl(path, ctx.settings.k8s.namespace), timeout_s=20)
        except PavError as exc:
            return job_api.TRAINER, f"k8s_job_api: auto; no answer from the cluster ({exc})"
        return job_api.choose(setting, cluster), "k8s_job_api: auto, from what the cluster serves"
    if setting != "auto":
        return setting, f"k8s_job_api: {setting}"
    return job_api.TRAINER, "k8s_job_api: auto; a fresh cluster's: decided against the cluster at configure"
