"""The Rust part of the native core (native/rust) for the differential tests: the build of the
current crate from the cache (the set-up fills it), loaded beside the Python reference, and a
checker that runs both on every call.

``GREENSWARM_TEST_RUST_CHECK=FILE`` (tests/conftest.py): every host view the session makes
computes its rooms with both implementations, fails on the first difference, and at exit
writes to FILE how many it compared.
"""

from __future__ import annotations

import atexit
import os
from pathlib import Path
from types import ModuleType

import domain.rooms
from native import loader, rust

CHECK_ENV = "GREENSWARM_TEST_RUST_CHECK"
NOT_BUILT = ("the Rust core is not built for these sources; run `bash scripts/build-native.sh` "
             "(or set GREENSWARM_NATIVE_RUST=0 to skip the Rust tests)")


def rust_build() -> Path | None:
    """The cached build of the current crate (None: not built)."""
    return rust.find_build(loader.cache_root(), rust.source_hash(), loader.python_tag(),
                           loader.ext_suffix())


def skipped() -> bool:
    """Whether the Rust tests are turned off on purpose (GREENSWARM_NATIVE_RUST=0)."""
    return os.environ.get(rust.ENV, "").strip() == "0"


def load_rust() -> ModuleType:
    """greenswarm_core of the current crate; AssertionError when it is not built."""
    build = rust_build()
    assert build is not None, NOT_BUILT
    return rust.load(rust.extension_file(build, loader.ext_suffix()))


class CheckingRooms:
    """compute_rooms that runs the Rust implementation and the reference, and requires the
    same rooms (values and types) from both; counts the calls."""

    def __init__(self, native: ModuleType) -> None:
        self.native = native.compute_rooms
        self.calls = 0

    def __call__(self, t: tuple[int, ...], cpu_capacity: int, memory_capacity: int,
                 cpu_limits: tuple[int, ...], memory_limits: tuple[int, ...],
                 ) -> tuple[tuple[int, int], ...]:
        expected = domain.rooms.compute_rooms_reference(
            t, cpu_capacity, memory_capacity, cpu_limits, memory_limits)
        got = self.native(t, cpu_capacity, memory_capacity, cpu_limits, memory_limits)
        self.calls += 1
        assert got == expected and type(got) is tuple, (t, cpu_capacity, memory_capacity,
                                                        cpu_limits, memory_limits, got, expected)
        assert all(type(a) is int and type(b) is int for a, b in got), got
        return got


def install_check(report: Path) -> CheckingRooms:
    """Make every compute_rooms of this process a checked one (pure Python processes only:
    a compiled domain.rooms binds its calls when built)."""
    checker = CheckingRooms(load_rust())
    domain.rooms._native_rooms = checker
    atexit.register(lambda: report.write_text(f"{checker.calls}\n"))
    return checker
