"""The offline images of the lab and how each is made (pure: specs, cache keys, arguments).

No image registry is reachable, so every image starts from Debian packages (debootstrap) or from
the host's static busybox:

* ``greenswarm/busybox:latest``: the static busybox binary and its applets; tiny, for fast tests.
* ``greenswarm/base:<suite>``: ``debootstrap --variant=minbase`` plus everything the four workloads
  need (ffmpeg, redis-server, python3-numpy), so no ``docker build`` step needs the network.
* ``greenswarm/python:<suite>``: minbase plus python3, venv and pip; base of our own image.
* ``greenswarm/{ffmpeg,redis,dl,timeserver}:latest``: the workloads of DESIGN 7.1, each a small
  Dockerfile under ``lab/image_sources/<name>/`` on top of the base (sharing its one big layer).
* ``greenswarm/greenswarm:latest``: the project itself (manager, agent, monitor), from the
  top-level ``Dockerfile``.
"""

from __future__ import annotations

import fnmatch
import hashlib
import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path, PurePosixPath

LABEL_KEY = "org.greenswarm.key"
LABEL_IMAGE = "org.greenswarm.image"
# Bump when the way a root file system is trimmed or imported changes.
ROOTFS_RECIPE = 2
BUSYBOX_RECIPE = 1

BUSYBOX_TAG = "greenswarm/busybox:latest"
GREENSWARM_TAG = "greenswarm/greenswarm:latest"


class ImageKind(StrEnum):
    BUSYBOX = "busybox"
    ROOTFS = "rootfs"
    DOCKERFILE = "dockerfile"
    PROJECT = "project"


@dataclass(frozen=True)
class RootfsSpec:
    name: str
    packages: tuple[str, ...]

    def tag(self, suite: str) -> str:
        return f"greenswarm/{self.name}:{suite}"


@dataclass(frozen=True)
class WorkloadSpec:
    name: str
    description: str

    @property
    def tag(self) -> str:
        return f"greenswarm/{self.name}:latest"


BASE_ROOTFS = RootfsSpec(
    "base", ("ffmpeg", "redis-server", "python3", "python3-numpy", "procps"))
PYTHON_ROOTFS = RootfsSpec("python", ("python3", "python3-venv", "python3-pip"))
ROOTFS_IMAGES = (BASE_ROOTFS, PYTHON_ROOTFS)

WORKLOADS = (
    WorkloadSpec("ffmpeg", "job: encodes a generated test video until MAKESPAN_S is over"),
    WorkloadSpec("redis", "service: redis-server filled with REDIS_DATA_MB of data"),
    WorkloadSpec("dl", "job: NumPy neural-network training for MAKESPAN_S seconds"),
    WorkloadSpec("timeserver", "service: idle HTTP server answering the current time"),
)

# Trimmed from every root file system before it is imported (documentation, caches, logs).
ROOTFS_TRIM = ("usr/share/man", "usr/share/info", "usr/share/locale", "usr/share/lintian",
               "var/cache/apt", "var/lib/apt/lists", "var/log", "debootstrap")
TAR_EXCLUDES = ("./dev/*", "./proc/*", "./sys/*", "./run/*", "./tmp/*")


def rootfs_key(spec: RootfsSpec, suite: str) -> str:
    """Cache key of a root file system: what goes into it, not where it was downloaded."""
    payload = {"suite": suite, "variant": "minbase", "packages": sorted(spec.packages),
               "recipe": ROOTFS_RECIPE}
    return hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()


def rootfs_tarball(cache: Path, spec: RootfsSpec, suite: str) -> Path:
    return cache / f"{spec.name}-{suite}-{rootfs_key(spec, suite)[:16]}.tar"


def debootstrap_argv(spec: RootfsSpec, suite: str, target: Path, mirror: str,
                     debs_cache: Path) -> list[str]:
    return ["debootstrap", "--variant=minbase", f"--include={','.join(spec.packages)}",
            f"--cache-dir={debs_cache}", suite, str(target), mirror]


def import_changes(name: str, key: str, cmd: Sequence[str], path: str) -> list[str]:
    """``docker import --change`` instructions: labels, PATH and default command."""
    return [
        f"LABEL {LABEL_IMAGE}={name}",
        f"LABEL {LABEL_KEY}={key}",
        f"ENV PATH={path}",
        "ENV LANG=C.UTF-8",
        f"CMD {json.dumps(list(cmd))}",
    ]


def busybox_key(binary: bytes) -> str:
    return hashlib.sha256(binary + f"recipe={BUSYBOX_RECIPE}".encode()).hexdigest()


def is_static_elf(head: bytes) -> bool:
    """A static executable has no program interpreter (no ``ld-linux`` path) in its headers."""
    return head[:4] == b"\x7fELF" and b"ld-linux" not in head and b"ld-musl" not in head


# --- the project's own image -------------------------------------------------------------

def read_dockerignore(text: str) -> list[str]:
    return [line.strip() for line in text.splitlines()
            if line.strip() and not line.lstrip().startswith("#")]


def ignored(rel: PurePosixPath, patterns: Sequence[str]) -> bool:
    """A simple .dockerignore matcher: a path is left out when it or one of its parents matches
    a pattern (``**/`` matches at any depth; ``!`` exceptions are not supported)."""
    candidates = [PurePosixPath(*rel.parts[:i]) for i in range(1, len(rel.parts) + 1)]
    for pattern in patterns:
        pat = pattern.rstrip("/")
        anywhere = pat.startswith("**/")
        pat = pat.removeprefix("**/")
        for candidate in candidates:
            if fnmatch.fnmatchcase(str(candidate), pat):
                return True
            if anywhere and fnmatch.fnmatchcase(candidate.name, pat):
                return True
    return False


def context_files(root: Path, walk: Iterable[tuple[str, list[str], list[str]]],
                  patterns: Sequence[str]) -> list[PurePosixPath]:
    """Relative paths of the build context, sorted, from an ``os.walk`` of ``root``."""
    files: list[PurePosixPath] = []
    for dirpath, dirnames, filenames in walk:
        base = PurePosixPath(Path(dirpath).relative_to(root).as_posix())
        dirnames[:] = sorted(d for d in dirnames if not ignored(base / d, patterns))
        files += [base / f for f in sorted(filenames) if not ignored(base / f, patterns)]
    return sorted(PurePosixPath(str(f).removeprefix("./")) for f in files)


def wheel_download_argv(python: str, dest: Path, requirements: Sequence[str], machine: str,
                        python_version: str) -> list[str]:
    """``pip download`` of binary wheels for the image's Python (whatever the host's is)."""
    major_minor = "".join(python_version.split(".")[:2])
    platforms = [f"manylinux2014_{machine}", f"manylinux_2_17_{machine}",
                 f"manylinux_2_28_{machine}", f"linux_{machine}"]
    argv = [python, "-m", "pip", "download", "--disable-pip-version-check", "--quiet",
            "--dest", str(dest), "--only-binary=:all:", "--python-version", python_version,
            "--implementation", "cp", "--abi", f"cp{major_minor}", "--abi", "abi3",
            "--abi", "none"]
    for platform in platforms:
        argv += ["--platform", platform]
    return [*argv, *requirements]


def marker_environment(python_version: str, machine: str) -> dict[str, str]:
    """PEP 508 marker values of the image's CPython on Linux."""
    return {
        "python_version": ".".join(python_version.split(".")[:2]),
        "python_full_version": python_version,
        "implementation_name": "cpython",
        "implementation_version": python_version,
        "platform_python_implementation": "CPython",
        "platform_machine": machine,
        "platform_system": "Linux",
        "sys_platform": "linux",
        "os_name": "posix",
        "platform_release": "",
        "platform_version": "",
    }


def requirements_key(requirements: Sequence[str], machine: str, python_version: str) -> str:
    payload = json.dumps({"req": sorted(requirements), "machine": machine, "py": python_version})
    return hashlib.sha256(payload.encode()).hexdigest()
