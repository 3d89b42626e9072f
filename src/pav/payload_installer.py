"""A folder as one self-unpacking shell script: payload/pav_payload, which the torch_payload role runs on
each host with ansible.builtin.script (one transfer and no Python module run, where a folder, a stat and an
unarchive cost three: about 1.5 s a host on an H100 box, docs/benchmarks.md), and a Slurm run's job scripts,
which the slurm_jobs role stages the same way (a stat and a copy module run per file before).

The script checks the files already in its destination against the sha256 of each member first and, when
all match, unpacks nothing and prints `unchanged`: a second configure of hosts that keep the payload in a
shared folder reports nothing changed, as unarchive's per-member comparison did."""

from __future__ import annotations

import base64
import hashlib
import io
import tarfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

UNCHANGED = "unchanged"

_HEAD = r"""#!/bin/sh
# pav payload: sh THIS_FILE DEST unpacks pav_payload/ into DEST (made by provision-and-validate's driver).
set -eu
umask 022
dest=$1
uid=$(id -u)
who=$( [ "$uid" = 0 ] || id -un)
# DEST goes on every launch's PYTHONPATH, run as root: each folder on the way to it must be owned by root or
# this user and writable by no one else (a root-owned sticky folder such as /var/tmp may lie on the way),
# and so must everything in it. A planted folder or file is refused, never used (issue 47).
refuse() {{
  echo "pav: unsafe payload folder: $1 is owned by $(stat -L -c '%U (uid %u), mode %a' "$1");" \
    "it must be owned by root${{who:+ or $who}} and writable by no one else:" \
    "remove it, or set pav_remote_dir" >&2
  exit 3
}}
owned() {{ case $(stat -c %u "$1") in 0|"$uid") ;; *) refuse "$1" ;; esac; }}
set -f
path=
for part in $(echo "$dest" | tr '/' ' '); do
  path="$path/$part"
  [ -e "$path" ] || break
  owned "$path"
  set -- $(stat -L -c '%u %a' "$path")
  case $1 in 0|"$uid") ;; *) refuse "$path" ;; esac
  # Others may write it only if it is root's and sticky (/tmp, /var/tmp): nobody else can replace our folder.
  if [ $(( 0$2 & 022 )) -ne 0 ] && {{ [ "$1" != 0 ] || [ $(( 0$2 & 01000 )) -eq 0 ]; }}; then
    refuse "$path"
  fi
done
set +f
if [ -d "$dest" ]; then
  bad=$(find "$dest" \( ! -user 0 ! -user "$uid" \) -print -quit -o ! -type l -perm /022 -print -quit)
  [ -z "$bad" ] || refuse "$bad"
  # Files the payload does not ship go (bytecode caches aside): nothing but the payload is importable.
  find "$dest" ! -type d ! -path '*/__pycache__/*' | while read -r file; do
    grep -qxF "${{file#"$dest"/}}" <<'PAV_NAMES' || rm -f -- "$file"
{names}PAV_NAMES
  done
fi
if [ -d "$dest" ] && (cd "$dest" && sha256sum --status -c - 2>/dev/null) <<'PAV_SUMS'
{sums}PAV_SUMS
then
  echo {unchanged}
  exit 0
fi
mkdir -p "$dest"
base64 -d <<'PAV_PAYLOAD' | tar --no-same-owner -xzf - -C "$dest"
{data}PAV_PAYLOAD
echo unpacked
"""


def write_installer(script: Path, package: Path) -> Path:
    """The script for the package folder `package` (unpacked as DEST/<its name>), written at `script`."""
    members = _files(package)
    script.parent.mkdir(parents=True, exist_ok=True)
    script.write_text(
        _HEAD.format(
            sums="".join(f"{hashlib.sha256(m.data).hexdigest()}  {m.name}\n" for m in members),
            names="".join(f"{m.name}\n" for m in members),
            unchanged=UNCHANGED,
            data=_base64_lines(_targz(members)),
        )
    )
    return script


@contextmanager
def installer(script: Path, package: Path) -> Iterator[Path]:
    """write_installer's script for as long as the block runs; removed after it, also when it raises."""
    path = write_installer(script, package)
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
