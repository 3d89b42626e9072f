#!/usr/bin/python
"""Write a role's related files in one module run: each file's content (rendered on the controller), mode and
owner, and the folders they live in.

One module run where a template task per file was a stat, a transfer and a copy or file module each (three
to five round trips and SSH sessions a file, a host): the controller's CPU per host is what a large cluster's
configure waits on (issue 65, docs/benchmarks.md).
"""

from __future__ import annotations

DOCUMENTATION = r"""
module: pav_files
short_description: Write several small files (and their folders) in one run, idempotently
description:
  - Each file is written only when its content, mode, owner or group differs; a file that matches is left
    alone, so a second run changes nothing.
  - Check mode reports what would change and writes nothing; diff mode returns one diff per file or folder
    that changes, each named by its path.
  - A file is written beside itself and renamed into place (atomic).
  - A file given a C(line) and C(regexp) instead of C(content) keeps its other lines, as lineinfile does
    it. The last line matching C(regexp) becomes C(line), else C(line) is appended.
  - A file given a C(block) and C(marker) keeps its other lines, as blockinfile does it. The lines between
    the marker's BEGIN and END lines (C({mark}) in C(marker) replaced by each) become C(block), else the
    block and its marker lines are appended; an empty C(block) removes them.
  - Each C(on_change) command runs after the files, only when its C(path) changed and not in check mode,
    a handler's work without a handler's task run per host.
options:
  files:
    description:
      - The files, each C(path), C(mode) (octal string) and C(content), or C(line) and C(regexp), or C(block)
        and C(marker).
    type: list
    elements: dict
    required: true
  on_change:
    description: Commands, each C(path) (of a file or folder above) and C(argv), run when that path changed.
    type: list
    elements: dict
    default: []
  facts:
    description: Host facts to set, returned as the module's ansible_facts (a set_fact's work, in this run).
    type: dict
    default: {}
  dirs:
    description: Folders to make (or set the mode and owner of) before the files, each C(path) and C(mode).
    type: list
    elements: dict
    default: []
  owner:
    description: Owner of every file and folder.
    type: str
    default: root
  group:
    description: Group of every file and folder.
    type: str
    default: root
author: provision-and-validate
"""

RETURN = r"""
changed_paths:
  description: The files and folders that changed (or would, in check mode), in the order given.
  returned: always
  type: list
ran:
  description: The on_change commands that ran (argv each), in the order given.
  returned: always
  type: list
"""

import grp
import os
import pwd
import re
import stat
import subprocess
import tempfile
from typing import Any

from ansible.module_utils.basic import AnsibleModule

CONTENT_KEYS = (("content",), ("line", "regexp"), ("block", "marker"))  # a file's content, one way of three


def ids(module: AnsibleModule) -> tuple[int, int]:
    try:
        return pwd.getpwnam(module.params["owner"]).pw_uid, grp.getgrnam(module.params["group"]).gr_gid
    except KeyError as exc:
        module.fail_json(msg=f"no such user or group on the host: {exc}")
        raise


def state(path: str) -> os.stat_result | None:
    try:
        return os.lstat(path)
    except FileNotFoundError:
        return None


def attrs(st: os.stat_result | None, kind: str) -> dict[str, Any]:
    if st is None:
        return {"state": "absent"}
    return {"state": kind, "mode": f"{stat.S_IMODE(st.st_mode):04o}", "uid": st.st_uid, "gid": st.st_gid}


def ensure_dir(module: AnsibleModule, spec: dict[str, Any], uid: int, gid: int) -> dict[str, Any] | None:
    path, mode = spec["path"], int(str(spec["mode"]), 8)
    st = state(path)
    if st is not None and not stat.S_ISDIR(st.st_mode):
        module.fail_json(msg=f"{path} exists and is not a folder")
    want = {"state": "directory", "mode": f"{mode:04o}", "uid": uid, "gid": gid}
    have = attrs(st, "directory")
    if have == want:
        return None
    if not module.check_mode:
        if st is None:
            os.makedirs(path, mode)
        os.chown(path, uid, gid)
        os.chmod(path, mode)
    return {"before": have, "after": want, "before_header": path, "after_header": path}


def ensure_file(module: AnsibleModule, spec: dict[str, Any], uid: int, gid: int) -> dict[str, Any] | None:
    path, mode = spec["path"], int(str(spec["mode"]), 8)
    if "content" in spec:
        content = str(spec["content"])
    elif "block" in spec:
        content = with_block(path, str(spec["marker"]), str(spec["block"]))
    else:
        content = with_line(path, str(spec["regexp"]), str(spec["line"]))
    st = state(path)
    if st is not None and not stat.S_ISREG(st.st_mode):
        module.fail_json(msg=f"{path} exists and is not a regular file")
    before = ""
    if st is not None:
        with open(path, encoding="utf-8", errors="surrogateescape") as f:
            before = f.read()
    same_meta = st is not None and (stat.S_IMODE(st.st_mode), st.st_uid, st.st_gid) == (mode, uid, gid)
    if before == content and same_meta:
        return None
    if not module.check_mode:
        if before != content or st is None:
            write(path, content, mode, uid, gid)
        else:
            os.chown(path, uid, gid)
            os.chmod(path, mode)
    if before == content and st is not None:
        after = {"state": "file", "mode": f"{mode:04o}", "uid": uid, "gid": gid}
        return {"before": attrs(st, "file"), "after": after, "before_header": path, "after_header": path}
    return {"before": before, "after": content, "before_header": path, "after_header": path}


def lines_of(path: str) -> list[str]:
    """The file's lines with their endings; an absent file has none."""
    try:
        with open(path, encoding="utf-8", errors="surrogateescape") as f:
            return f.read().splitlines(keepends=True)
    except FileNotFoundError:
        return []


def with_line(path: str, regexp: str, line: str) -> str:
    """The file's content with `line` where the last line matching `regexp` was, or appended (lineinfile's
    rule)."""
    lines = lines_of(path)
    found = [i for i, text in enumerate(lines) if re.search(regexp, text.rstrip("\r\n"))]
    if found:
        lines[found[-1]] = line + "\n"
    else:
        if lines and not lines[-1].endswith("\n"):
            lines[-1] += "\n"
        lines.append(line + "\n")
    return "".join(lines)


def with_block(path: str, marker: str, block: str) -> str:
    """The file's content with `block` between the marker lines, where they were (the last of each), or
    appended; blockinfile's rule, so a file it wrote reads as unchanged here."""
    lines = lines_of(path)
    begin, end = (marker.replace("{mark}", mark) for mark in ("BEGIN", "END"))
    if block and not block.endswith("\n"):
        block += "\n"
    new = [begin + "\n", *block.splitlines(keepends=True), end + "\n"] if block else []
    at = {mark: i for i, text in enumerate(lines) for mark in (begin, end) if text.rstrip("\r\n") == mark}
    if begin in at and end in at:
        first, last = sorted((at[begin], at[end]))
        del lines[first : last + 1]
    else:
        first = len(lines)
    if first > 0 and not lines[first - 1].endswith("\n"):
        lines[first - 1] += "\n"
    lines[first:first] = new
    return "".join(lines)


def run_on_change(module: AnsibleModule, changed: list[str]) -> list[list[str]]:
    ran = []
    for spec in module.params["on_change"]:
        if spec.get("path") not in changed or module.check_mode:
            continue
        argv = [str(a) for a in spec["argv"]]
        proc = subprocess.run(argv, capture_output=True, text=True, check=False)
        if proc.returncode != 0:
            module.fail_json(
                msg=f"{' '.join(argv)} failed (rc {proc.returncode}): {proc.stderr.strip()}",
                changed=True,
                changed_paths=changed,
                ran=ran,
            )
        ran.append(argv)
    return ran


def write(path: str, content: str, mode: int, uid: int, gid: int) -> None:
    fd, tmp = tempfile.mkstemp(prefix=".pav-", dir=os.path.dirname(path) or ".")
    try:
        with os.fdopen(fd, "w", encoding="utf-8", errors="surrogateescape") as f:
            f.write(content)
        os.chown(tmp, uid, gid)
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise


def main() -> None:
    module = AnsibleModule(
        argument_spec={
            "files": {"type": "list", "elements": "dict", "required": True},
            "dirs": {"type": "list", "elements": "dict", "default": []},
            "on_change": {"type": "list", "elements": "dict", "default": []},
            "facts": {"type": "dict", "default": {}},
            "owner": {"type": "str", "default": "root"},
            "group": {"type": "str", "default": "root"},
        },
        supports_check_mode=True,
    )
    uid, gid = ids(module)
    diffs, changed = [], []
    steps = [(ensure_dir, d) for d in module.params["dirs"]] + [
        (ensure_file, f) for f in module.params["files"]
    ]
    for step, spec in steps:
        has_content = any(all(key in spec for key in keys) for keys in CONTENT_KEYS)
        if not spec.get("path") or "mode" not in spec or (step is ensure_file and not has_content):
            content = "content (or line and regexp, or block and marker)"
            needs = f"path, mode and {content}" if step is ensure_file else "path and mode"
            module.fail_json(msg=f"each entry needs {needs}: {spec}")
        try:
            diff = step(module, spec, uid, gid)
        except OSError as exc:
            module.fail_json(msg=f"{spec['path']}: {exc.strerror or exc}", changed_paths=changed)
        if diff is not None:
            changed.append(spec["path"])
            diffs.append(diff)
    ran = run_on_change(module, changed)
    result: dict[str, Any] = {"changed": bool(changed), "changed_paths": changed, "ran": ran}
    if module.params["facts"]:
        result["ansible_facts"] = module.params["facts"]
    if module._diff:
        result["diff"] = diffs
    module.exit_json(**result)


if __name__ == "__main__":
    main()
