"""Which modules the compiled core holds, where its builds live, and the loader.

A process runs the compiled core only when its entry point asks for it: the ``greenswarm``
command (cli/main.py, so the manager, the agent, the monitor, the simulator and every other
subcommand), ``python -m monitor`` and the benchmarks call :func:`enable` once, before any
module of MODULES is imported. It decides, once, between compiled and pure Python: compiled
when ``GREENSWARM_NATIVE`` allows it and the cache holds a build for exactly the current
sources of MODULES (their hash, with this Python's extension suffix). Compiled, it puts a
finder first in ``sys.meta_path`` that serves each module of MODULES (and the group's shared
library) from the build, so ``import domain.energy`` loads the ``.so`` instead of the ``.py``;
nothing else changes (``sys.path`` and the packages' ``__path__`` stay as they are). The choice
is all or nothing: mypyc's modules of one group call each other natively, so a compiled module
never runs beside an edited pure one of the group, nor beside a module of the group imported
before :func:`enable` (then the whole core runs pure, saying so).

Importing a package of ours does none of this: a pure package never imports this module
(import-linter's "pure packages import no loader"), reads no setting and hashes no file.

Standard library only: the entry points import it before anything else of ours.
"""

from __future__ import annotations

import copyreg
import dataclasses
import hashlib
import importlib.machinery
import importlib.util
import json
import os
import sys
import sysconfig
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

from native import rust
from native.digest import files_digest

# The compiled modules (profiled with ``python -m benchmarks.sim_speed --skip-thesis
# --large-hosts 100 --large-hours 0.25 --profile 40``). Left interpreted: domain.store (its
# runtime-checkable Protocol), scheduler.plugin and scheduler.registry (the plugin API: third
# parties subclass its classes and register policies at run time), sim.profiles (reads a file
# next to its ``__file__``), domain.events (its kinds' codec reads their dataclass fields and
# annotations, which mypyc turns into runtime classes, its ``kind`` tags into fields; the
# simulator never reads events), and the I/O edges (not hot).
MODULES: tuple[str, ...] = (
    "domain.booking",
    "domain.books",
    "domain.capacity",
    "domain.classes",
    "domain.constraints",
    "domain.decision",
    "domain.energy",
    "domain.errors",
    "domain.labels",
    "domain.lifecycle",
    "domain.load",
    "domain.model",
    "domain.pending",
    "domain.preemption",
    "domain.regions",
    "domain.restore",
    "domain.rooms",
    "domain.segments",
    "domain.service_history",
    "domain.settings",
    "domain.slo",
    "domain.tally",
    "domain.units",
    "scheduler.admission",
    "scheduler.constraints",
    "scheduler.explain",
    "scheduler.load",
    "scheduler.service",
    "scheduler.victims",
    "scheduler.policies.binpack",
    "scheduler.policies.energy",
    "scheduler.policies.load_scores",
    "scheduler.policies.lvrb",
    "scheduler.policies.qos",
    "scheduler.policies.random_choice",
    "scheduler.policies.scored",
    "scheduler.policies.spread",
    "scheduler.policies.swarm",
    "scheduler.policies.tlp",
    "host_registry.memory",
    "sim.books",
    "sim.config",
    "sim.contention",
    "sim.engine",
    "sim.event_heap",
    "sim.model",
    "sim.monitor_model",
    "sim.routing",
    "sim.preempt",
    "measure.checks",
    "measure.host_time",
    "measure.recorder",
    "measure.service_levels",
    "measure.summarise",
    "measure.task_levels",
    "monitor.core",
    "workloads.cluster",
    "workloads.thesis",
    "workloads.trace",
)

ENV = "GREENSWARM_NATIVE"
MYPYC_ENV = "GREENSWARM_NATIVE_MYPYC"  # 0: the mypyc part runs pure, the Rust part as chosen
CACHE_ENV = "GREENSWARM_NATIVE_CACHE"
DEFAULT_CACHE = Path("/var/cache/greenswarm/native")
MANIFEST = "manifest.json"
REBUILD_HINT = "bash scripts/build-native.sh"

# The directory holding the packages (the repository, or site-packages when installed).
ROOT = Path(__file__).resolve().parent.parent


class NativeCoreError(RuntimeError):
    """GREENSWARM_NATIVE=1 and no compiled core for these sources, or a bad setting."""


def module_path(module: str, root: Path = ROOT) -> Path:
    return root.joinpath(*module.split(".")).with_suffix(".py")


def ext_suffix() -> str:
    """This interpreter's file suffix of an extension module (``.cpython-311-x86_64-...so``)."""
    return str(sysconfig.get_config_var("EXT_SUFFIX"))


def python_tag() -> str:
    """This interpreter, as far as a compiled extension cares: version, build and ABI."""
    return f"{sys.implementation.cache_tag} {ext_suffix()}"


# The stubs the modules are compiled against (mypy_path): a compiled module checks what a
# call into the Rust core returns against ``greenswarm_core.pyi``, so a build is of them too.
STUBS = "stubs"


def source_hash(root: Path = ROOT, modules: tuple[str, ...] = MODULES) -> str:
    """sha256 over the compiled modules' names and sources, and the stubs they are compiled
    against (by their names under ``stubs/``)."""
    stubs = sorted((root / STUBS).glob("*.pyi"))
    return files_digest([*((module, module_path(module, root)) for module in modules),
                         *((f"{STUBS}/{stub.name}", stub) for stub in stubs)])


def build_key(sources: str, python: str, mypy_version: str) -> str:
    """The cache entry's name: the sources, the interpreter and the compiler."""
    return hashlib.sha256(f"{sources}\n{python}\n{mypy_version}".encode()).hexdigest()[:24]


def cache_root() -> Path:
    """``$GREENSWARM_NATIVE_CACHE``, else /var/cache/greenswarm/native where it exists or can
    be made, else ``~/.cache/greenswarm/native``."""
    configured = os.environ.get(CACHE_ENV)
    if configured:
        return Path(configured)
    if DEFAULT_CACHE.is_dir() or os.access(DEFAULT_CACHE.parent.parent, os.W_OK):
        return DEFAULT_CACHE
    return Path.home() / ".cache" / "greenswarm" / "native"


def root_marker(cache: Path, root: Path = ROOT) -> Path:
    """Where a build records, per source tree, the sources it was last built for."""
    return cache / "trees" / (hashlib.sha256(str(root).encode()).hexdigest()[:24] + ".json")


@dataclass(frozen=True)
class Choice:
    """The process's decision: ``build`` is the compiled core's directory, or None (pure)."""

    build: Path | None
    reason: str

    @property
    def core(self) -> str:
        return "compiled" if self.build is not None else "pure"


def find_build(cache: Path, sources: str, python: str) -> Path | None:
    """The newest complete build in ``cache`` for these sources and this interpreter."""
    found: list[tuple[float, Path]] = []
    try:
        entries = list(cache.iterdir())
    except OSError:
        return None
    for entry in entries:
        if entry.name.startswith("."):
            continue  # a build under way (renamed into place when complete)
        manifest = entry / MANIFEST
        try:
            data = json.loads(manifest.read_text())
            mtime = manifest.stat().st_mtime
        except (OSError, ValueError):
            continue
        if (isinstance(data, dict) and data.get("sources") == sources
                and data.get("python") == python and data.get("modules") == list(MODULES)
                and not missing_modules(entry / "lib")):
            found.append((mtime, entry))
    return max(found)[1] if found else None


def missing_modules(lib: Path) -> list[str]:
    """The modules of MODULES without their extension under ``lib``."""
    return [m for m in MODULES if not extension_path(lib, m).is_file()]


def extension_path(lib: Path, module: str) -> Path:
    """Where a build's ``lib`` directory holds ``module``'s extension."""
    *package, leaf = module.split(".")
    return lib.joinpath(*package, leaf + ext_suffix())


def decide(
    setting: str | None = None, root: Path = ROOT, cache: Path | None = None,
    imported: Collection[str] = (),
) -> Choice:
    """Compiled or pure, by the setting and the cache (no side effects but a stderr line).
    ``imported``: the modules of MODULES this process imported already (from their sources):
    with any, a build found is not used (all or nothing)."""
    mode = (os.environ.get(ENV, "auto") if setting is None else setting).strip().lower() or "auto"
    if mode not in ("auto", "0", "1"):
        raise NativeCoreError(f"{ENV}={mode!r}: use auto, 0 (pure Python) or 1 (compiled)")
    if mode == "0":
        return Choice(None, f"{ENV}=0")
    if os.environ.get(MYPYC_ENV, "").strip() == "0":
        return Choice(None, f"{MYPYC_ENV}=0")
    cache = cache_root() if cache is None else cache
    build = find_build(cache, source_hash(root), python_tag()) if _has_builds(cache) else None
    if build is not None and imported:
        early = sorted(imported)
        named = ", ".join(early[:3]) + (f" and {len(early) - 3} more" if len(early) > 3 else "")
        if mode == "1":
            raise NativeCoreError(
                f"{ENV}=1 but {named} imported before the compiled core was enabled; "
                "call native.loader.enable() at the entry point, before any other import of ours")
        print(f"greenswarm: {named} imported before the compiled core was enabled; "
              "running pure Python", file=sys.stderr)
        return Choice(None, "imported before enable")
    if build is not None:
        return Choice(build, f"built for these sources in {build}")
    stale = _built_before(cache, root)
    if mode == "1":
        what = "is stale (the sources changed since it was built)" if stale else "is not built"
        raise NativeCoreError(
            f"{ENV}=1 but the compiled core for {root} {what} (cache {cache}); "
            f"run `{REBUILD_HINT}`, or set {ENV}=0 or auto")
    if stale:
        print(f"greenswarm: the compiled core is stale (sources changed since it was built); "
              f"running pure Python. Rebuild with `{REBUILD_HINT}`", file=sys.stderr)
        return Choice(None, "stale")
    return Choice(None, "not built")


def _has_builds(cache: Path) -> bool:
    """Whether ``cache`` holds any build at all (an image without one hashes no source)."""
    try:
        return any(not entry.name.startswith(".") and (entry / MANIFEST).is_file()
                   for entry in cache.iterdir())
    except OSError:
        return False


def _built_before(cache: Path, root: Path) -> bool:
    """Whether this source tree had a compiled core built before (for other sources)."""
    return root_marker(cache, root).is_file()


# -- the entry points' switch ------------------------------------------------------------------

_choice: Choice | None = None


def enable() -> Choice:
    """Run the compiled core in this process when :func:`decide` says so; the choice.

    Called once by each entry point, first thing, before any module of MODULES is imported
    (a later call returns the first one's choice). Compiled, it puts :class:`CompiledCore`
    first in ``sys.meta_path``; pure, it changes nothing. ``GREENSWARM_NATIVE=1`` without a
    usable build raises NativeCoreError."""
    global _choice, _rust_choice
    if _choice is None:
        choice = decide(imported=[name for name in MODULES if name in sys.modules])
        rust_choice = decide_rust()
        if choice.build is not None:
            sys.meta_path.insert(0, CompiledCore(choice.build / "lib"))
        if rust_choice.build is not None:
            sys.meta_path.insert(0, rust.RustCore(rust.extension_file(rust_choice.build,
                                                                      ext_suffix())))
        _choice, _rust_choice = choice, rust_choice
    return _choice


_rust_choice: rust.RustChoice | None = None

# The modules that import greenswarm_core when imported: imported before enable(), they run
# their Python reference for good.
RUST_USERS = ("domain.rooms", "domain.energy", "host_registry.memory", "measure.host_time",
              "measure.stats", "sim.event_heap")


def decide_rust(setting: str | None = None, root: Path = ROOT,
                cache: Path | None = None) -> rust.RustChoice:
    """Whether the Rust part runs (native/rust.py): ``GREENSWARM_NATIVE=0`` or
    ``GREENSWARM_NATIVE_RUST=0`` say no; else when built for exactly the crate's sources."""
    if os.environ.get(ENV, "auto").strip() == "0":
        return rust.RustChoice(None, f"{ENV}=0")
    mode = rust.setting() if setting is None else setting
    if mode not in ("auto", "0", "1"):
        raise NativeCoreError(f"{rust.ENV}={mode!r}: use auto, 0 (Python) or 1 (Rust)")
    if mode == "0":
        return rust.RustChoice(None, f"{rust.ENV}=0")
    cache = cache_root() if cache is None else cache
    crate = root / "native" / "rust"
    sources = rust.source_hash(crate) if crate.is_dir() else ""
    build = rust.find_build(cache, sources, python_tag(), ext_suffix()) if sources else None
    early = [name for name in RUST_USERS if name in sys.modules]
    if build is not None and not early:
        return rust.RustChoice(build, f"built for these sources in {build}")
    why = (f"{', '.join(early)} imported before enable()" if build is not None
           else "not built for these sources")
    if mode == "1":
        raise NativeCoreError(f"{rust.ENV}=1 but the Rust core is {why} (cache {cache}); "
                              f"run `{REBUILD_HINT}`, or set {rust.ENV}=0 or auto")
    if build is None and root_marker(rust.rust_cache(cache), root).is_file():
        print("greenswarm: the Rust core is stale (its sources changed since it was built); "
              f"running its parts in Python. Rebuild with `{REBUILD_HINT}`", file=sys.stderr)
        return rust.RustChoice(None, "stale")
    return rust.RustChoice(None, why)


def rust_core() -> str:
    """``rust`` or ``python``: whether this process runs the Rust part (after enable())."""
    return "python" if _rust_choice is None else _rust_choice.core


def rust_reason() -> str:
    return "not enabled" if _rust_choice is None else _rust_choice.reason


def core() -> str:
    """``compiled`` or ``pure``: what this process runs (pure unless :func:`enable` chose)."""
    return "pure" if _choice is None else _choice.core


def loaded_modules() -> dict[str, str]:
    """The compiled core's modules imported so far, each with the file it came from."""
    return {name: str(getattr(sys.modules[name], "__file__", "")) for name in MODULES
            if name in sys.modules}


class CompiledCore:
    """A ``sys.meta_path`` finder: each module of MODULES, and the group's shared library the
    compiled modules import by its top-level name, from a build's ``lib`` directory; nothing
    else. (Not an ``importlib.abc.MetaPathFinder``: importing that costs more than it gives.)"""

    def __init__(self, lib: Path, modules: Sequence[str] = MODULES) -> None:
        self.lib = lib
        self.files = {name: extension_path(lib, name) for name in modules}
        suffix = ext_suffix()
        for shared in lib.glob("*" + suffix):  # e.g. 530047706b7c971360ac__mypyc
            self.files[shared.name[: -len(suffix)]] = shared

    def find_spec(
        self, fullname: str, path: Sequence[str] | None = None, target: ModuleType | None = None,
    ) -> importlib.machinery.ModuleSpec | None:
        file = self.files.get(fullname)
        if file is None:
            return None
        return importlib.util.spec_from_file_location(
            fullname, file, loader=_CompiledLoader(fullname, str(file)))


class _CompiledLoader(importlib.machinery.ExtensionFileLoader):
    """Loads a compiled module, then lets the compiled core's frozen dataclasses be pickled."""

    def exec_module(self, module: ModuleType) -> None:
        super().exec_module(module)
        # This module's, and those of the modules of its group it imported: mypyc imports a
        # module of its own group directly, past importlib and this finder.
        make_picklable()


def _rebuild(cls: Any, state: dict[str, Any]) -> Any:
    """An instance of a compiled class from its attributes, past a frozen ``__setattr__``.

    A class with its own ``__init__`` (a dataclass declared ``init=False``) is made by it:
    mypyc's ``__new__`` calls a compiled ``__init__``, with the arguments it is given."""
    if cls.__dataclass_params__.init:
        instance = cls.__new__(cls)
    else:
        instance = cls(**{f.name: state[f.name] for f in dataclasses.fields(cls)
                          if f.init and f.name in state})
    for name, value in state.items():
        object.__setattr__(instance, name, value)
    return instance


def _reduce_frozen(instance: Any) -> tuple[Any, ...]:
    names: tuple[str, ...] = type(instance).__mypyc_attrs__
    unset = object()
    state = {name: value for name in names if name != "__dict__"
             and (value := getattr(instance, name, unset)) is not unset}
    return _rebuild, (type(instance), state)


def make_picklable() -> int:
    """Let the compiled core's frozen dataclasses cross processes (``--jobs``): mypyc restores
    a pickled instance with ``setattr``, which a frozen dataclass refuses, where pure Python
    writes its ``__dict__``. So too those with a hand-written ``__init__`` (``init=False``),
    which mypyc's ``__new__`` calls: without its arguments, it fails. Registers a reducer
    (``copyreg``) for each such class of the compiled modules imported so far that has none
    yet; returns how many (0 when the core is pure). The finder calls it after each module it
    loads, so the classes of every module imported at the top of a module are covered, and a
    worker process forked after the imports inherits them."""
    count = 0
    suffix = ext_suffix()
    for name in MODULES:
        module = sys.modules.get(name)
        if module is None or not str(getattr(module, "__file__", "")).endswith(suffix):
            continue
        for value in list(vars(module).values()):
            if (isinstance(value, type) and value.__module__ == name
                    and value not in copyreg.dispatch_table
                    and hasattr(value, "__mypyc_attrs__") and dataclasses.is_dataclass(value)
                    and (value.__dataclass_params__.frozen  # type: ignore[attr-defined]
                         or not value.__dataclass_params__.init)):  # type: ignore[attr-defined]
                copyreg.pickle(value, _reduce_frozen)
                count += 1
    return count
