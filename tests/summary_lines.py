"""summary.txt's lines as they were before the summary folded them at 120 columns (issue 65), so a test can
hold a whole line the tool printed against the file."""

from __future__ import annotations


def unfolded(lines: list[str]) -> list[str]:
    """A folded line's rest (indented 4 more than the line) joined back on, at the space it was broken at."""
    out: list[str] = []
    for line in lines:
        if out and line.startswith(" " * (len(out[-1]) - len(out[-1].lstrip()) + 4)):
            out[-1] += " " + line.lstrip()
        else:
            out.append(line)
    return out
