"""Inside a sim host only: a cache of what Python compiles from zip files (copied into each host by host-up).

Every Ansible module run ships its module and module_utils in a zip, and Python's zipimport compiles the
sources anew each time (it writes no .pyc): 0.13 of a module run's 0.2 CPU-s here, for the same ~50 source
files on every run (docs/benchmarks.md, issue 49). The hosts' system Python loads this through a .pth file
and keeps each compiled source, by its hash, in a folder only root may write; what runs is unchanged, only
the compile is skipped. A code object read back keeps the file name of the zip that first compiled it (a
traceback names that temp path).

Not imported by the tool: host-up copies this file into the host's root filesystem as pav_sim_zipcache.
"""

from __future__ import annotations

import marshal
import os
import stat
import sys
import zipimport
from collections.abc import Callable
from types import CodeType

Compile = Callable[[str, bytes], CodeType]


def install(folder: str) -> Compile:
    """Compile through the cache in `folder` from now on; returns zipimport's own compile (uninstall)."""
    own: Compile = zipimport._compile_source  # type: ignore[attr-defined]
    safe: list[bool] = []

    def compile_source(pathname: str, source: bytes) -> CodeType:
        if not safe:
            safe.append(_private(folder))
        if not safe[0]:
            return own(pathname, source)
        path = os.path.join(folder, entry_name(source))
        try:
            with open(path, "rb") as f:
                return marshal.load(f)  # type: ignore[no-any-return]
        except (OSError, EOFError, ValueError, TypeError):
            pass
        code = own(pathname, source)
        _store(path, code)
        return code

    zipimport._compile_source = compile_source  # type: ignore[attr-defined]
    return own


def entry_name(source: bytes) -> str:
    """A source's file in the cache: its hash and this Python's bytecode tag (one folder serves several)."""
    import hashlib  # here: most Python starts on a host compile nothing from a zip

    return hashlib.sha256(sys.implementation.cache_tag.encode() + b"\0" + source).hexdigest()


def uninstall(own: Compile) -> None:
    zipimport._compile_source = own  # type: ignore[attr-defined]


def _private(folder: str) -> bool:
    """Only a folder of this user that nobody else may write holds code this process will run."""
    try:
        info = os.stat(folder)
    except OSError:
        return False
    return stat.S_ISDIR(info.st_mode) and info.st_uid == os.geteuid() and not info.st_mode & 0o022


def _store(path: str, code: CodeType) -> None:
    """Written aside and renamed: a process reading at the same time sees the whole file or none."""
    aside = f"{path}.{os.getpid()}"
    try:
        with open(aside, "wb") as f:
            marshal.dump(code, f)
        os.replace(aside, path)
    except OSError:
        import contextlib  # here: a write that fails is rare, and every Python start on the host loads this

        with contextlib.suppress(OSError):
            os.unlink(aside)
