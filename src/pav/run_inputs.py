"""A run's inputs, resolved once before any stage runs: what the command line (pav.options) and the env's
settings (pav.settings) choose, a flag beating its setting here and nowhere else. Stages read ctx.inputs;
none selects tests, counts hosts or picks a timeout again. Every check of a choice runs here too, so a bad
one stops the run before provision creates anything, naming where it was set."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from pav import catalog
from pav.catalog import TestSpec
from pav.envs import EnvSpec
from pav.errors import PavError
from pav.isolation import MIN_HOSTS
from pav.options import ON_FAIL, Options
from pav.settings import Settings, settings_file
from pav.thresholds.node_policy import NodePolicy, node_policy
from pav.thresholds.profiles import profile_path


@dataclass(frozen=True)
class Timeouts:
    """Seconds a test's launch may run before it is killed on every host."""

    default_s: int
    per_test: Mapping[str, int] = field(default_factory=lambda: MappingProxyType({}))  # over default_s

    def for_test(self, test: str) -> int:
        return self.per_test.get(test, self.default_s)


@dataclass(frozen=True)
class RunInputs:
    tests: tuple[TestSpec, ...]  # the selected tests in order; under --launcher slurm its checks first
    platform: str  # hosts or k8s
    launcher: str  # direct or slurm
    host_count: int  # how many hosts an env that provisions creates (k8s: GPU nodes)
    apply_tuning: bool  # False: the tuning roles run in check mode and change nothing
    timeouts: Timeouts
    profile: str  # the threshold profile as chosen: auto or a name (the run's Judge resolves auto, once)
    isolate: bool  # pav_isolate: a failing multi-host test may be re-run on pairs of hosts
    burn_in_s: int = 0  # --burn-in / pav_burn_in_s: the burn-in tests' length; 0: none
    # pav_gpu_state and pav_expected_versions: what the nodes' state and software are held to
    node_policy: NodePolicy = field(default_factory=NodePolicy)
    # --recheck (pav.marking.flow): each marked host or node -> the tests launched on it, and on no other
    rechecked: Mapping[str, tuple[str, ...]] = field(default_factory=dict)

    def spec(self, test: str) -> TestSpec | None:
        """A selected test's spec; None for a result no selected test gave (gpu_health)."""
        return next((s for s in self.tests if s.name == test), None)

    @property
    def no_pair_reruns(self) -> str:
        """Why no failing test of this run is re-run on pairs of hosts; "" where one may be."""
        if not self.isolate:
            return "pav_isolate is false: no re-runs"
        if self.launcher != "direct":
            # Re-runs go through torchrun over SSH; on a Slurm cluster they would bypass the scheduler.
            return f"pair re-runs are not done under --launcher {self.launcher}"
        return ""

    def isolation_possible(self, hosts: int) -> bool:
        """Whether the isolate stage may re-run a test on pairs of these hosts (validate keeps the hosts'
        folders for it; the isolate stage does it)."""
        return not self.no_pair_reruns and hosts >= MIN_HOSTS


def resolve(env: EnvSpec, options: Options, settings: Settings) -> RunInputs:
    """The run's inputs from the options and the settings, each flag over its setting; settings stay as the
    env's files and -e gave them."""
    fallback = str(settings_file(env.inventory_dir) or env.inventory_dir)

    def where(key: str) -> str:  # where the setting was last written: a file, or -e
        return settings.origins.get(key, fallback)

    platform = options.platform or settings.platform
    launcher = options.launcher or settings.launcher
    _check_on_fail(options.on_fail, platform)
    _check_recheck(env, options, platform)
    burn_in_s = settings.burn_in_s if options.burn_in_s is None else options.burn_in_s
    tests = _burn_in(
        _tests(options, settings, f"pav_tests of {where('pav_tests')}", platform, launcher), burn_in_s
    )
    catalog.refuse_unknown(
        list(settings.test_timeouts_s), f"pav_test_timeouts_s of {where('pav_test_timeouts_s')}"
    )
    if settings.threshold_profile != "auto":
        try:
            profile_path(settings.threshold_profile)
        except PavError as exc:
            raise PavError(f"{where('pav_threshold_profile')}: {exc}") from None
    return RunInputs(
        tests=tests,
        platform=platform,
        launcher=launcher,
        host_count=settings.hosts if options.hosts is None else options.hosts,
        apply_tuning=settings.apply_tuning if options.apply_tuning is None else options.apply_tuning,
        timeouts=_with_burn_in(_timeouts(options, settings), tests, burn_in_s),
        profile=settings.threshold_profile,
        isolate=settings.isolate,
        burn_in_s=burn_in_s,
        node_policy=node_policy(
            settings.gpu_state, settings.expected_versions, where, settings.declared_hardware
        ),
    )


def _check_on_fail(action: str | None, platform: str) -> None:
    """--on-fail marks nodes through the platform's scheduler: Slurm drains hosts, Kubernetes taints nodes."""
    if action is None or ON_FAIL.get(action) == platform:
        return
    other = next((a for a, p in ON_FAIL.items() if p == platform), None)
    instead = f"use --on-fail {other} on platform {platform}" if other else "drop --on-fail"
    raise PavError(
        f"--on-fail {action} acts on platform {ON_FAIL.get(action, '?')} nodes, but this run's platform is "
        f"{platform}: {instead}"
    )


def _check_recheck(env: EnvSpec, options: Options, platform: str) -> None:
    """--recheck re-tests nodes an earlier run marked; hosts this run would create carry no mark, so it stops
    before provision creates any (a kept cluster, --reuse, or a static inventory is looked at after it)."""
    if not options.recheck or not env.provisions or options.reuse or "provision" not in options.stages:
        return
    mark = next((a for a, p in ON_FAIL.items() if p == platform), "drain")
    raise PavError(
        f"--recheck: env {env.name} would create new hosts, and a new host carries no mark of this tool "
        f"(nothing to recheck; nothing was created): recheck the hosts a run kept after --on-fail {mark} "
        f"marked them (--reuse RUN_ID), or your cluster's own inventory (--inventory FILE)"
    )


def _burn_in(tests: tuple[TestSpec, ...], seconds: int) -> tuple[TestSpec, ...]:
    """The burn-in's tests: none without a duration (a burn-in test selected then stops the run)."""
    if seconds > 0:
        return tuple(catalog.with_burn_in(list(tests), seconds))
    chosen = [s.name for s in tests if s.burn_in]
    if chosen:
        raise PavError(
            f"{', '.join(chosen)} is a burn-in and needs its length: --burn-in 5m (or pav_burn_in_s: 300)"
        )
    return tests


def _with_burn_in(timeouts: Timeouts, tests: tuple[TestSpec, ...], seconds: int) -> Timeouts:
    """A burn-in test's limit grows by the burn-in: the limit covers its start, its checks and the end."""
    if seconds <= 0:
        return timeouts
    grown = {s.name: timeouts.for_test(s.name) + seconds for s in tests if s.burn_in}
    return Timeouts(timeouts.default_s, MappingProxyType({**timeouts.per_test, **grown}))


def _tests(
    options: Options, settings: Settings, setting: str, platform: str, launcher: str
) -> tuple[TestSpec, ...]:
    """The one selection of a run's tests (catalog.select runs nowhere else)."""
    chosen = settings.tests if options.tests is None else list(options.tests)
    specs = catalog.select(chosen, setting if options.tests is None else "--tests")
    if platform == "k8s":
        if launcher != "direct":  # was ignored: the run went through Kubeflow jobs all the same
            raise PavError(
                f"--launcher {launcher} launches on hosts; the k8s platform runs tests as Kubeflow jobs: "
                f"drop --launcher {launcher} (or pav_launcher), or run with --platform hosts"
            )
        for spec in specs:
            # A CPU test stops a k8s run here, before provision creates a paid cluster.
            catalog.k8s_job_kind(spec)
    elif launcher == "slurm":
        specs = catalog.with_slurm_checks(specs)
    return tuple(specs)


def _timeouts(options: Options, settings: Settings) -> Timeouts:
    if options.test_timeout_s is not None:  # --test-timeout: every test, the per-test limits too
        return Timeouts(options.test_timeout_s)
    return Timeouts(settings.test_timeout_s, MappingProxyType(dict(settings.test_timeouts_s)))
