"""The Rust part of the native core (native/rust) for the differential tests: the build of the
current crate from the cache (the set-up fills it), loaded beside the Python reference, and a
checker that runs both on every call.

``GREENSWARM_TEST_RUST_CHECK=FILE`` (tests/conftest.py): every host view the session makes
computes its rooms with both implementations, every list of the in-memory store is kept by
both (host_registry.memory: _Group and HostGroup) and every walk and read of a list is
compared; the first difference fails, and at exit FILE says how many of each were compared.
"""

from __future__ import annotations

import atexit
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from types import ModuleType

import domain.rooms
import host_registry.memory as memory_module
from domain.model import HostView
from host_registry.memory import HostList
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


class GroupChecks:
    """How many reads of the lists both implementations answered alike."""

    def __init__(self) -> None:
        self.reads = 0


class CheckingGroup:
    """A list of the in-memory store kept by the reference (host_registry.memory._Group) and
    by the Rust core's HostGroup at once: every change made to both, every read compared (the
    same hosts, the same objects, in the same order; the same blocks)."""

    def __init__(self, native: HostList, checks: GroupChecks) -> None:
        self.reference = memory_module._Group()
        self.native = native
        self.checks = checks

    def _same(self, what: str, expected: object, got: object) -> None:
        self.checks.reads += 1
        assert got == expected, (what, got, expected)

    @property
    def size(self) -> int:
        size: int = self.reference.size
        self._same("size", size, self.native.size)
        return size

    def insert(self, view: HostView) -> None:
        self.native.insert(view)  # (first: it may refuse)
        self.reference.insert(view)
        self._same("blocks", self.reference.block_sizes(), self.native.block_sizes())

    def remove(self, view: HostView) -> None:
        try:
            self.reference.remove(view)
        except RuntimeError as error:
            try:
                self.native.remove(view)
            except RuntimeError as native_error:
                self._same("missing", str(error), str(native_error))
            else:
                raise AssertionError("the Rust list removed a host the reference lacks")
            raise
        self.native.remove(view)
        self._same("blocks", self.reference.block_sizes(), self.native.block_sizes())

    def walk(self, index: int, need_cpu: int, need_memory: int,
             ascending: bool) -> Iterator[HostView] | None:
        expected = self.reference.walk(index, need_cpu, need_memory, ascending)
        got = self.native.walk(index, need_cpu, need_memory, ascending)
        self._same("walk or none", expected is None, got is None)
        if expected is None:
            return None
        return self._walk(expected, got)

    def _walk(self, expected: Iterator[HostView], got: Iterator[HostView]) -> Iterator[HostView]:
        for view in expected:
            self._same("walked", id(view), id(next(got, None)))
            yield view
        self._same("walk's end", None, next(got, None))

    def views(self, ascending: bool) -> list[HostView]:
        views = self.reference.views(ascending)
        self._same("views", [id(v) for v in views],
                   [id(v) for v in self.native.views(ascending)])
        return views

    def host_ids(self) -> list[str]:
        ids = self.reference.host_ids()
        self._same("host ids", ids, self.native.host_ids())
        return ids

    def block_sizes(self) -> list[int]:
        sizes = self.reference.block_sizes()
        self._same("blocks", sizes, self.native.block_sizes())
        return sizes


def checking_groups(native: ModuleType, checks: GroupChecks) -> Callable[[int], CheckingGroup]:
    """What the store makes its lists with: a CheckingGroup of a HostGroup(block_size)."""
    return lambda block_size: CheckingGroup(native.HostGroup(block_size), checks)


def install_check(report: Path) -> CheckingRooms:
    """Make every compute_rooms of this process a checked one, and every list of an in-memory
    store a checking one (pure Python processes only: a compiled module binds its calls when
    built)."""
    native = load_rust()
    checker = CheckingRooms(native)
    domain.rooms._native_rooms = checker
    checks = GroupChecks()
    memory_module.NativeGroup = checking_groups(native, checks)  # type: ignore[assignment]
    atexit.register(lambda: report.write_text(f"{checker.calls} {checks.reads}\n"))
    return checker
