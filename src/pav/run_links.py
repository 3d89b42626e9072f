"""A run's record is written by that run only. A later run that tears a kept run's work down writes a record
of its own and leaves the kept run one link: RUN/torn-down.json, and a line at the top of its report.html
saying when and by which run. results.json, summary.txt and junit.xml of the kept run stay byte for byte."""

from __future__ import annotations

import json
import os
from html import escape
from pathlib import Path

LINK = "torn-down.json"
BODY = "<body>"


def link_teardown(kept_dir: Path, run_id: str, run_dir: Path, at: str) -> bool:
    """Record in the kept run's dir that run_id tore its work down at `at`; False where one already did
    (the first teardown's link stays: nothing of a record is rewritten)."""
    link = kept_dir / LINK
    if link.exists() or not kept_dir.is_dir():
        return False
    record = {"torn_down_at": at, "by_run": run_id, "by_run_dir": str(run_dir.resolve())}
    _write(link, json.dumps(record, indent=2) + "\n")
    page = kept_dir / "report.html"
    if page.is_file():
        text = page.read_text()
        if BODY in text:
            _write(page, text.replace(BODY, BODY + "\n" + _note(kept_dir, run_id, run_dir, at), 1))
    return True


def torn_down(kept_dir: Path) -> dict[str, str] | None:
    """The link a teardown left in the kept run's dir (torn_down_at, by_run, by_run_dir), or None."""
    try:
        data = json.loads((kept_dir / LINK).read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict) or not data.get("by_run"):
        return None
    return {k: str(data.get(k) or "") for k in ("torn_down_at", "by_run", "by_run_dir")}


def _note(kept_dir: Path, run_id: str, run_dir: Path, at: str) -> str:
    href = os.path.relpath(run_dir.resolve() / "report.html", kept_dir.resolve())
    style = "margin:0;padding:.6em 1em;background:#fff3cd;border-bottom:1px solid #e0c36a"
    return (
        f'<p class="torn-down" style="{style}">torn down at {escape(at)} by run '
        f'<a href="{escape(href)}">{escape(run_id)}</a></p>'
    )


def _write(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(text)
    os.replace(tmp, path)
