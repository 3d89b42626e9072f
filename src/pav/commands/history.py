"""history --env NAME [--key KEY] [--last N] [--tolerance F] [--json]: what got worse in the env's latest
run, against the earlier runs that tested the same hosts and GPUs (its key, reporting/history_key.py).

Exit 0 when no metric dropped beyond the tolerance, 1 when one did, 2 when there is nothing to read.
"""

from __future__ import annotations

import argparse
import json
import shlex
import sys
from pathlib import Path

from pav import rundir
from pav.errors import PavError
from pav.reporting import history
from pav.reporting.history_key import key_of

EXIT_OK, EXIT_DROP = 0, 1


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--env", required=True, help="the env whose runs to compare (as results.json records it)"
    )
    parser.add_argument(
        "--key",
        help="compare the latest run of this key (what it tested: env:hosts:GPUs, as `history` prints it) "
        "instead of the env's latest run",
    )
    parser.add_argument(
        "--results-root",
        type=Path,
        metavar="ROOT",
        help="where run dirs live (default $PAV_RESULTS_ROOT, else the checkout's runs/; installed from a "
        "wheel, ~/.local/share/provision-and-validate/runs)",
    )
    parser.add_argument(
        "--last", type=int, default=history.DEFAULT_LAST, metavar="N",
        help=f"compare with the median of the N runs of its key before the latest (default "
        f"{history.DEFAULT_LAST}, at least {history.MIN_RUNS})",
    )  # fmt: skip
    parser.add_argument(
        "--tolerance", type=float, default=history.DEFAULT_TOLERANCE, metavar="F",
        help=f"flag drops worse than this fraction (default {history.DEFAULT_TOLERANCE})",
    )  # fmt: skip
    parser.add_argument("--json", action="store_true", help="print the comparison as JSON (docs/results.md)")


def run(args: argparse.Namespace) -> int:
    try:
        return _run(args)
    except PavError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return exc.exit_code


def _run(args: argparse.Namespace) -> int:
    if args.last < history.MIN_RUNS:
        raise PavError(
            f"--last must be at least {history.MIN_RUNS}: a drop is judged against the median of at least "
            f"{history.MIN_RUNS} earlier runs of the same key (docs/nightly.md)"
        )
    if not 0 <= args.tolerance < 1:
        raise PavError("--tolerance is a fraction between 0 and 1, e.g. 0.05 for 5%")
    root = rundir.results_root(args.results_root)
    if not root.is_dir():
        raise PavError(f"results root {root} is not a folder; pass --results-root or set PAV_RESULTS_ROOT")
    found = history.find_runs(root, args.env)
    for line in found.unreadable:
        print(f"warning: skipped {line}", file=sys.stderr)
    if not found.runs:
        raise PavError(no_runs(args, root, found.left_out))
    runs = _of_key(found.runs, args.key, args.env, root)
    latest, earlier = runs[-1], runs[:-1]
    hist = history.record(latest.data, earlier, root, args.tolerance, args.last, found.left_out)
    if args.json:
        print(json.dumps(hist, indent=2))
        return EXIT_DROP if hist["flagged"] else EXIT_OK
    if not hist["compared_runs"]:
        print(f"{hist['key']}: one run ({latest.run_id}) under {root}; nothing to compare with yet")
    else:
        print(history.render(hist), end="")
    if line := history.left_out_line(found.left_out):
        print(line)
    return EXIT_DROP if hist["flagged"] else EXIT_OK


def no_runs(args: argparse.Namespace, root: Path, left_out: list[history.Run]) -> str:
    """Why there is nothing to compare, and the run that would make something: a command that runs as
    printed for the env's record (a run given --inventory FILE records env `custom`, which no --env names)."""
    if not left_out:
        if args.env == "custom":
            return (
                f"no runs of env custom under {root} (a run given --inventory FILE records that env); run "
                "provision-and-validate --inventory FILE first"
            )
        return f"no runs of env {args.env} under {root}; run {run_command(args, args.env, '')} first"
    last = left_out[-1]
    inventory = str(last.data.get("inventory") or "")
    return (
        f"no run of env {args.env} under {root} measured anything: {history.left_out_line(left_out)}; "
        f"once its tests can run there: {run_command(args, args.env, inventory)}"
    )


def run_command(args: argparse.Namespace, env: str, inventory: str) -> str:
    """The run of the env, as a shell takes it; its record goes where this command looks."""
    where = f"--inventory {shlex.quote(inventory)}" if env == "custom" and inventory else f"--env {env}"
    root = f" --results-root {shlex.quote(str(args.results_root))}" if args.results_root else ""
    return f"provision-and-validate {where}{root}"


def _of_key(runs: list[history.Run], key: str | None, env: str, root: Path) -> list[history.Run]:
    """The runs of --key, or all; a note on stderr where the env's runs tested more than one thing."""
    keys = dict.fromkeys(key_of(r.data) for r in runs)
    if key is not None and key not in keys:
        raise PavError(f"no runs of key {key} under {root}; env {env} has: {'; '.join(keys)}")
    wanted = key or key_of(runs[-1].data)
    if len(keys) > 1:
        others = "; ".join(k for k in keys if k != wanted)
        print(
            f"note: env {env} also has runs of {others} (compared only among themselves: --key)",
            file=sys.stderr,
        )
    return [r for r in runs if key_of(r.data) == wanted]
