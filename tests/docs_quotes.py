"""What the docs quote the tool as saying, as patterns a test can hold real output against: a quoted
`error: ...` line of docs/reliability.md, with NAME, HOST, IP, DIR, N and Ns standing for any word or
number, SIGINT for either signal the doc names beside it, and `...` for any text."""

from __future__ import annotations

import re
from functools import cache
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PLACEHOLDER = re.compile(r"(\.\.\.|\b(?:NAME|HOST|IP|DIR|N|Ns|SIGINT)\b)")
WILD = {"...": ".*", "NAME": r"\S+", "HOST": r"\S+", "IP": r"\S+", "DIR": r"\S+", "N": r"\d+", "Ns": r"\d+s",
        "SIGINT": "SIG(?:INT|TERM)"}  # fmt: skip


@cache
def documented_errors(doc: str = "docs/reliability.md") -> tuple[re.Pattern[str], ...]:
    quotes = re.findall(r"`(error: [^`]*)`", (ROOT / doc).read_text())
    return tuple(re.compile("".join(WILD.get(p, re.escape(p)) for p in PLACEHOLDER.split(q))) for q in quotes)


def assert_documented(line: str, doc: str = "docs/reliability.md") -> None:
    """The error line the tool printed is the one the doc quotes (some quote matches it whole)."""
    assert any(p.fullmatch(line) for p in documented_errors(doc)), f"{doc} quotes no error like: {line}"
