"""Byte sizes as nccl-tests and the profiles write them: 8G is 8 GiB (binary units, as -b/-e read them);
durations as --burn-in takes them: 300, 300s, 5m, 1h."""

from __future__ import annotations

import re
from typing import Any

_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([KMGT]?)\s*$", re.IGNORECASE)
_UNITS = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}


def parse_size(value: Any) -> int:
    """Bytes from an int or a string like 8G, 512M, 1.5K."""
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    match = _SIZE.match(str(value))
    if not match:
        raise ValueError(f"{value!r} is not a size (bytes, or a number with K, M, G or T)")
    return int(float(match.group(1)) * _UNITS[match.group(2).upper()])


def size_label(size: int) -> str:
    for unit in ("T", "G", "M", "K"):
        if size >= _UNITS[unit] and size % _UNITS[unit] == 0:
            return f"{size // _UNITS[unit]}{unit}"
    return f"{size}B"


_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([smh]?)\s*$", re.IGNORECASE)
_SECONDS = {"": 1, "s": 1, "m": 60, "h": 3600}


def parse_duration(value: Any) -> int:
    """Whole seconds from an int or a string like 300, 300s, 5m, 1.5h."""
    if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
        return value
    match = _DURATION.match(str(value))
    if not match:
        raise ValueError(f"{value!r} is not a duration (seconds, or a number with s, m or h: 300s, 5m, 1h)")
    return round(float(match.group(1)) * _SECONDS[match.group(2).lower()])
