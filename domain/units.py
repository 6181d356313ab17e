"""Resource quantities: Docker's floors, and sizes as people write them ("512m", "2g").

The grammar of a size is one number (digits, optionally a decimal fraction) and an optional
binary suffix (k, m, g, t: 1024, 1024**2, ...; either case, optionally followed by "b" or "ib"),
with spaces allowed around and between. Its value is exact: the number times the suffix,
rounded down to a whole byte. :func:`size_pattern` writes the sizes within a range of bytes as
one regular expression (the OpenAPI document states it: a size below Docker's floor or above
the largest host matches no pattern there, as it passes no parser here).
"""

from __future__ import annotations

import functools
import math
import re
from fractions import Fraction

from domain.errors import ValidationError
from domain.fields import Either, Int, Parsed, Spec, Text

# Docker's floors: the least memory a container may be limited to (its daemon refuses less,
# "Minimum memory limit allowed is 6MB"), and the least CPU shares the kernel keeps.
MIN_MEMORY_BYTES = 6 * 2**20
MIN_CPU_SHARES = 2

_SUFFIX = {"": 1, "k": 1024, "m": 1024**2, "g": 1024**3, "t": 1024**4}
_NUMBER = "[0-9]+(?:[.][0-9]+)?"
_UNIT = "(?:[iI]?[bB])?"
_PATTERN = re.compile(f" *({_NUMBER}) *([kKmMgGtT]?){_UNIT} *")


def parse_memory(value: object, field_name: str = "memory") -> int:
    """Bytes from an int or a string such as "512m", "2g", "1.5GiB", "1048576".

    Suffixes are binary (k = 1024), as in Docker's own ``--memory``.
    """
    if isinstance(value, bool):
        raise ValidationError(field_name, "must be bytes or a size such as '512m'")
    if isinstance(value, int):
        amount = value
    elif isinstance(value, str):
        match = _PATTERN.fullmatch(value)
        if match is None:
            raise ValidationError(field_name, f"cannot read {value!r} as a size such as '512m'")
        number, suffix = match.groups()
        amount = math.floor(Fraction(number) * _SUFFIX[suffix.lower()])
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


def memory_field(low_bytes: int = MIN_MEMORY_BYTES, high_bytes: int | None = None,
                 high_why: str = "") -> Spec:
    """Memory as a request gives it: bytes (an integer) or a size text, from ``low_bytes``
    (Docker's floor by default) to ``high_bytes`` (``high_why`` says what bounds it)."""

    def read(value: object, path: str) -> int:
        amount = parse_memory(value, path)
        if amount < low_bytes:
            floor = " (Docker's minimum)" if low_bytes == MIN_MEMORY_BYTES else ""
            raise ValidationError(path, f"must be at least {format_bytes(low_bytes)}{floor}: "
                                        f"{low_bytes} bytes")
        if high_bytes is not None and amount > high_bytes:
            raise ValidationError(path, f"exceeds {high_why or 'the bound'} ({high_bytes} bytes)")
        return amount

    stated = Either((Int(low_bytes, high_bytes),
                     Text(size_pattern(low_bytes, high_bytes), example="512m")),
                    message="must be bytes or a size such as '512m'")
    return Parsed(stated, read)


@functools.lru_cache(maxsize=64)
def size_pattern(low_bytes: int, high_bytes: int | None = None) -> str:
    """A regular expression (Python and ECMA-262 alike, to be matched whole) of the sizes that
    :func:`parse_memory` reads as ``low_bytes`` up to ``high_bytes`` (no bound when None)."""
    alternatives = []
    for suffix, factor in _SUFFIX.items():
        # floor(x * factor) in [low, high]  <=>  low / factor <= x < (high + 1) / factor
        high = None if high_bytes is None else Fraction(high_bytes + 1, factor)
        number = decimal_range(Fraction(low_bytes, factor), high)
        if number is not None:
            unit = f"[{suffix}{suffix.upper()}]{_UNIT}" if suffix else _UNIT
            alternatives.append(f"(?:{number}) *{unit}")
    return f" *(?:{'|'.join(alternatives)}) *"


def _digits(value: Fraction) -> tuple[int, str]:
    """The whole part of ``value`` (>= 0, a finite decimal) and its decimal fraction's digits
    ("" for none)."""
    whole = math.floor(value)
    rest, digits = value - whole, ""
    while rest:
        rest *= 10
        digit = math.floor(rest)
        digits += str(digit)
        rest -= digit
        if len(digits) > 64:
            raise ValueError(f"{value} is no short decimal")
    return whole, digits


def decimal_range(low: Fraction, high: Fraction | None) -> str | None:
    """A regular expression of the decimal numbers (``[0-9]+`` with an optional ``.[0-9]+``,
    leading zeros allowed) whose value x has ``low <= x < high`` (no bound when None); None
    when there is none. ``low`` and ``high`` must be short decimals (e.g. sizes over powers of
    two)."""
    low_whole, low_digits = _digits(low)
    if high is None:
        high_whole, high_digits = None, None
    else:
        if high <= low:
            return None
        high_whole, high_digits = _digits(high)
    parts = []
    if high_whole is None or high_whole > low_whole:
        # low's whole part with a fraction at least low's; every whole part between; high's
        # whole part with a fraction below high's
        parts.append(_join(str(low_whole), _fraction(low_digits, None)))
        middle = _int_range(low_whole + 1, None if high_whole is None else high_whole - 1)
        if middle is not None:
            parts.append(f"{middle}(?:[.][0-9]+)?")
        if high_whole is not None:
            parts.append(_join(str(high_whole), _fraction("", high_digits)))
    else:
        parts.append(_join(str(low_whole), _fraction(low_digits, high_digits)))
    found = [part for part in parts if part is not None]
    return f"0*(?:{'|'.join(found)})" if found else None


def _join(whole: str, fraction: str | None) -> str | None:
    return None if fraction is None else whole + fraction


def _fraction(low: str, high: str | None) -> str | None:
    """The optional ``.digits`` part of a number whose fraction f has 0.low <= f < 0.high
    (f < 1 when ``high`` is None; no f when ``high`` is ""); None when there is none. Flat
    alternatives, so that the pattern nests only a few groups deep."""
    if high == "":
        return None
    alternatives, empty = _fraction_digits(low, high)
    if not alternatives:
        return "" if empty else None
    body = "[.](?:" + "|".join(alternatives) + ")"
    return f"(?:{body})?" if empty else body


def _fraction_digits(low: str, high: str | None) -> tuple[list[str], bool]:
    """Patterns of the non-empty digit strings s with 0.low <= 0.s < 0.high (< 1 when
    ``high`` is None), and whether the empty one (0) is in the range too. ``low`` and ``high``
    have no trailing zero, and ``low`` is below ``high``."""
    if high is None:
        return _at_least(low)
    if not low:
        return _below(high), True
    k = 0
    while k < len(low) and low[k] == high[k]:
        k += 1
    common = low[:k]
    if k == len(low):  # low is a prefix of high: s is low and a fraction below high's rest
        return [common] + [common + rest for rest in _below(high[k:])], False
    first, last = int(low[k]), int(high[k])
    alternatives = [low[:k + 1] + rest for rest in _at_least(low[k + 1:])[0]]
    if not low[k + 1:]:
        alternatives.append(low[:k + 1])
    if last - first > 1:
        alternatives.append(common + _digit_class(list(range(first + 1, last))) + "[0-9]*")
    if high[k + 1:]:
        alternatives += [high[:k + 1]] + [high[:k + 1] + rest for rest in _below(high[k + 1:])]
    return alternatives, False


def _at_least(digits: str) -> tuple[list[str], bool]:
    """Non-empty digit strings s with 0.s >= 0.digits, and whether the empty one is too."""
    if not digits:
        return ["[0-9]+"], True
    found = [digits + "[0-9]*"]
    for i, digit in enumerate(digits):
        if digit != "9":
            found.append(digits[:i] + _digit_class(list(range(int(digit) + 1, 10))) + "[0-9]*")
    return found, False


def _below(digits: str) -> list[str]:
    """Non-empty digit strings s with 0.s < 0.digits (``digits`` not empty)."""
    found = [digits[:i] + _digit_class(list(range(int(digit)))) + "[0-9]*"
             for i, digit in enumerate(digits) if digit != "0"]
    return found + [digits[:i] for i in range(1, len(digits))]  # its proper prefixes


def _digit_class(digits: list[int]) -> str:
    if len(digits) == 1:
        return str(digits[0])
    if digits == list(range(digits[0], digits[-1] + 1)):
        return f"[{digits[0]}-{digits[-1]}]"
    return "[" + "".join(map(str, digits)) + "]"


def int_range(low: int, high: int | None) -> str:
    """A regular expression of the whole numbers from ``low`` to ``high`` (no bound when
    None), with or without leading zeros."""
    found = _int_range(low, high)
    if found is None:
        raise ValueError(f"no whole number from {low} to {high}")
    return f"0*{found}"


def _int_range(low: int, high: int | None) -> str | None:
    """Whole numbers (without leading zeros) from ``low`` to ``high`` (no bound when None)."""
    if high is not None and high < low:
        return None
    parts = []
    length = len(str(low))
    while high is None or length <= len(str(high)):
        start = max(low, 10 ** (length - 1) if length > 1 else 0)
        if high is None and start == 10 ** (length - 1):  # every longer number too
            parts.append(f"[1-9][0-9]{{{length - 1},}}")
            break
        end = 10**length - 1 if high is None else min(high, 10**length - 1)
        parts.append(_same_length(str(start), str(end)))
        length += 1
    return "(?:" + "|".join(parts) + ")"


def _same_length(low: str, high: str) -> str:
    """Digit strings of ``len(low)`` digits from ``low`` to ``high`` (as numbers): flat
    alternatives, a literal prefix each, then a digit class and any digits."""
    k = 0
    while k < len(low) and low[k] == high[k]:
        k += 1
    if k == len(low):
        return low
    first, last, rest = int(low[k]), int(high[k]), len(low) - k - 1
    found = [low[:k + 1] + suffix for suffix in _suffixes(low[k + 1:], up=True)]
    if last - first > 1:
        found.append(low[:k] + _digit_class(list(range(first + 1, last))) + _any(rest))
    found += [high[:k + 1] + suffix for suffix in _suffixes(high[k + 1:], up=False)]
    return "(?:" + "|".join(found) + ")"


def _suffixes(digits: str, *, up: bool) -> list[str]:
    """Patterns of the digit strings as long as ``digits`` and at least it (``up``) or at most."""
    found = [digits]
    for i, digit in enumerate(digits):
        others = range(int(digit) + 1, 10) if up else range(int(digit))
        if others:
            found.append(digits[:i] + _digit_class(list(others)) + _any(len(digits) - i - 1))
    return found


def _any(count: int) -> str:
    return f"[0-9]{{{count}}}" if count else ""
