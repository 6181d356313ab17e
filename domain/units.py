"""Parsing of human resource quantities ("512m", "2g") into bytes."""

from __future__ import annotations

import re

from domain.errors import ValidationError

# Docker's floors: the least memory a container may be limited to (its daemon refuses less,
# "Minimum memory limit allowed is 6MB"), and the least CPU shares the kernel keeps.
MIN_MEMORY_BYTES = 6 * 2**20
MIN_CPU_SHARES = 2

_SUFFIX = {"": 1, "b": 1, "k": 1024, "m": 1024**2, "g": 1024**3, "t": 1024**4}
_PATTERN = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([kmgt]?)(?:i?b)?\s*$", re.IGNORECASE)


def parse_memory(value: object, field_name: str = "memory") -> int:
    """Bytes from an int or a string such as "512m", "2g", "1.5GiB", "1048576".

    Suffixes are binary (k = 1024), as in Docker's own ``--memory``.
    """
    if isinstance(value, bool):
        raise ValidationError(field_name, "must be bytes or a size such as '512m'")
    if isinstance(value, int):
        amount = value
    elif isinstance(value, str):
        match = _PATTERN.match(value)
        if match is None:
            raise ValidationError(field_name, f"cannot read {value!r} as a size such as '512m'")
        number, suffix = match.groups()
        amount = int(float(number) * _SUFFIX[suffix.lower()])
    else:
        raise ValidationError(field_name, "must be bytes or a size such as '512m'")
    if amount <= 0:
        raise ValidationError(field_name, "must be positive")
    return amount


def format_bytes(amount: int) -> str:
    """A short human form: 536870912 -> '512.0MiB'."""
    value = float(amount)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(value) < 1024 or unit == "GiB":
            return f"{value:.1f}{unit}" if unit != "B" else f"{int(value)}B"
        value /= 1024
    return f"{value:.1f}GiB"
