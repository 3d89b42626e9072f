"""Errors a user can act on. Raised anywhere, caught once in the CLI."""

from __future__ import annotations

import errno
from pathlib import Path

# A disk that filled up, or a quota used up: the user's disk, never the tool's bug.
NO_SPACE = {errno.ENOSPC: "its disk is full", errno.EDQUOT: "its disk quota is used up"}


class PavError(Exception):
    """A run that could not go on. The message names the problem and the fix, on one line."""

    exit_code = 2


class Interrupted(PavError):
    """SIGINT or SIGTERM arrived; teardown still runs."""

    def __init__(self, signum: int) -> None:
        import signal

        super().__init__(f"interrupted by {signal.Signals(signum).name}")
        self.exit_code = 128 + signum


def out_of_space(exc: BaseException, run_dir: Path) -> PavError | None:
    """The one line for a write that found no space (ENOSPC, EDQUOT), worded as the start-of-run free-space
    check words it, naming the folder (the file's, where the error names one, else the run dir) and the fix;
    None for any other error. What the run wrote before stays where it is."""
    if not isinstance(exc, OSError) or exc.errno not in NO_SPACE:
        return None
    folder = Path(exc.filename).parent if isinstance(exc.filename, str | Path) and exc.filename else run_dir
    inside = folder == run_dir or run_dir in folder.parents
    what = f"run dir {run_dir}" if inside else str(folder)
    fix = "free space or pass --run-dir elsewhere" if inside else "free space there"
    return PavError(
        f"{what}: {NO_SPACE[exc.errno]} ({exc.strerror or exc}); {fix}; what the run wrote before stays in it"
    )
