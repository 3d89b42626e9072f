"""provision-and-validate: the one command. Errors are caught here, once, as one line and an exit code."""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from dataclasses import dataclass, replace
from pathlib import Path

from pav import (
    interrupts,
    module_python,
    ownership,
    paths,
    reaper,
    run_inputs,
    run_links,
    rundir,
    torch_python,
)
from pav.context import STAGES, Options, RunContext
from pav.envs import EnvSpec, custom_env, resolve_env
from pav.errors import PavError, out_of_space
from pav.extravars import parse_extra_vars
from pav.options import ON_FAIL
from pav.printable import printable
from pav.provisioning import keeper
from pav.reporting import pushgateway, timings
from pav.results import RunResults
from pav.settings import PLATFORMS, load_settings
from pav.units import parse_duration

EXIT_HELP = (
    "exit codes: 0 PASS, 1 FAIL, 2 could not run (bad input, unreachable host, missing tool), "
    "130/143 interrupted (SIGINT/SIGTERM; teardown still ran)."
)


def _version() -> str:
    """The installed distribution's version and, in a checkout, the commit it runs (bug reports need both)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        found = version("provision-and-validate")
    except PackageNotFoundError:
        found = "unknown"
    head = paths.ROOT / ".git" / "HEAD"
    try:
        ref = head.read_text().strip()
        if ref.startswith("ref: "):
            ref = (paths.ROOT / ".git" / ref[5:]).read_text().strip()
        return f"{found} ({ref[:12]})"
    except OSError:
        return found


class _Version(argparse.Action):
    """--version, worked out only when asked: every other run's start skips reading .git."""

    def __call__(self, parser: argparse.ArgumentParser, *_: object) -> None:
        print(f"{parser.prog} {_version()}")
        parser.exit()


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="provision-and-validate",
        description="Provision GPU hosts, configure them, validate every GPU and link, report, tear down.",
        epilog=f"{EXIT_HELP} {other_commands()}",
    )
    p.add_argument("--version", action=_Version, nargs=0, help="print the release (and commit) and exit")
    where = p.add_mutually_exclusive_group()
    where.add_argument("--env", default=None, help="an inventories/NAME/ env (default: local)")
    where.add_argument("--inventory", type=Path, help="your own Ansible inventory file (bare metal)")
    p.add_argument("--stages", default=",".join(STAGES), help=f"comma list, a subset of {','.join(STAGES)}")
    p.add_argument("--run-dir", type=Path, help="where results go (default ROOT/<utc-timestamp>-<env>/)")
    p.add_argument(
        "--results-root",
        type=Path,
        metavar="ROOT",
        help="where run dirs live (default $PAV_RESULTS_ROOT, else the checkout's runs/; installed from a "
        "wheel, ~/.local/share/provision-and-validate/runs)",
    )
    p.add_argument(
        "--keep",
        action="store_true",
        help="skip teardown: leave hosts and work dirs up; an env's kept hosts are then this run's, "
        "refused to other runs until --max-hours (default 12) has passed",
    )
    p.add_argument(
        "--reuse",
        metavar="RUN_ID",
        help="run on the hosts run RUN_ID kept (--keep), which any other run refuses; this run's teardown "
        "destroys them unless --keep again",
    )
    p.add_argument(
        "--dry-run", action="store_true", help="print the plan of stages, hosts and tests; change nothing"
    )
    p.add_argument("--hosts", type=int, help="how many hosts an env that provisions creates")
    p.add_argument(
        "--max-hours",
        type=int,
        metavar="H",
        help="cloud envs: label what is created to expire H hours on, for a janitor (docs/nebius.md); "
        "default: max_lifetime_hours of the values file, else 12",
    )
    p.add_argument(
        "--platform", choices=PLATFORMS, help="hosts (SSH) or k8s (PyTorchJob/MPIJob); default: pav_platform"
    )
    p.add_argument("--tests", help="comma list of tests to run instead of the env's pav_tests")
    p.add_argument(
        "--test-timeout",
        type=int,
        metavar="SECONDS",
        help="limit of every test launch, killed on the host past it "
        "(overrides pav_test_timeout_s and pav_test_timeouts_s)",
    )
    p.add_argument(
        "--burn-in",
        metavar="DURATION",
        help="add the gpu_burn test, this long: 300, 300s, 5m, 1h; 0 for none (overrides pav_burn_in_s; "
        "docs/thresholds.md, Burn-in)",
    )
    p.add_argument(
        "--launcher",
        choices=("direct", "slurm"),
        help="direct: torchrun/mpirun over SSH; slurm: every test as a Slurm job (overrides pav_launcher)",
    )
    p.add_argument(
        "--allow-missing",
        type=int,
        default=0,
        metavar="N",
        help="go on without up to N hosts that cannot be reached; their tests are reported as error",
    )
    tuning = p.add_mutually_exclusive_group()
    tuning.add_argument(
        "--apply-tuning",
        dest="apply_tuning",
        action="store_true",
        default=None,
        help="let the tuning roles change the hosts (overrides the env's pav_apply_tuning)",
    )
    tuning.add_argument(
        "--check-tuning",
        dest="apply_tuning",
        action="store_false",
        help="run the tuning roles in check mode with diff: report, change nothing",
    )
    p.add_argument(
        "-e",
        "--extra-vars",
        action="append",
        default=[],
        metavar="VARS",
        help="variables for every playbook, as ansible-playbook takes them: key=value, @file.yml or a YAML "
        "mapping; repeatable; pav_* keys override the env's settings (e.g. -e torch_payload_python=PATH)",
    )
    p.add_argument(
        "--metrics-textfile",
        type=Path,
        metavar="DIR",
        help="after the report, write the run's metrics for node_exporter's textfile collector to "
        "DIR/pav-ENV.prom, atomically (docs/nightly.md); a failure is a summary line, not the verdict",
    )
    p.add_argument(
        "--pushgateway",
        metavar="URL",
        help="after the report, push the run's metrics to this Prometheus pushgateway, one group per "
        "job pav, env and host (docs/nightly.md); a failure is a summary line, not the verdict. Basic auth: "
        f"{pushgateway.AUTH_ENV}=USER:PASSWORD in the environment, or --pushgateway-auth-file",
    )
    p.add_argument(
        "--pushgateway-auth-file",
        type=Path,
        metavar="FILE",
        help="the pushgateway's basic auth: a file holding USER:PASSWORD that only its owner can read "
        f"(default ${pushgateway.AUTH_FILE_ENV}; under systemd, a LoadCredential= file); never the URL",
    )
    p.add_argument(
        "--on-fail",
        choices=tuple(ON_FAIL),
        help="drain (hosts): after a FAIL, drain each Slurm node the report's bad parts name (scontrol "
        'update State=DRAIN Reason="pav RUN_ID: ..."; docs/slurm.md); taint (k8s): cordon each such node and '
        "taint it pav.io/unhealthy=TEST:NoSchedule (docs/kubernetes.md); a failure is a summary line, not "
        "the verdict",
    )
    p.add_argument(
        "--recheck",
        action="store_true",
        help='find the nodes this tool drained (Slurm, reason "pav ...") or tainted (k8s, pav.io/unhealthy), '
        "run only the tests each failed, on those nodes alone, and return each node whose tests pass "
        "(resume; untaint and uncordon); nodes others drained, tainted or cordoned are listed, not touched",
    )
    p.add_argument("-v", "--verbose", action="store_true", help="a progress line for every task result")
    p.add_argument(
        "--timings",
        action="store_true",
        help="after the summary, where orchestration time went: per stage, role and costliest task "
        "(also in results.json's ansible_time)",
    )
    return p


def parse_stages(text: str) -> tuple[str, ...]:
    chosen = tuple(s.strip() for s in text.split(",") if s.strip())
    unknown = [s for s in chosen if s not in STAGES]
    if unknown or not chosen:
        raise PavError(f"unknown stage(s) {', '.join(unknown) or '(none)'}; choose from {','.join(STAGES)}")
    return chosen


def _burn_in(text: str | None) -> int | None:
    if text is None:
        return None
    try:
        return parse_duration(text)
    except ValueError as exc:
        raise PavError(f"--burn-in: {exc}") from None


def where_to_run(args: argparse.Namespace) -> EnvSpec:
    """--inventory, else --env, else the env of the run whose dir --run-dir names (so that a kept run's
    printed `--stages teardown --run-dir DIR` tears down what it kept), else local."""
    if args.inventory:
        return custom_env(args.inventory)
    if args.env:
        return resolve_env(args.env)
    recorded = (rundir.recorded_run(args.run_dir) if args.run_dir else None) or reused_record(args)
    if recorded is not None:
        return custom_env(Path(recorded.inventory)) if recorded.env == "custom" else resolve_env(recorded.env)
    return resolve_env("local")


def reused_record(args: argparse.Namespace) -> rundir.RecordedRun | None:
    """The record of the run --reuse RUN_ID names, where it lies under the results root: its env and its
    state dir are where that run's hosts are."""
    if not args.reuse:
        return None
    found = rundir.recorded_run(rundir.default_run_dir(args.reuse, args.results_root))
    return found if found is not None and found.run_id == args.reuse else None


def with_recorded_state(env: EnvSpec, recorded: rundir.RecordedRun | None) -> EnvSpec:
    """The env, its state where the run this one acts on recorded it: that record, not PAV_STATE_DIR or this
    shell's default, knows where the run's hosts are (a nightly unit sets its own state dir; an operator
    tears down from a shell that does not)."""
    if recorded is None or not recorded.state_dir or recorded.env != env.name or not env.provisions:
        return env
    return replace(env, recorded_state_dir=Path(recorded.state_dir))


def own_run_dir(args: argparse.Namespace, env: EnvSpec, stages: tuple[str, ...]) -> str | None:
    """The kept run a run of stages that launch nothing acts on (its dir given), or None for a run of its
    own. A run dir is one run's: given another run's, a run that is not acting on it is refused (issue 48).
    A teardown alone given a dir that does not exist is refused: its --run-dir names the run whose work it
    removes, and a mistyped one tore down nothing, exit 0, into a dir made for it. --reuse RUN_ID names the
    run itself, so its --run-dir is its own record; a teardown of no kept run leaves --run-dir out."""
    if args.run_dir is None:
        return None
    recorded = rundir.recorded_run(args.run_dir)
    if recorded is None:
        if set(stages) == {"teardown"} and not args.reuse and not args.run_dir.exists():
            reuse = " or --reuse RUN_ID" if env.provisions else ""
            what = "destroy what the env's state holds" if env.provisions else "end what gone runs left"
            raise PavError(
                f"--run-dir {args.run_dir} does not exist: a teardown given --run-dir acts on that run; "
                f"pass the kept run's dir (its summary.txt names it){reuse}, or leave --run-dir out to "
                f"{what} (its record then goes under --results-root)"
            )
        return None
    if "validate" not in stages and recorded.env == env.name:
        return recorded.run_id
    what = f"holds run {recorded.run_id}'s record (env {recorded.env})"
    if recorded.env != env.name:
        raise PavError(f"--run-dir {args.run_dir} {what}, not env {env.name}'s: drop --env/--inventory")
    raise PavError(
        f"--run-dir {args.run_dir} {what}: a run writes only its own record; pass a new --run-dir, or "
        "act on that run with stages that launch nothing (--stages teardown, or collect,report)"
    )


def payload_python(env: EnvSpec, options: Options) -> str:
    """The Python that runs the payload on this machine (the local env). Without torch anywhere, a run that
    configures or validates stops here, before any stage (and its dry run too): it failed 13 s in, in
    configure. Stages that run no payload (a teardown) go on with the driver's own Python."""
    chosen = torch_python.choose()
    if chosen is None and {"configure", "validate"} & set(options.stages):
        raise PavError(torch_python.no_torch(env.name))
    return chosen or sys.executable


def make_context(args: argparse.Namespace) -> RunContext:
    not_found = paths.missing()  # an install without the roles and playbooks: say where it looked
    if not_found:
        raise PavError(not_found)
    env: EnvSpec = where_to_run(args)
    # Its Terraform state, keys and keep records drive the run: another account's is refused (issue 62).
    paths.refuse_untrusted(paths.state_dir(env.state_name), "state dir")
    if args.hosts is not None and args.hosts < 1:
        raise PavError("--hosts must be at least 1")
    for flag, value in (("--hosts", args.hosts), ("--max-hours", args.max_hours), ("--reuse", args.reuse)):
        if value is not None and not env.provisions:
            raise PavError(
                f"{flag} applies to envs that create their hosts (sim, nebius-*); env {env.name} has a fixed "
                f"inventory ({env.hosts_file}): drop {flag}"
            )
    if args.reuse and args.hosts is not None:
        raise PavError(f"--reuse {args.reuse} runs on the hosts that run kept, as they are: drop --hosts")
    if args.max_hours is not None and not 1 <= args.max_hours <= 720:
        raise PavError("--max-hours must be 1 to 720 (30 days)")
    if args.allow_missing < 0:
        raise PavError("--allow-missing must be 0 or more")
    if args.test_timeout is not None and args.test_timeout < 1:
        raise PavError("--test-timeout must be at least 1 second")
    auth = pushgateway.credentials(args.pushgateway, args.pushgateway_auth_file, os.environ)
    options = Options(
        stages=parse_stages(args.stages),
        keep=args.keep,
        dry_run=args.dry_run,
        verbose=args.verbose,
        hosts=args.hosts,
        apply_tuning=args.apply_tuning,
        tests=tuple(t.strip() for t in args.tests.split(",") if t.strip()) if args.tests else None,
        platform=args.platform,
        launcher=args.launcher,
        test_timeout_s=args.test_timeout,
        allow_missing=args.allow_missing,
        max_hours=args.max_hours,
        reuse=args.reuse,
        results_root=rundir.results_root(args.results_root),
        extra_vars=parse_extra_vars(args.extra_vars),
        metrics_textfile=args.metrics_textfile,
        pushgateway=args.pushgateway,
        pushgateway_auth=auth,
        on_fail=args.on_fail,
        recheck=args.recheck,
        burn_in_s=_burn_in(args.burn_in),
    )
    settings = load_settings(
        env.inventory_dir, options.extra_vars, provisions=env.provisions, hosts_file=env.hosts_file
    )
    if settings.payload_python_auto and "torch_payload_python" not in options.extra_vars:
        options.extra_vars["torch_payload_python"] = payload_python(env, options)
    if settings.payload_python_auto and "ansible_python_interpreter" not in options.extra_vars:
        options.extra_vars["ansible_python_interpreter"] = module_python.choose()
    if settings.payload_python_auto and "pav_remote_dir" not in settings.origins and os.geteuid() != 0:
        # This machine run as oneself: /var/lib is root's, the work folder goes to one's own state folder.
        settings = replace(settings, remote_dir=str(paths.own_remote_dir()))
    inputs = run_inputs.resolve(env, options, settings)
    # Stages that launch nothing, given a kept run's dir, act on that run (its work on the hosts); its
    # record stays as it is: this run's own goes beside it.
    kept = own_run_dir(args, env, options.stages)
    env = with_recorded_state(env, rundir.recorded_run(args.run_dir) if kept else reused_record(args))
    run_id = rundir.new_run_id(env.name)
    if kept:
        run_dir = args.run_dir.parent / run_id
    else:
        run_dir = args.run_dir or rundir.default_run_dir(run_id, options.results_root)
    results = RunResults(
        run_id=run_id,
        env=env.name,
        inventory=str(env.hosts_file or env.terraform_dir),
        run_dir=str(run_dir),
        threshold_profile_chosen=inputs.profile,
        kept_run={"run_id": kept, "run_dir": str(args.run_dir)} if kept else {},
        reused=options.reuse or "",
    )
    return RunContext(
        env=env, options=options, settings=settings, run_dir=run_dir, results=results, inputs=inputs
    )


def run(argv: list[str]) -> int:
    from pav import pipeline, plan
    from pav.ansible_exec import close_connections, control_dir

    args = build_parser().parse_args(argv)
    ctx = make_context(args)
    if gone := already_torn_down(ctx):
        print(gone)
        return 0
    if not ctx.options.dry_run:
        refuse_lost_state(ctx)
    if note := recorded_state_note(ctx):
        print(note, flush=True)
    # A run checks where its end writes as its dry run does: found at the end, hours on, it was only a line.
    plan.check_exports(ctx)
    platform = pipeline.platform_for(ctx)
    if ctx.options.dry_run:
        return platform.dry_run(ctx)
    if platform.check is not None:  # bad input stops here, as in the dry run: no run dir is made for it
        platform.check(ctx)
    # What the driver removes after its playbooks, the reaper removes if the driver dies first; and it scrubs
    # the run dir, as the driver's end would have.
    ansible = ctx.run_dir.resolve() / "ansible"
    leftovers = (str(ansible / "*" / "tmp"), str(control_dir(ansible)))
    watched = reaper.watching(ctx.results.run_id, leftovers, scrub=ctx.run_dir)
    try:
        with rundir.prepared(ctx.run_dir), ownership.claimed(ctx), watched:
            # From the start: a driver killed before its first stage ends still leaves its record (ERROR).
            ctx.results.write(ctx.run_dir / "results.json")
            print(f"run dir: {ctx.run_dir}", flush=True)
            try:
                code = pipeline.execute(ctx, platform)
            finally:
                close_connections(ansible)  # k8s has no finish hook to remove the control folder made above
        link_kept_run(ctx)
    except OSError as exc:  # a disk that filled mid-run is the user's disk: one line, not a traceback
        if (full := out_of_space(exc, ctx.run_dir)) is None:
            raise
        raise full from None
    summary = (ctx.run_dir / "summary.txt").read_text()
    # The error line goes to stderr below, once; summary.txt keeps it for whoever reads the file.
    said = "".join(ln for ln in summary.splitlines(keepends=True) if not ln.startswith("error: "))
    print(printable(said, keep="\n"), end="")
    if args.timings:
        print("\n".join(timings.render(ctx.results)))
    if ctx.results.error:
        print(f"error: {printable(ctx.results.error)}", file=sys.stderr)
    return code


def link_kept_run(ctx: RunContext) -> None:
    """A kept run this run tore down gets one link to this run's record; its own files stay as they are. The
    kept run is the one whose dir a teardown was given, and the one that kept the hosts a run destroyed
    (--reuse RUN_ID without --keep: its teardown destroys them), so a later teardown of that run knows they
    are gone and by whom (already_torn_down). Where a destroy took nothing, no run's hosts went: no link."""
    if ctx.options.keep:
        return
    teardown = next((s for s in ctx.results.stages if s.name == "teardown"), None)
    if teardown is None or teardown.status != "ok" or (ctx.env.provisions and not ctx.results.destroyed):
        return
    kept_dirs = [ctx.results.kept_run.get("run_dir", ""), ctx.kept_dir]
    for kept_dir in dict.fromkeys(d for d in kept_dirs if d):
        run_links.link_teardown(Path(kept_dir), ctx.results.run_id, ctx.run_dir, teardown.ended or "")


def already_torn_down(ctx: RunContext) -> str:
    """A teardown alone of a kept run whose hosts are gone (a --reuse run destroyed them, or an earlier
    teardown did: the run's dir holds its link): the line that says so, by whom and when, instead of a
    teardown that would destroy nothing and stamp itself the run that tore them down. "" otherwise. Hosts an
    env provisions only: a static host's teardown may have failed on some hosts and is run again."""
    kept = ctx.results.kept_run
    if not kept or not ctx.env.provisions or set(ctx.options.stages) != {"teardown"}:
        return ""
    link = run_links.torn_down(Path(kept["run_dir"]))
    if link is None:
        return ""
    return (
        f"nothing to tear down: run {kept['run_id']}'s hosts were already torn down at "
        f"{link['torn_down_at']} by run {link['by_run']} (its run dir {link['by_run_dir']})"
    )


def acted_on(ctx: RunContext) -> tuple[str, Path] | None:
    """The kept run whose hosts this run acts on by its record (a teardown given its dir, --reuse), and that
    record's dir; None for a run of its own."""
    if ctx.results.kept_run:
        return ctx.results.kept_run["run_id"], Path(ctx.results.kept_run["run_dir"])
    if ctx.options.reuse:
        return ctx.options.reuse, rundir.default_run_dir(ctx.options.reuse, ctx.options.results_root)
    return None


def refuse_lost_state(ctx: RunContext) -> None:
    """A kept run's hosts are where its record says its state is. Where that state is gone (deleted, moved, or
    on another machine), Terraform has nothing to destroy and a teardown said "ok" while the hosts, paid VMs
    on a cloud, ran on: refused instead, before any lock or stage."""
    run = acted_on(ctx)
    state = ctx.env.recorded_state_dir
    if run is None or state is None or keeper.resources(state):
        return
    recorded = rundir.recorded_run(run[1])
    if recorded is None or not recorded.left_hosts or run_links.torn_down(run[1]) is not None:
        return  # a run whose hosts a later run destroyed: the env's record says so (pav.ownership)
    found = "does not exist" if not state.exists() else "holds none for it"
    raise PavError(
        f"kept run {run[0]} recorded its Terraform state in {state}, which {found}: restore that folder "
        f"(a state moved elsewhere goes back there) and run this again; nothing was destroyed"
    )


def recorded_state_note(ctx: RunContext) -> str:
    """One line where the recorded state dir is not the one this shell would use: the recorded one wins."""
    run, state = acted_on(ctx), ctx.env.recorded_state_dir
    if run is None or state is None:
        return ""
    shell = paths.state_dir(ctx.env.state_name)
    if shell == state:
        return ""
    whose = f"PAV_STATE_DIR={shell}" if os.environ.get("PAV_STATE_DIR") else f"this shell's default {shell}"
    return f"state dir: {state}, as kept run {run[0]} recorded it (not {whose}): its hosts are there"


@dataclass(frozen=True)
class Subcommand:
    description: str
    exits: str
    usage: str  # what the run's --help says of it: its arguments and, in brackets, what it is for


SUBCOMMANDS = {
    "check-nccl": Subcommand(
        "Grade nccl-tests outputs (stdout logs or -J JSON) from any cluster.",
        "exit: 0 every log passes, 1 any fails, 2 a file cannot be read; JSON: docs/check-nccl.md",
        "LOG... (grade nccl-tests logs)",
    ),
    "history": Subcommand(
        "Compare the latest run of an env with its previous runs: what got worse.",
        "exit: 0 nothing dropped, 1 a metric dropped beyond the tolerance, 2 no runs or bad input",
        "--env NAME (what got worse since earlier runs)",
    ),
    "gates": Subcommand(
        "Print the gates a recorded run's host facts derive (limit, fraction, source facts) and those judge "
        "applies to each of its tests.",
        "exit: 0 every gate derived, 1 a fact is missing, 2 the file cannot be read",
        "RUN_DIR (the gates its facts derive and judge applies)",
    ),
    "preflight": Subcommand(
        "Check this node's state in about a second, no test: GPUs another process holds, and what gpu_health "
        "names from the facts alone (links, ECC, row remapping, Xids, clocks, power limit). For a Slurm "
        "Prolog or HealthCheckProgram and a Kubernetes init container (docs/preflight.md).",
        "exit: 0 the node is fit, 1 a problem (a FAIL: line each), 2 its state could not be read",
        "(this node's state in about a second, no test: a Slurm Prolog, a k8s init container)",
    ),
    "judge": Subcommand(
        "Judge a recorded run (its dir or results.json) again by this release's gates: profile, derived, "
        "gpu_health, scaling; a test its gates did not decide keeps its recorded outcome.",
        "exit: 0 PASS, 1 FAIL (or the run could not finish), 2 NOTHING RUN (every test skipped) or bad "
        "input; JSON: docs/thresholds.md",
        "RUN_DIR (a recorded run judged by this release's gates)",
    ),
}


def other_commands() -> str:
    """The run's --help names every command beside it, from SUBCOMMANDS."""
    said = "; ".join(f"provision-and-validate {name} {spec.usage}" for name, spec in SUBCOMMANDS.items())
    return f"Other commands: {said}; each takes --help"


def subcommand(name: str, argv: list[str]) -> int:
    """A command beside the run: src/pav/commands/NAME.py gives its arguments and runs it."""
    command = importlib.import_module(f"pav.commands.{name.replace('-', '_')}")
    spec = SUBCOMMANDS[name]
    parser = argparse.ArgumentParser(
        prog=f"provision-and-validate {name}", description=spec.description, epilog=spec.exits
    )
    command.add_arguments(parser)
    return command.run(parser.parse_args(argv))


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv and argv[0] in SUBCOMMANDS:
        return subcommand(argv[0], argv[1:])
    interrupts.install()
    try:
        return run(argv)
    except PavError as exc:
        print(f"error: {printable(str(exc))}", file=sys.stderr)
        return exc.exit_code


if __name__ == "__main__":
    sys.exit(main())
