"""What the command line chose for a run, as parsed (pav.cli). A flag that stands for a setting is None
where it was not given: pav.run_inputs lets it beat the setting, in that one place."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pav.secrets.basic_auth import BasicAuth

# --on-fail's actions, each for one platform: the run's inputs refuse it on the other (pav.run_inputs).
ON_FAIL = {"drain": "hosts", "taint": "k8s"}
STAGES = ("provision", "configure", "validate", "collect", "isolate", "report", "teardown")


@dataclass
class Options:
    stages: tuple[str, ...] = STAGES
    keep: bool = False
    dry_run: bool = False
    verbose: bool = False
    hosts: int | None = None  # --hosts N for envs that provision (over pav_hosts)
    apply_tuning: bool | None = None  # --apply-tuning / --check-tuning (over pav_apply_tuning)
    tests: tuple[str, ...] | None = None  # --tests (over pav_tests)
    platform: str | None = None  # --platform (over pav_platform)
    launcher: str | None = None  # --launcher (over pav_launcher)
    test_timeout_s: int | None = None  # --test-timeout (over pav_test_timeout_s and pav_test_timeouts_s)
    allow_missing: int = 0  # --allow-missing N: unreachable hosts the run goes on without
    max_hours: int | None = None  # --max-hours H: cloud resources' pav-expires-at label, H hours on
    reuse: str | None = None  # --reuse RUN_ID: run on the hosts that run kept (envs that provision)
    results_root: Path = Path("runs")  # where run dirs live; the report compares with earlier runs there
    extra_vars: dict[str, Any] = field(default_factory=dict)  # -e: to every playbook, over the env's vars
    metrics_textfile: Path | None = None  # --metrics-textfile DIR: node_exporter's textfile collector dir
    pushgateway: str | None = None  # --pushgateway URL: a Prometheus pushgateway
    # Its basic auth (PAV_PUSHGATEWAY_AUTH or --pushgateway-auth-file), never from argv; kept out of repr.
    pushgateway_auth: BasicAuth | None = field(default=None, repr=False)
    on_fail: str | None = None  # --on-fail drain|taint: drain (Slurm) or taint (k8s) the nodes a FAIL names
    recheck: bool = False  # --recheck: re-run the tool's marked nodes' tests, return those that pass
    burn_in_s: int | None = None  # --burn-in DURATION, in seconds (over pav_burn_in_s); 0: none

    @property
    def after_report(self) -> str | None:
        """What the run does to nodes after its report (pav.marking.flow; the dry run's plan says it too):
        "recheck" (return those that pass), an --on-fail value (mark those a FAIL names), or None. A recheck
        keeps the marks of the nodes that still fail and makes none: --recheck wins over --on-fail."""
        return "recheck" if self.recheck else self.on_fail
