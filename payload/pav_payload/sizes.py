"""Byte sizes as written on the command line: ``1K``, ``64K``, ``1M``, ``2G`` (binary multiples)."""

import re

_MULTIPLIERS = {"": 1, "K": 1024, "M": 1024**2, "G": 1024**3}
_SIZE = re.compile(r"(\d+)(?:([KMG])I?)?B?", re.IGNORECASE)


def parse_size(text: str) -> int:
    match = _SIZE.fullmatch(text.strip())
    if match is None:
        raise ValueError(f"bad size {text!r}: expected a number with an optional K, M or G suffix")
    value = int(match.group(1)) * _MULTIPLIERS[(match.group(2) or "").upper()]
    if value <= 0:
        raise ValueError(f"bad size {text!r}: must be positive")
    return value


def parse_sizes(text: str) -> list[int]:
    return [parse_size(part) for part in split_list(text)]


def split_list(text: str) -> list[str]:
    parts = [part.strip() for part in text.split(",") if part.strip()]
    if not parts:
        raise ValueError("empty list")
    return parts
