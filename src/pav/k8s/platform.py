"""--platform k8s in the one pipeline: jobs on a Kubernetes cluster instead of Ansible over SSH."""

from __future__ import annotations

from pav.k8s import marking, stages
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
        after={"provision": marking.select},  # only with --recheck: the tool's tainted nodes and tests
        dry_run=dry_run,
    )
