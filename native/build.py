"""Build the compiled core: ``python -m native.build`` (``scripts/build-native.sh``).

Compiles ``native.loader.MODULES`` with mypyc into ``<cache>/<key>/lib/`` (the cache is
``/var/cache/greenswarm/native`` unless ``GREENSWARM_NATIVE_CACHE`` says otherwise; the key hashes
the modules' sources, the Python build and mypy's version). A build of the same key is reused.
The compiler runs in a temporary directory of the cache, under an exclusive lock of the cache,
and its result is renamed into place only when complete, so concurrent builds neither corrupt
nor repeat each other. Nothing is written into the source tree.

Exit status 0: built or reused; 1: the build failed (the message says why; the sources still
run as pure Python).
"""

from __future__ import annotations

import argparse
import fcntl
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

from native.loader import (
    MANIFEST,
    MODULES,
    ROOT,
    build_key,
    cache_root,
    missing_modules,
    module_path,
    python_tag,
    root_marker,
    source_hash,
)

# The setuptools script the compiler runs in a subprocess (mypyc's own build path: mypycify
# then build_ext), so that a crash of the compiler cannot take the caller with it.
_SETUP = """
import sys
from setuptools import setup
from mypyc.build import mypycify

paths, target, lib, temp, jobs = sys.argv[1:6]
setup(
    name="greenswarm_native",
    ext_modules=mypycify(paths.split(","), target_dir=target, multi_file=True),
    script_args=["build_ext", "--build-lib", lib, "--build-temp", temp, "--parallel", jobs],
)
"""


KEEP = 8  # builds kept in the cache (checkouts, branches, edits), the newest


class BuildError(RuntimeError):
    pass


def mypy_version() -> str:
    try:
        return version("mypy")
    except PackageNotFoundError as exc:
        raise BuildError("mypy (which ships mypyc) is not installed") from exc


@contextmanager
def locked(cache: Path) -> Iterator[None]:
    """An exclusive lock of the cache, for the whole build (blocking)."""
    cache.mkdir(parents=True, exist_ok=True)
    with open(cache / ".lock", "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _compile(work: Path, jobs: int, log: Path) -> None:
    paths = ",".join(str(module_path(m).relative_to(ROOT)) for m in MODULES)
    setup_py = work / "setup_native.py"
    setup_py.write_text(_SETUP)
    env = dict(os.environ, PYTHONPATH=str(ROOT), MYPY_CACHE_DIR=str(work / "mypy-cache"))
    command = [sys.executable, str(setup_py), paths, str(work / "c"), str(work / "lib"),
               str(work / "temp"), str(jobs)]
    with open(log, "w") as out:
        status = subprocess.run(command, cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT,
                                check=False).returncode
    if status != 0:
        tail = "\n".join(log.read_text(errors="replace").splitlines()[-25:])
        raise BuildError(f"mypyc failed (exit {status}); the end of {log}:\n{tail}")


def _check_complete(lib: Path) -> None:
    missing = missing_modules(lib)
    if missing:
        raise BuildError(f"the build lacks {', '.join(missing)}")


def prune(cache: Path, keep: int = KEEP) -> list[Path]:
    """Remove all but the ``keep`` newest builds (call it under the lock); returns those
    removed. A process still running an old build keeps the modules it has imported."""
    builds = []
    for entry in cache.iterdir():
        manifest = entry / MANIFEST
        if not entry.name.startswith(".") and manifest.is_file():
            builds.append((manifest.stat().st_mtime, entry))
    removed = [entry for _, entry in sorted(builds, reverse=True)[keep:]]
    for entry in removed:
        shutil.rmtree(entry, ignore_errors=True)
        (cache / f"{entry.name}.log").unlink(missing_ok=True)
    return removed


def build_once(cache: Path, key: str, sources: str, *, what: str, cached: Callable[[], bool],
               announce: str, compile_into: Callable[[Path], dict[str, object]],
               scratch: Iterable[str], report: bool = True,
               check: Callable[[], object] = lambda: None) -> Path:
    """``cache/key``, reused when ``cached()`` (asked under the cache's lock, so a build that
    waited for another's finds it) or else built (``check()`` first, which raises when the
    build cannot be made, then ``announce`` said):
    ``compile_into(work)`` compiles
    into a temporary directory of the cache and gives the manifest's fields; the scratch
    entries go, the directory is renamed into place only when complete (under the cache's
    lock), the oldest builds are pruned, and the tree's marker names the key. ``what`` names
    the build in the lines printed. The mypyc build and the Rust build (native/rust_build.py)
    both go this way."""
    final = cache / key

    def say(line: str) -> None:
        if report:
            print(f"native: {line}", flush=True)

    with locked(cache):
        if cached():
            say(f"{what} for these sources is cached: {final}")
            os.utime(final / MANIFEST)  # recently used: the last to be pruned
        else:
            check()
            start = time.monotonic()
            say(announce)
            work = Path(tempfile.mkdtemp(prefix=f".{key}.", dir=cache))
            work.chmod(0o755)  # mkdtemp makes it private; the services read it too
            try:
                manifest = {**compile_into(work), "built_from": str(ROOT),
                            "built_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
                (work / MANIFEST).write_text(json.dumps(manifest, indent=1) + "\n")
                for name in scratch:
                    target = work / name
                    if target.is_dir():
                        shutil.rmtree(target)
                    elif target.exists():
                        target.unlink()
                os.rename(work, final)
            except BaseException:
                shutil.rmtree(work, ignore_errors=True)
                raise
            say(f"built in {time.monotonic() - start:.0f} s")
            for old in prune(cache):
                say(f"removed an old build of {what}: {old}")
        marker = root_marker(cache)
        marker.parent.mkdir(exist_ok=True)
        marker.write_text(json.dumps({"root": str(ROOT), "sources": sources, "key": key}) + "\n")
    return final


def build(cache: Path | None = None, jobs: int = 2, report: bool = True) -> Path:
    """The compiled core's directory for the current sources: reused, or built."""
    cache = cache_root() if cache is None else cache
    sources, python, compiler = source_hash(), python_tag(), mypy_version()
    key = build_key(sources, python, compiler)
    def compile_into(work: Path) -> dict[str, object]:
        _compile(work, jobs, cache / f"{key}.log")
        _check_complete(work / "lib")
        return {"sources": sources, "python": python, "mypy": compiler,
                "modules": list(MODULES)}

    return build_once(cache, key, sources, what="the compiled core",
                      cached=(cache / key / MANIFEST).is_file,
                      announce=f"compiling {len(MODULES)} modules with mypyc into {cache / key} "
                               "(about a minute on 2 cores)",
                      compile_into=compile_into,
                      scratch=("c", "temp", "mypy-cache", "setup_native.py"), report=report)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cache", type=Path, default=None,
                        help="the cache directory (default: $GREENSWARM_NATIVE_CACHE or "
                        "/var/cache/greenswarm/native)")
    parser.add_argument("--jobs", type=int, default=2, help="parallel C compilers (default 2)")
    args = parser.parse_args(argv)
    try:
        build(args.cache, args.jobs)
    except (BuildError, OSError) as exc:
        print(f"native: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
