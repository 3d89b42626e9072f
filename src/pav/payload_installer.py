"""A folder as one self-unpacking shell script: payload/pav_payload, which the torch_payload role runs on
each host with ansible.builtin.script (one transfer and no Python module run, where a folder, a stat and an
unarchive cost three: about 1.5 s a host on an H100 box, docs/benchmarks.md), and a Slurm run's job scripts,
which the slurm_jobs role stages the same way (a stat and a copy module run per file before).

The script checks the files already in its destination against the sha256 of each member first and, when
all match, unpacks nothing and prints `unchanged`: a second configure of hosts that keep the payload in a
shared folder reports nothing changed, as unarchive's per-member comparison did.

Every folder on the way to the destination is made and checked by roles/torch_payload/files/pav-safe-dir.sh
(the roles' own check, pasted in): made with a plain mkdir, refused when someone else owns it or can write
it; the package is unpacked into a fresh private folder and moved into place (issue 62)."""

from __future__ import annotations

import base64
import hashlib
import io
import shlex
import tarfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from pav.paths import SAFE_DIR_SH, START_JOB_SH

UNCHANGED = "unchanged"

_HEAD = r"""#!/bin/sh
# pav payload: sh THIS_FILE DEST [DIR...] [-- JOB LIMIT_S ARGV...] unpacks {name}/ into DEST, makes each DIR,
# and then starts ARGV in the background as start_job does (made by provision-and-validate's driver).
set -eu
umask 022
{lib}
{start_job}
dest=$1
shift
# The DIRs, then the job: its start rides on this script's run, not a task run of its own (issue 65).
finish() {{
  while [ "$#" -gt 0 ] && [ "$1" != -- ]; do
    safe_dir --make "$1" >/dev/null
    shift
  done
  if [ "$#" -gt 0 ]; then
    shift
    start_job "$@"
  fi
}}
# What is replaced whole: DEST itself (the payload's folder, on every launch's PYTHONPATH as root), or
# DEST/{name} (a run's job scripts, in the run's folder).
unit="$dest"{sub}
home=$(dirname -- "$unit")
# Each folder on the way is made here with a plain mkdir and checked after (owner, mode, not another's
# link), never taken as someone else left it (issue 62).
safe_dir --make "$home" >/dev/null
if [ -e "$unit" ] || [ -L "$unit" ]; then
  safe_dir "$unit"
  safe_tree "$unit"
  # Unchanged: every member matches and nothing else is there (bytecode caches and the facts read's job
  # folder aside), so nothing but the package is importable.
  count=$(find "$unit" ! -type d ! -path '*/__pycache__/*' ! -path "$unit/.async/*" | wc -l)
  if [ "$count" -eq {count} ] && (cd "$dest" && sha256sum --status -c - 2>/dev/null) <<'PAV_SUMS'
{sums}PAV_SUMS
  then
    finish "$@"
    echo {unchanged}
    exit 0
  fi
fi
# Unpacked into a fresh private folder beside it, then moved into place: nothing of the old one stays, and
# no one else can write the folder while it fills.
new=$(mktemp -d -- "$home/.pav-new.XXXXXXXXXX")
trap 'rm -rf -- "$new"' EXIT
base64 -d <<'PAV_PAYLOAD' | tar --no-same-owner -xzf - -C "$new"
{data}PAV_PAYLOAD
chmod 0755 -- "$new"
if [ -e "$unit" ] || [ -L "$unit" ]; then
  old=$(mktemp -d -- "$home/.pav-old.XXXXXXXXXX")
  mv -T -- "$unit" "$old/unit"
  rm -rf -- "$old"
fi
mv -T -- "$new"{sub} "$unit"
rm -rf -- "$new"
trap - EXIT
finish "$@"
echo unpacked
"""


def write_installer(script: Path, package: Path, *, whole: bool = True) -> Path:
    """The script for the package folder `package` (unpacked as DEST/<its name>), written at `script`.
    whole: DEST holds the package alone and is replaced whole (the payload's folder); else only DEST/<its
    name> is (a run's folder, which holds the run's other work)."""
    members = _files(package)
    script.parent.mkdir(parents=True, exist_ok=True)
    script.write_text(
        _HEAD.format(
            lib=SAFE_DIR_SH.read_text(),
            start_job=START_JOB_SH.read_text(),
            name=package.name,
            sub="" if whole else shlex.quote(f"/{package.name}"),
            count=len(members),
            sums="".join(f"{hashlib.sha256(m.data).hexdigest()}  {m.name}\n" for m in members),
            unchanged=UNCHANGED,
            data=_base64_lines(_targz(members)),
        )
    )
    return script


@contextmanager
def installer(script: Path, package: Path, *, whole: bool = True) -> Iterator[Path]:
    """write_installer's script for as long as the block runs; removed after it, also when it raises."""
    path = write_installer(script, package, whole=whole)
    try:
        yield path
    finally:
        path.unlink(missing_ok=True)


@dataclass(frozen=True)
class _Member:
    name: str  # path under DEST
    data: bytes
    mtime: float  # kept: Python trusts a cached .pyc by its source's mtime and size


def _files(package: Path) -> list[_Member]:
    """Every file of the package, bytecode caches left out."""
    found = []
    for path in sorted(package.rglob("*")):
        rel = path.relative_to(package.parent)
        if path.is_file() and "__pycache__" not in rel.parts and path.suffix != ".pyc":
            found.append(_Member(rel.as_posix(), path.read_bytes(), path.stat().st_mtime))
    return found


def _targz(members: list[_Member]) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        for member in members:
            info = tarfile.TarInfo(member.name)
            info.size, info.mode, info.mtime = len(member.data), 0o644, int(member.mtime)
            tar.addfile(info, io.BytesIO(member.data))
    return buffer.getvalue()


def _base64_lines(data: bytes) -> str:
    text = base64.b64encode(data).decode()
    return "".join(text[i : i + 76] + "\n" for i in range(0, len(text), 76))
