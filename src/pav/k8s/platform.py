"""--platform k8s in the one pipeline: jobs on a Kubernetes cluster instead of Ansible over SSH."""

from __future__ import annotations

from pav.k8s import stages
from pav.k8s.dry_run import dry_run
from pav.platform import Platform


def k8s() -> Platform:
    return Platform(
        "k8s",
        {
            "provision": stages.provision_stage,
            "configure": stages.configure_stage,
            "validate": stages.validate_stage,
            "collect": stages.collect_stage,
            "report": stages.report_stage,
            "teardown": stages.teardown_stage,
        },
        dry_run=dry_run,
    )
