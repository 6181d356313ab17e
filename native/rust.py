"""The Rust part of the native core (DESIGN 10): where its builds live, which one fits this
tree, and the finder that serves it. Standard library only (the loader imports it).

The crate in ``native/rust/`` builds one extension module, ``greenswarm_core``
(``native/rust_build.py``, ``scripts/build-native.sh``), into
``<cache>/rust/<key>/lib/greenswarm_core<EXT_SUFFIX>``, where ``<cache>`` is the compiled
core's (``native.loader.cache_root()``) and the key hashes the crate's sources and this Python.
The module is never installed: it is importable only in a process whose entry point enabled the
native core (``native.loader.enable()`` puts :class:`RustCore` in ``sys.meta_path``), so a
pure package can try ``import greenswarm_core`` and fall back to its Python reference when it
is missing.

``GREENSWARM_NATIVE_RUST``: ``auto`` (default: when built for exactly these sources), ``0``
(its parts run in Python), ``1`` (built, or an error). ``GREENSWARM_NATIVE=0`` keeps it away too.
"""

from __future__ import annotations

import hashlib
import importlib.machinery
import importlib.util
import json
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

from native.digest import files_digest

MODULE = "greenswarm_core"
ENV = "GREENSWARM_NATIVE_RUST"
MANIFEST = "manifest.json"
# The crate's files that make a build (its sources, by path under CRATE).
CRATE_FILES = ("Cargo.toml", "pyproject.toml")
CRATE = Path(__file__).resolve().parent / "rust"


def crate_sources(crate: Path = CRATE) -> list[Path]:
    """The files of the crate that a build depends on, in a fixed order."""
    return [crate / name for name in CRATE_FILES] + sorted((crate / "src").rglob("*.rs"))


def source_hash(crate: Path = CRATE) -> str:
    """sha256 over the crate's sources (names relative to the crate, and contents)."""
    return files_digest((str(path.relative_to(crate)), path) for path in crate_sources(crate))


def build_key(sources: str, python: str) -> str:
    return hashlib.sha256(f"rust\n{sources}\n{python}".encode()).hexdigest()[:24]


def rust_cache(cache: Path) -> Path:
    """The Rust builds' directory inside the compiled core's cache."""
    return cache / "rust"


def extension_file(build: Path, ext_suffix: str) -> Path:
    return build / "lib" / (MODULE + ext_suffix)


def find_build(cache: Path, sources: str, python: str, ext_suffix: str) -> Path | None:
    """The build in ``rust_cache(cache)`` for these sources and this Python, if complete."""
    entry = rust_cache(cache) / build_key(sources, python)
    try:
        data = json.loads((entry / MANIFEST).read_text())
    except (OSError, ValueError):
        return None
    if (isinstance(data, dict) and data.get("sources") == sources
            and data.get("python") == python and extension_file(entry, ext_suffix).is_file()):
        return entry
    return None


@dataclass(frozen=True)
class RustChoice:
    """Whether this process runs the Rust part (``build`` its directory) and why."""

    build: Path | None
    reason: str

    @property
    def core(self) -> str:
        return "rust" if self.build is not None else "python"


def setting() -> str:
    return os.environ.get(ENV, "auto").strip().lower() or "auto"


class RustCore:
    """A ``sys.meta_path`` finder serving ``greenswarm_core`` from one build, and nothing else."""

    def __init__(self, file: Path) -> None:
        self.file = file

    def find_spec(
        self, fullname: str, path: Sequence[str] | None = None, target: ModuleType | None = None,
    ) -> importlib.machinery.ModuleSpec | None:
        if fullname != MODULE:
            return None
        return importlib.util.spec_from_file_location(
            fullname, self.file,
            loader=importlib.machinery.ExtensionFileLoader(fullname, str(self.file)))


_loaded: dict[Path, ModuleType] = {}


def load(file: Path) -> ModuleType:
    """The extension module of ``file``, loaded apart from ``sys.modules`` (the differential
    tests and the benchmark call both implementations in one process); once per file, since
    PyO3 initializes a module once per process."""
    module = _loaded.get(file)
    if module is None:
        spec = importlib.util.spec_from_file_location(
            MODULE, file, loader=importlib.machinery.ExtensionFileLoader(MODULE, str(file)))
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        _loaded[file] = module
    return module
