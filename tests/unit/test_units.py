"""Sizes (domain/units.py): read exactly, and stated as one pattern that takes exactly the
sizes within its bounds (Docker's 6 MiB floor up to the largest host), as the OpenAPI document
states memory."""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from domain.errors import ValidationError
from domain.units import MIN_MEMORY_BYTES, int_range, memory_field, parse_memory, size_pattern
from tests.unit.test_fields import reads, valid

MIB = 2**20


NUMBER = st.builds(
    lambda whole, zeros, fraction: "0" * zeros + whole + (f".{fraction}" if fraction else ""),
    st.integers(0, 10**11).map(str), st.integers(0, 2),
    st.one_of(st.just(""), st.text("0123456789", min_size=1, max_size=25)))
SIZE = st.builds(lambda pad, number, space, suffix, unit, end: pad + number + space + suffix
                 + unit + end, st.sampled_from(["", " "]), NUMBER, st.sampled_from(["", " "]),
                 st.sampled_from(["", "k", "m", "g", "t", "K", "M", "G", "T", "p"]),
                 st.sampled_from(["", "b", "ib", "B", "iB", "x"]), st.sampled_from(["", " "]))


@settings(max_examples=1500, deadline=None)
@given(text=SIZE, high=st.sampled_from([None, 4 * 2**30, 7 * 2**30 + 12345, 2**40]))
def test_the_size_pattern_takes_exactly_the_sizes_within_its_bounds(
    text: str, high: int | None
) -> None:
    try:
        amount = parse_memory(text)
        inside = amount >= MIN_MEMORY_BYTES and (high is None or amount <= high)
    except ValidationError:
        inside = False
    assert bool(re.fullmatch(size_pattern(MIN_MEMORY_BYTES, high), text)) is inside, text


@pytest.mark.parametrize(("text", "amount"), [
    ("6m", 6 * MIB), ("6291456", 6 * MIB), ("6144k", 6 * MIB), ("0.005859375g", 6 * MIB),
    (" 7 MiB ", 7 * MIB), ("1.5GiB", 3 * 2**29), ("0.1k", 102), ("512mb", 512 * MIB)])
def test_sizes_read_exactly(text: str, amount: int) -> None:
    assert parse_memory(text) == amount


def test_memory_below_dockers_floor_is_refused_by_parser_and_pattern() -> None:
    field = memory_field(MIN_MEMORY_BYTES, 2**30, "the largest host")
    schema = field.schema()
    for value in (0, "0", "4m", "6143k", "6291455", 6 * MIB - 1, "5.99m", 2**30 + 1, "1.01g"):
        assert not reads(field, value) and not valid(schema, value), value
    for value in ("6m", 6 * MIB, "1g", 2**30, "6144k"):
        assert reads(field, value) and valid(schema, value), value


def test_whole_number_ranges() -> None:
    pattern = re.compile(int_range(1, 65535))
    assert [n for n in range(0, 70000) if pattern.fullmatch(str(n))] == list(range(1, 65536))
    assert pattern.fullmatch("0080") and not pattern.fullmatch("065536")


