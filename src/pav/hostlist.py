"""Host names as people read them: in natural order (sim-x-2 before sim-x-10) and, where names share a prefix
and a numeric suffix, as ranges in Slurm's hostlist notation (`sim-x-[0-63]`, `node-[1-3,7,9-12]`).

Every place the tool prints a list of hosts (summary.txt, the terminal, report.html, junit.xml, the Slurm and
Kubernetes messages) goes through here, so 64 hosts read as one short range, not a wall of names sorted as
text. A name without a numeric suffix stays as it is, in natural order among the ranges.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

_DIGITS = re.compile(r"(\d+)")
_SUFFIXED = re.compile(r"^(.*?)(\d+)$")


def natural_key(name: str) -> tuple[list[str | int], str]:
    """Sorts runs of digits by their value: text at even positions, numbers at odd ones, so two keys
    compare text with text and number with number; the name itself breaks ties ("n01" and "n1")."""
    parts = _DIGITS.split(name)
    return [int(p) if i % 2 else p for i, p in enumerate(parts)], name


def natural(names: Iterable[str]) -> list[str]:
    """The names, each once, in natural order."""
    return sorted(dict.fromkeys(names), key=natural_key)


def compress(names: Iterable[str]) -> str:
    """`sim-x-[0-63]`, `node-[1-3,7,9-12],login`: the names in natural order, those sharing a prefix and a
    numeric suffix of one width folded into a range; a lone numbered name stays plain (`node-7`)."""
    groups: dict[tuple[str, int], list[int]] = {}
    plain: list[str] = []
    unique = natural(names)
    padded = {_group(n) for n in unique if _group(n)[1]}  # widths seen with a leading zero, per prefix
    for name in unique:
        match = _SUFFIXED.match(name)
        if not match:
            plain.append(name)
            continue
        prefix, digits = match.groups()
        width = len(digits) if (prefix, len(digits)) in padded else 0
        groups.setdefault((prefix, width), []).append(int(digits))
    items = [(_range(prefix, width, numbers), f"{prefix}{numbers[0]:0{width}d}")
             for (prefix, width), numbers in groups.items()]  # fmt: skip
    items += [(name, name) for name in plain]
    return ",".join(text for text, first in sorted(items, key=lambda item: natural_key(item[1])))


def describe(names: Iterable[str]) -> str:
    """ "sim-x-3" for one host, "64 hosts sim-x-[0-63]" for more: the count where a range hides it."""
    unique = list(dict.fromkeys(names))
    if len(unique) < 2:
        return compress(unique)
    return f"{len(unique)} hosts {compress(unique)}"


def _group(name: str) -> tuple[str, int]:
    """(prefix, width) of a zero-padded suffix ("node-007": ("node-", 3)); width 0 where it is not."""
    match = _SUFFIXED.match(name)
    if not match or len(match.group(2)) < 2 or not match.group(2).startswith("0"):
        return (match.group(1) if match else name, 0)
    return match.group(1), len(match.group(2))


def _range(prefix: str, width: int, numbers: list[int]) -> str:
    if len(numbers) == 1:
        return f"{prefix}{numbers[0]:0{width}d}"
    spans: list[list[int]] = []
    for number in sorted(numbers):
        if spans and number == spans[-1][1] + 1:
            spans[-1][1] = number
        else:
            spans.append([number, number])
    body = ",".join(f"{lo:0{width}d}" if lo == hi else f"{lo:0{width}d}-{hi:0{width}d}" for lo, hi in spans)
    return f"{prefix}[{body}]"
