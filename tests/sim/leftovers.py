"""What a sim cluster leaves behind: namespaces, bridge, mounts, processes. Tests assert it is nothing."""

from __future__ import annotations

import subprocess
from pathlib import Path

from pav.provisioning import sim


def cluster_id(state_dir: Path) -> str:
    return str(sim.preview_variables(state_dir, 1)["cluster_id"])


def leftovers(state_dir: Path) -> list[str]:
    cid = cluster_id(state_dir)
    found: list[str] = []
    netns = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True, check=True).stdout
    found += [f"netns {ln.split()[0]}" for ln in netns.splitlines() if ln.startswith(f"pav-{cid}-")]
    links = subprocess.run(["ip", "-br", "link"], capture_output=True, text=True, check=True).stdout
    found += [f"link {ln.split()[0]}" for ln in links.splitlines() if f"-{cid}" in ln.split()[0]]
    with open("/proc/self/mountinfo") as f:
        found += [f"mount {p}" for p in (ln.split()[4] for ln in f) if p.startswith(str(state_dir))]
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            if (proc / "stat").read_text().rsplit(")", 1)[1].split()[0] == "Z":
                continue
            cmd = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode()
        except (OSError, IndexError):
            continue
        if str(state_dir) in cmd or f"pav-{cid}-" in cmd:
            found.append(f"process {proc.name}: {cmd[:80]}")
    return found


SLURM_DAEMONS = ("slurmctld", "slurmd", "slurmstepd", "munged")


def slurm_daemons(state_dir: Path) -> list[str]:
    """Slurm and munge daemons running in the cluster's hosts (their network namespaces)."""
    cid = cluster_id(state_dir)
    netns = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True, check=True).stdout
    found = []
    for ns in (ln.split()[0] for ln in netns.splitlines() if ln.startswith(f"pav-{cid}-")):
        pids = subprocess.run(["ip", "netns", "pids", ns], capture_output=True, text=True, check=False).stdout
        for pid in pids.split():
            try:
                comm = Path(f"/proc/{pid}/comm").read_text().strip()
            except OSError:
                continue
            if comm in SLURM_DAEMONS:
                found.append(f"{ns} {pid} {comm}")
    return found


def alive(entries: list[str]) -> list[str]:
    """Which of slurm_daemons()'s entries still run (same pid, same name)."""
    out = []
    for entry in entries:
        _, pid, comm = entry.split()
        try:
            if Path(f"/proc/{pid}/comm").read_text().strip() == comm:
                out.append(entry)
        except OSError:
            continue
    return out
