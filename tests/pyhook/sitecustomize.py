"""The test suite's Pythons keep what they compile from zips (tests/conftest.py puts this folder on
PYTHONPATH): Ansible's module runs on this machine (the local connection: --env local, the roles' tests)
compile the same module sources on every run, as the sim hosts' did before their cache (pav.simhosts.zipcache,
issue 49). Same cache, loaded by path (the interpreters Ansible picks here may not have the project installed)
and only when a process first compiles from a zip: most Python starts never do, and pay nothing for it.
A Python this cannot set up compiles as it would without it. It takes the place of the system's own
sitecustomize (Debian's installs apport's crash hook), which nothing in the suite needs."""

from __future__ import annotations

import os
import zipimport

# Not typing's: this runs in every Python the suite starts, and importing typing costs ~13 ms a start.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from types import CodeType

_FOLDER = os.environ.get("PAV_TEST_ZIPCACHE")
_OWN = getattr(zipimport, "_compile_source", None)


def _first(pathname: str, source: bytes) -> CodeType:
    zipimport._compile_source = _OWN  # what install() wraps, and what stays if it cannot
    try:
        import importlib.util

        here = os.path.dirname(os.path.abspath(__file__))
        spec = importlib.util.spec_from_file_location(
            "pav_test_zipcache", os.path.join(here, "..", "..", "src", "pav", "simhosts", "zipcache.py")
        )
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        module.install(_FOLDER)
    except Exception:  # a cache, never a reason for a module not to load
        zipimport._compile_source = _OWN
    return zipimport._compile_source(pathname, source)  # type: ignore[no-any-return]


if _FOLDER and _OWN is not None:
    zipimport._compile_source = _first
