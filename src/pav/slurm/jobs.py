"""Job scripts: jinja2 templates (templates/*.sbatch.j2) rendered into RUN/slurm/, one per job."""

from __future__ import annotations

import math
import shlex
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import jinja2

TEMPLATES = Path(__file__).parent / "templates"


@dataclass
class Job:
    """One sbatch submission: what the script asks Slurm for and what each node runs."""

    name: str  # script file stem, unique in the run
    test: str
    template: str  # host, cluster_torchrun, check
    nodes: int
    tasks_per_node: int
    cpus_per_task: int
    gpus_per_node: int
    minutes: int
    workdir: str  # the job's working folder (--chdir)
    log: str  # the job's output file (--output), %j is the job id
    out: str  # where the tasks write their rank reports
    nodelist: str = ""  # pin to these nodes (host-scope jobs)
    argv: list[str] = field(default_factory=list)  # host jobs: the command; others: payload args
    extra: dict[str, Any] = field(default_factory=dict)  # template-specific values


def minutes_for(timeout_s: int) -> int:
    """Slurm's time limit is a backstop behind the launch's own timeout, which cancels the job first."""
    return math.ceil(timeout_s / 60) + 1


def render(job: Job) -> str:
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(TEMPLATES),
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True,
        trim_blocks=True,
        lstrip_blocks=True,
        autoescape=False,
    )
    env.filters["quote"] = shlex.quote
    env.filters["quote_all"] = lambda args: " ".join(shlex.quote(a) for a in args)
    return env.get_template(f"{job.template}.sbatch.j2").render(**asdict(job))


def write(job: Job, run_dir: Path) -> Path:
    path = run_dir / "slurm" / f"{job.name}.sbatch"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(render(job))
    return path
