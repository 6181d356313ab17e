"""Argument types shared by the ``greenswarm bench`` commands: argparse errors name the value."""

from __future__ import annotations

import argparse
import json
import math
import sys
from typing import Any

from domain.errors import ValidationError


def positive_float(text: str) -> float:
    """A finite number > 0."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not (value > 0 and math.isfinite(value)):
        raise argparse.ArgumentTypeError(f"must be a finite number > 0, got {text!r}")
    return value


def non_negative_float(text: str) -> float:
    """A finite number >= 0."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not (value >= 0 and math.isfinite(value)):
        raise argparse.ArgumentTypeError(f"must be a finite number >= 0, got {text!r}")
    return value


def positive_int(text: str) -> int:
    """An integer >= 1."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be >= 1, got {text!r}")
    return value


MAX_SEEDS = 1000


def seed_list(text: str) -> list[int]:
    """Seeds as ``1-6``, ``1,3,5`` or both (``0-2,7``): whole numbers >= 0, each once, in the
    order given; at most ``MAX_SEEDS``."""
    seeds: list[int] = []
    for part in (p.strip() for p in text.split(",")):
        first, dash, last = part.partition("-")
        try:
            low = int(first)
            high = int(last) if dash else low
        except ValueError:
            raise argparse.ArgumentTypeError(
                f"not a seed or a range of seeds: {part!r} (write e.g. 1-6 or 1,3,5)"
            ) from None
        if low < 0 or high < low:
            raise argparse.ArgumentTypeError(f"need 0 <= first <= last, got {part!r}")
        if len(seeds) + high - low + 1 > MAX_SEEDS:
            raise argparse.ArgumentTypeError(f"more than {MAX_SEEDS} seeds in {text!r}")
        seeds.extend(range(low, high + 1))
    if len(set(seeds)) != len(seeds):
        raise argparse.ArgumentTypeError(f"a seed is given twice in {text!r}")
    return seeds


def cluster_sizes(text: str) -> tuple[int, ...]:
    """Hosts per cluster, e.g. ``5,5``: whole numbers >= 1, in the trace's host order."""
    sizes: list[int] = []
    for part in (p.strip() for p in text.split(",")):
        try:
            size = int(part)
        except ValueError:
            raise argparse.ArgumentTypeError(
                f"not a host count: {part!r} (write e.g. 5,5 for two clusters of 5 hosts)"
            ) from None
        if size < 1:
            raise argparse.ArgumentTypeError(f"a cluster needs at least 1 host, got {part!r}")
        sizes.append(size)
    return tuple(sizes)


def read_json_file(path: str, field: str) -> Any:
    """The JSON document in file ``path`` ('-': standard input); a 400-style error naming
    ``field`` when it cannot be read or is not JSON."""
    try:
        if path == "-":
            text = sys.stdin.read()
        else:
            with open(path, encoding="utf-8") as handle:
                text = handle.read()
    except OSError as exc:
        raise ValidationError(field, f"cannot read {path}: {exc.strerror}") from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValidationError(
            field, f"{path} is not valid JSON (line {exc.lineno}, column {exc.colno}): {exc.msg}"
        ) from None
