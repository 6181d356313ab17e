"""Build the Rust part of the native core: ``python -m native.rust_build``
(``scripts/build-native.sh`` runs it after the mypyc build).

Copies the crate (``native/rust``) into a temporary directory of the cache, writes there a
``.cargo/config.toml`` that points cargo at Debian's packaged crates
(``/usr/share/cargo/registry``, from ``librust-pyo3-dev``) as a directory source with
``net.offline = true``, runs ``maturin build --release`` (one cargo job, under ``nice``: the
machine is shared), and keeps the wheel's extension as
``<cache>/rust/<key>/lib/greenswarm_core<EXT_SUFFIX>`` (native/rust.py). A build of the same
key is reused; nothing is written into the source tree and nothing is fetched.

Exit status 0: built or reused; 1: not built, with one line saying why (the Rust parts then run
in Python); the compiler's output is in ``<cache>/rust/<key>.log``.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

from native import rust
from native.build import BuildError, build_once
from native.loader import ROOT, cache_root, ext_suffix, python_tag

REGISTRY = Path("/usr/share/cargo/registry")
CARGO_CONFIG = f"""# Written by native/rust_build.py: Debian's packaged crates, offline.
[source.crates-io]
replace-with = "debian"

[source.debian]
directory = "{REGISTRY}"

[net]
offline = true
"""


def toolchain() -> tuple[str, str]:
    """cargo and maturin, or a BuildError naming what to install."""
    cargo = shutil.which("cargo")
    if cargo is None:
        raise BuildError("cargo is not installed (Debian: apt-get install cargo)")
    if not (REGISTRY / "pyo3-0.17.3").is_dir() and not any(REGISTRY.glob("pyo3-0.17.*")):
        raise BuildError(f"PyO3 0.17 is not in {REGISTRY} (Debian: apt-get install "
                         "librust-pyo3-dev)")
    maturin = Path(sys.executable).parent / "maturin"
    found = str(maturin) if maturin.is_file() else shutil.which("maturin")
    if found is None:
        raise BuildError("maturin is not installed (pip install maturin, in .venv: setup.sh)")
    return cargo, found


def _compile(crate: Path, work: Path, maturin: str, log: Path) -> Path:
    """maturin build in ``work/crate``; the extension file it made."""
    source = work / "crate"
    shutil.copytree(crate, source, ignore=shutil.ignore_patterns("target", ".cargo"))
    (source / ".cargo").mkdir()
    (source / ".cargo" / "config.toml").write_text(CARGO_CONFIG)
    env = dict(os.environ, CARGO_TARGET_DIR=str(work / "target"))
    env.setdefault("CARGO_BUILD_JOBS", "1")
    command = ["nice", "-n", "10", maturin, "build", "--release", "--offline",
               "--interpreter", sys.executable, "--out", str(work / "wheel")]
    with open(log, "w") as out:
        status = subprocess.run(command, cwd=source, env=env, stdout=out,
                                stderr=subprocess.STDOUT, check=False).returncode
    wheels = sorted((work / "wheel").glob("*.whl")) if status == 0 else []
    if not wheels:
        last = log.read_text(errors="replace").strip().splitlines()[-1:] or ["no output"]
        raise BuildError(f"maturin failed (exit {status}): {last[0][:200]}")
    target = rust.extension_file(work, ext_suffix())
    target.parent.mkdir(parents=True)
    with zipfile.ZipFile(wheels[0]) as wheel:
        names = [n for n in wheel.namelist() if n.endswith(".so")]
        if len(names) != 1:
            raise BuildError(f"the wheel holds {len(names)} extension modules, 1 expected")
        target.write_bytes(wheel.read(names[0]))
    return target


def _check(target: Path, log: Path) -> None:
    """Import the new module in a child process (a broken one must not take the caller)."""
    code = ("import sys; sys.path.insert(0, sys.argv[1]); from native.rust import load; "
            "from pathlib import Path; m = load(Path(sys.argv[2])); "
            "assert len(m.room_plan()) == 13")
    result = subprocess.run([sys.executable, "-c", code, str(ROOT), str(target)],
                            capture_output=True, text=True, check=False)
    if result.returncode != 0:
        with open(log, "a") as out:
            out.write(result.stderr)
        raise BuildError("the built module does not import (see the log)")


def build(cache: Path | None = None, report: bool = True) -> Path:
    """The Rust core's build directory for the current crate: reused, or built."""
    top = cache_root() if cache is None else cache
    builds = rust.rust_cache(top)
    sources, python = rust.source_hash(), python_tag()
    key = rust.build_key(sources, python)

    def compile_into(work: Path) -> dict[str, object]:
        _, maturin = toolchain()
        log = builds / f"{key}.log"
        _check(_compile(rust.CRATE, work, maturin, log), log)
        return {"sources": sources, "python": python, "module": rust.MODULE}

    return build_once(
        builds, key, sources, what="the Rust core",
        cached=lambda: rust.find_build(top, sources, python, ext_suffix()) is not None,
        announce=f"building the Rust core with maturin into {builds / key} (about a minute, "
                 "1 job)",
        compile_into=compile_into, scratch=("crate", "target", "wheel"), report=report,
        check=toolchain)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cache", type=Path, default=None,
                        help="the compiled core's cache (default: as the loader finds it)")
    args = parser.parse_args(argv)
    try:
        build(args.cache)
    except (BuildError, OSError) as exc:
        print(f"native: WARNING: the Rust core is not built ({exc}); its parts run in Python",
              file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
