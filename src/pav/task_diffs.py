"""What a task changed in a file, as a unified diff: Ansible's task diffs (before/after) made readable, for
results.json's hosts.*.diffs and report.html (tuning's diff, applied or only proposed in check mode).

Ansible's side of the run (ansible_exec reads them from runner's events), not reporting's: reporting.timings
reads ansible_exec's outcomes, and the two packages must not import each other."""

from __future__ import annotations

import difflib
from typing import Any

MAX_CHARS = 4000  # per task: a diff is for reading, not a copy of the file


def per_path(label: str, res: dict[str, Any]) -> list[dict[str, str]]:
    """The task's diffs, one per file: a task that writes several files (pav_files) names each entry's path
    in its header and changed_paths; any other task gives its one diff, or none."""
    entries = res.get("diff")
    if isinstance(entries, list) and res.get("changed_paths"):
        named = [e for e in entries if isinstance(e, dict) and e.get("before_header")]
        found = [unified(label, {"diff": e, "path": e["before_header"]}) for e in named]
        return [d for d in found if d is not None]
    diff = unified(label, res)
    return [diff] if diff is not None else []


def unified(label: str, res: dict[str, Any]) -> dict[str, str] | None:
    """The task's diff as {"task", "path", "text"}; None when it carries none."""
    entries = res.get("diff")
    entries = entries if isinstance(entries, list) else [entries] if isinstance(entries, dict) else []
    args = (res.get("invocation") or {}).get("module_args") or {}  # where check mode keeps the target
    path = str(res.get("dest") or res.get("path") or args.get("dest") or args.get("path") or "")
    parts = [_one(entry, path) for entry in entries if isinstance(entry, dict)]
    text = "".join(p for p in parts if p)
    if not text:
        return None
    return {"task": label, "path": path, "text": text[:MAX_CHARS]}


def _one(entry: dict[str, Any], path: str) -> str:
    before, after = entry.get("before"), entry.get("after")
    if isinstance(before, str) and isinstance(after, str):
        name = path or str(entry.get("before_header") or "file")
        lines = difflib.unified_diff(
            before.splitlines(keepends=True),
            after.splitlines(keepends=True),
            f"{name} (before)",
            f"{name} (after)",
        )
        return "".join(ln if ln.endswith("\n") else ln + "\n" for ln in lines)
    if isinstance(before, dict) and isinstance(after, dict):  # a file's state or mode, not its content
        changed = [
            f"{k}: {before.get(k)} -> {after.get(k)}"
            for k in sorted(set(before) | set(after))
            if before.get(k) != after.get(k)
        ]
        return f"{path}: " + ", ".join(changed) + "\n" if changed else ""
    return ""
