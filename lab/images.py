"""Builds the offline images on the main engine and loads them into the lab's node engines.

Caches (all outside the repository): root file system tarballs in
``/var/cache/greenswarm/rootfs``, downloaded .debs in ``/var/cache/greenswarm/debs``, Python wheels
for the project image in ``/var/cache/greenswarm/wheels``. An image is rebuilt only when its
recipe key (an image label) changed or with ``force``; Dockerfile images are always rebuilt with
Docker's layer cache, which makes an unchanged rebuild take about a second.
"""

from __future__ import annotations

import hashlib
import io
import os
import platform
import shutil
import subprocess
import sys
import tarfile
import time
import tomllib
import zipfile
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from pathlib import Path, PurePosixPath
from typing import Any, BinaryIO

from lab import catalog, engine, mounts
from lab.errors import (
    CommandFailedError,
    LabError,
    LabTimeoutError,
    LabUnavailableError,
)
from lab.model import ImageSet, NodeRecord
from lab.proc import run, run_logged
from lab.settings import LabSettings, settings_from_env

Report = Callable[[str], None]
REPO_ROOT = Path(__file__).resolve().parents[1]
IMAGES_DIR = REPO_ROOT / "lab" / "image_sources"
BUSYBOX_CANDIDATES = (Path("/bin/busybox"), Path("/usr/bin/busybox"))


@dataclass(frozen=True)
class ImageResult:
    tag: str
    image_id: str
    size_bytes: int
    built: bool
    seconds: float


class Builder:
    """Builds images on the main engine; ``report`` receives one line per step."""

    def __init__(self, settings: LabSettings, report: Report, force: bool = False) -> None:
        self.settings = settings
        self.report = report
        self.force = force
        self.main = engine.connect(settings.engine.main_url, settings.timeouts.api_s)
        self.log = settings.paths.log_dir / "images.log"

    # -- helpers -------------------------------------------------------------------------
    def _docker(self, *args: str) -> list[str]:
        return [self.settings.engine.docker_cli, "-H", self.settings.engine.main_url, *args]

    def _env(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith("DOCKER_")}
        return {**env, "DOCKER_BUILDKIT": "0"}

    def _labelled(self, tag: str, key: str) -> bool:
        info = engine.image_info(self.main, tag)
        labels = ((info or {}).get("Config") or {}).get("Labels") or {}
        return not self.force and labels.get(catalog.LABEL_KEY) == key

    def _result(self, tag: str, built: bool, started: float) -> ImageResult:
        info = engine.image_info(self.main, tag)
        if info is None:
            raise LabError(f"image {tag} is missing after its build")
        return ImageResult(tag, str(info["Id"]), int(info.get("Size", 0)), built,
                           time.monotonic() - started)

    # -- busybox ---------------------------------------------------------------------------
    def busybox(self) -> ImageResult:
        started, tag = time.monotonic(), catalog.BUSYBOX_TAG
        binary = _busybox_binary()
        data = binary.read_bytes()
        key = catalog.busybox_key(data)
        if self._labelled(tag, key):
            return self._result(tag, False, started)
        self.report(f"images: building {tag} from {binary}")
        applets = run([str(binary), "--list"]).stdout.split()
        tar = _busybox_tar(data, applets)
        changes = catalog.import_changes("busybox", key, ["sh"], "/bin")
        self._import(tar, tag, changes)
        return self._result(tag, True, started)

    # -- root file systems -------------------------------------------------------------------
    def rootfs(self, spec: catalog.RootfsSpec) -> ImageResult:
        started, suite = time.monotonic(), self.settings.suite
        tag, key = spec.tag(suite), catalog.rootfs_key(spec, suite)
        if self._labelled(tag, key):
            return self._result(tag, False, started)
        tarball = catalog.rootfs_tarball(self.settings.paths.rootfs_cache, spec, suite)
        if self.force or not tarball.exists():
            self._debootstrap(spec, tarball)
        else:
            self.report(f"images: reusing cached root file system {tarball}")
        self.report(f"images: importing {tag}")
        changes = catalog.import_changes(
            spec.name, key, ["/bin/bash"],
            "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin")
        with tarball.open("rb") as stream:
            self._import(stream, tag, changes)
        return self._result(tag, True, started)

    def _debootstrap(self, spec: catalog.RootfsSpec, tarball: Path) -> None:
        paths = self.settings.paths
        target = paths.build_dir / f"rootfs-{spec.name}"
        _remove_build_root(target)
        for directory in (paths.debs_cache, paths.rootfs_cache, target.parent):
            directory.mkdir(parents=True, exist_ok=True)
        self.report(f"images: debootstrap {self.settings.suite} ({spec.name}: "
                    f"{' '.join(spec.packages)}) from {self.settings.mirror}; "
                    f"takes a minute or two, log: {self.log}")
        argv = catalog.debootstrap_argv(spec, self.settings.suite, target,
                                        self.settings.mirror, paths.debs_cache)
        env = {**os.environ, "LANG": "C.UTF-8", "DEBIAN_FRONTEND": "noninteractive"}
        try:
            run_logged(argv, self.log, timeout_s=self.settings.timeouts.debootstrap_s, env=env)
            _trim_rootfs(target)
            partial = tarball.with_suffix(".tar.partial")
            excludes = [f"--exclude={p}" for p in catalog.TAR_EXCLUDES]
            run_logged(["tar", "--numeric-owner", "-C", str(target), *excludes,
                        "-cf", str(partial), "."], self.log, timeout_s=600)
            partial.replace(tarball)
        finally:
            _remove_build_root(target)

    def _import(self, source: BinaryIO | bytes, tag: str, changes: list[str]) -> None:
        argv = self._docker("import")
        for change in changes:
            argv += ["--change", change]
        argv += ["-", tag]
        timeout_s = self.settings.timeouts.build_s
        try:
            if isinstance(source, bytes):
                done = subprocess.run(argv, input=source, capture_output=True,
                                      timeout=timeout_s, check=False, env=self._env())
            else:
                done = subprocess.run(argv, stdin=source, capture_output=True,
                                      timeout=timeout_s, check=False, env=self._env())
        except subprocess.TimeoutExpired as exc:
            raise LabTimeoutError(f"docker import of {tag} did not finish") from exc
        if done.returncode != 0:
            raise CommandFailedError(argv, done.returncode, done.stderr.decode(errors="replace"))

    # -- Dockerfile images -------------------------------------------------------------------
    def workload(self, spec: catalog.WorkloadSpec) -> ImageResult:
        started = time.monotonic()
        context = IMAGES_DIR / spec.name
        if not (context / "Dockerfile").exists():
            raise LabError(f"no build context for {spec.tag}: {context}/Dockerfile is missing")
        before = engine.image_id(self.main, spec.tag)
        base = catalog.BASE_ROOTFS.tag(self.settings.suite)
        argv = self._docker("build", "-q", "--force-rm", "-t", spec.tag,
                            "--build-arg", f"BASE_IMAGE={base}",
                            "--label", f"{catalog.LABEL_IMAGE}={spec.name}")
        if self.force:
            argv.append("--no-cache")
        run_logged([*argv, str(context)], self.log, timeout_s=self.settings.timeouts.build_s,
                   env=self._env())
        result = self._result(spec.tag, False, started)
        return ImageResult(result.tag, result.image_id, result.size_bytes,
                           result.image_id != before, result.seconds)

    # -- the project image -------------------------------------------------------------------
    def project(self, refresh: bool = True) -> ImageResult:
        """The project image; rebuilt when the source changed, unless ``refresh`` is off and
        some version of it exists (`lab up` does not rebuild on every edit of the tree)."""
        started, tag = time.monotonic(), catalog.GREENSWARM_TAG
        if not refresh and not self.force and engine.image_id(self.main, tag) is not None:
            return self._result(tag, False, started)
        if not (REPO_ROOT / "Dockerfile").exists():
            raise LabError(f"{tag} is built from a source checkout; {REPO_ROOT}/Dockerfile "
                           "is missing")
        files = _project_files()
        key = _content_key(files)
        if self._labelled(tag, key):
            return self._result(tag, False, started)
        self.report(f"images: building {tag} (wheels cached in "
                    f"{self.settings.paths.wheels_cache})")
        wheels = self._wheels()
        context = self.settings.paths.build_dir / "greenswarm-context.tar"
        context.parent.mkdir(parents=True, exist_ok=True)
        _write_context(context, files, wheels)
        argv = self._docker("build", "-q", "--force-rm", "-t", tag,
                            "--label", f"{catalog.LABEL_KEY}={key}",
                            "--label", f"{catalog.LABEL_IMAGE}=greenswarm")
        if self.force:
            argv.append("--no-cache")
        try:
            with context.open("rb") as stream:
                run_logged([*argv, "-"], self.log, timeout_s=self.settings.timeouts.build_s,
                           env=self._env(), stdin=stream)
        finally:
            context.unlink(missing_ok=True)
        return self._result(tag, True, started)

    def _wheels(self) -> Path:
        """A wheelhouse for the image's Python (cached): every dependency as a binary wheel."""
        requirements = [*_project_requirements(), "setuptools>=68", "wheel"]
        machine = platform.machine()
        python_version = self._image_python_version()
        key = catalog.requirements_key(requirements, machine, python_version)
        final = self.settings.paths.wheels_cache / key[:16]
        if final.is_dir() and any(final.glob("*.whl")) and not self.force:
            return final
        partial = final.with_name(final.name + ".partial")
        _remove_tree(partial)
        partial.mkdir(parents=True)
        try:
            self._download(partial, requirements, machine, python_version)
        except LabError as exc:
            raise LabUnavailableError(
                f"cannot fetch the Python wheels for {catalog.GREENSWARM_TAG} (PyPI or a local "
                f"wheelhouse is needed once): {exc}") from exc
        _remove_tree(final)
        partial.replace(final)
        return final

    def _download(self, dest: Path, requirements: list[str], machine: str,
                  python_version: str) -> None:
        """pip download, then again for requirements whose markers only the image's Python
        satisfies (pip evaluates markers against the host's Python)."""
        wanted = list(requirements)
        for _round in range(5):
            argv = catalog.wheel_download_argv(sys.executable, dest, wanted, machine,
                                               python_version)
            run_logged(argv, self.log, timeout_s=self.settings.timeouts.build_s)
            extra = _missing_marker_requirements(dest, catalog.marker_environment(
                python_version, machine))
            if not extra:
                return
            self.report(f"images: also fetching {', '.join(extra)} for Python {python_version}")
            wanted = extra
        raise LabError("wheel dependencies did not settle after 5 rounds")

    def _image_python_version(self) -> str:
        tag = catalog.PYTHON_ROOTFS.tag(self.settings.suite)
        done = run(self._docker("run", "--rm", "--network", "none", "--entrypoint", "python3",
                                tag, "-c", "import platform; print(platform.python_version())"),
                   timeout_s=self.settings.timeouts.command_s, env=self._env())
        return done.stdout.strip()

    # -- housekeeping --------------------------------------------------------------------------
    def prune(self) -> int:
        """Drop old, now untagged builds of our images from the main engine."""
        return engine.prune_dangling(self.main, catalog.LABEL_IMAGE)


def busybox_on(socket_path: str) -> str:
    """greenswarm/busybox:latest on the engine at ``socket_path`` (the lab's settings
    otherwise), without the lab's lock or its nodes: for the tests and the benchmarks that run
    containers on one engine. Rebuilt only when missing or when the machine's busybox changed.
    Returns its tag."""
    settings = settings_from_env()
    settings = replace(settings, engine=replace(settings.engine, main_socket=Path(socket_path)))
    settings.paths.log_dir.mkdir(parents=True, exist_ok=True)
    return Builder(settings, lambda line: None).busybox().tag


def node_tags(settings: LabSettings, images: ImageSet) -> list[str]:
    """The tags loaded into every node for ``images``."""
    if images is ImageSet.NONE:
        return []
    if images is ImageSet.MINIMAL:
        return [catalog.BUSYBOX_TAG]
    return [catalog.BUSYBOX_TAG, *(s.tag(settings.suite) for s in catalog.ROOTFS_IMAGES),
            *(w.tag for w in catalog.WORKLOADS), catalog.GREENSWARM_TAG]


def load_into_nodes(settings: LabSettings, nodes: Sequence[NodeRecord], tags: Sequence[str],
                    report: Report) -> dict[str, list[str]]:
    """``docker save | docker load`` of the tags a node lacks (by image id), nodes in parallel.

    Returns node name -> tags loaded now.
    """
    main = engine.connect(settings.engine.main_url, settings.timeouts.api_s)
    wanted = {tag: engine.image_id(main, tag) for tag in tags}
    missing = [tag for tag, image in wanted.items() if image is None]
    if missing:
        raise LabError(f"images missing on the main engine: {', '.join(missing)} "
                       "(run `greenswarm lab images`)")
    if not nodes or not tags:
        return {}
    with ThreadPoolExecutor(max_workers=len(nodes)) as pool:
        futures = {n.name: pool.submit(_load_node, settings, n, wanted, report) for n in nodes}
        return {name: future.result() for name, future in futures.items()}


def _load_node(settings: LabSettings, node: NodeRecord, wanted: dict[str, str | None],
               report: Report) -> list[str]:
    node_cli = engine.connect(node.socket_url, settings.timeouts.api_s)
    todo = [tag for tag, image in wanted.items() if engine.image_id(node_cli, tag) != image]
    if not todo:
        return []
    report(f"images: loading {len(todo)} image(s) into {node.name}")
    cli, timeout_s = settings.engine.docker_cli, settings.timeouts.load_s
    save_argv = [cli, "-H", settings.engine.main_url, "save", *todo]
    load_argv = [cli, "-H", node.socket_url, "load", "-q"]
    _pipe(save_argv, load_argv, timeout_s)
    wrong = [tag for tag in todo if engine.image_id(node_cli, tag) != wanted[tag]]
    if wrong:
        raise LabError(f"{node.name}: image ids differ after loading {', '.join(wrong)}")
    engine.prune_dangling(node_cli, catalog.LABEL_IMAGE)
    return todo


def _pipe(first: list[str], second: list[str], timeout_s: float) -> None:
    """``first | second`` without a shell; both must succeed in ``timeout_s``."""
    producer = subprocess.Popen(first, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        consumer = subprocess.Popen(second, stdin=producer.stdout, stdout=subprocess.PIPE,
                                    stderr=subprocess.PIPE)
    except OSError:
        producer.kill()
        producer.wait(10)
        raise
    assert producer.stdout is not None
    producer.stdout.close()  # the consumer owns the read end now
    try:
        _out, err2 = consumer.communicate(timeout=timeout_s)
        err1 = producer.stderr.read() if producer.stderr else b""
        producer.wait(timeout=30)
    except subprocess.TimeoutExpired as exc:
        for proc in (producer, consumer):
            proc.kill()
            proc.wait(10)
        raise LabTimeoutError(f"`{' '.join(first[3:5])} | load` did not finish") from exc
    finally:
        if producer.stderr:
            producer.stderr.close()
    if producer.returncode != 0:
        raise CommandFailedError(first, producer.returncode, err1.decode(errors="replace"))
    if consumer.returncode != 0:
        raise CommandFailedError(second, consumer.returncode, err2.decode(errors="replace"))


# -- file-system helpers (I/O) -----------------------------------------------------------------

def _busybox_binary() -> Path:
    override = os.environ.get("GREENSWARM_BUSYBOX")
    candidates = (Path(override),) if override else BUSYBOX_CANDIDATES
    for path in candidates:
        if path.is_file():
            with path.open("rb") as f:
                if catalog.is_static_elf(f.read(8192)):
                    return path
    raise LabUnavailableError("no static busybox found (apt-get install busybox-static)")


def _busybox_tar(binary: bytes, applets: Sequence[str]) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.GNU_FORMAT) as tar:
        for name, mode in (("bin", 0o755), ("dev", 0o755), ("etc", 0o755), ("proc", 0o555),
                           ("root", 0o700), ("sys", 0o555), ("tmp", 0o1777), ("var", 0o755),
                           ("var/www", 0o755)):
            info = tarfile.TarInfo(name)
            info.type, info.mode = tarfile.DIRTYPE, mode
            tar.addfile(info)
        _add_file(tar, "bin/busybox", binary, 0o755)
        for applet in sorted(set(applets) - {"busybox"}):
            link = tarfile.TarInfo(f"bin/{applet}")
            link.type, link.linkname = tarfile.SYMTYPE, "busybox"
            tar.addfile(link)
        _add_file(tar, "etc/passwd", b"root:x:0:0:root:/root:/bin/sh\n"
                  b"nobody:x:65534:65534:nobody:/nonexistent:/bin/false\n", 0o644)
        _add_file(tar, "etc/group", b"root:x:0:\nnogroup:x:65534:\n", 0o644)
    return buffer.getvalue()


def _add_file(tar: tarfile.TarFile, name: str, data: bytes, mode: int) -> None:
    info = tarfile.TarInfo(name)
    info.size, info.mode, info.mtime = len(data), mode, int(time.time())
    tar.addfile(info, io.BytesIO(data))


def _trim_rootfs(root: Path) -> None:
    """Drop documentation, caches and logs (keeping the directories and copyright files)."""
    for rel in catalog.ROOTFS_TRIM:
        path = root / rel
        if path.is_dir() and not path.is_symlink():
            for child in path.iterdir():
                _remove_tree(child)
    doc = root / "usr/share/doc"
    if doc.is_dir():
        for dirpath, _dirs, filenames in os.walk(doc, topdown=False):
            for name in filenames:
                if name != "copyright":
                    (Path(dirpath) / name).unlink()
    (root / "etc/hostname").write_text("")


def _remove_build_root(target: Path) -> None:
    """Delete a debootstrap target, but never through a mount (an interrupted debootstrap may
    leave /proc, /sys or /dev mounted inside it)."""
    if mounts.unmount_all([target]):
        raise LabError(f"cannot delete {target}: something is still mounted under it")
    _remove_tree(target)


def _remove_tree(path: Path) -> None:
    if path.is_symlink() or path.is_file():
        path.unlink()
    elif path.is_dir():
        shutil.rmtree(path)


def _project_files() -> list[tuple[PurePosixPath, Path]]:
    ignore_file = REPO_ROOT / ".dockerignore"
    patterns = catalog.read_dockerignore(
        ignore_file.read_text() if ignore_file.exists() else "")
    rels = catalog.context_files(REPO_ROOT, os.walk(REPO_ROOT), patterns)
    return [(rel, REPO_ROOT / rel) for rel in rels]


def _content_key(files: Sequence[tuple[PurePosixPath, Path]]) -> str:
    digest = hashlib.sha256()
    for rel, path in files:
        digest.update(str(rel).encode() + b"\0")
        digest.update(path.read_bytes() if path.is_file() else b"")
        digest.update(b"\0")
    return digest.hexdigest()


def _write_context(target: Path, files: Sequence[tuple[PurePosixPath, Path]],
                   wheels: Path) -> None:
    # GNU format: no PAX headers (for float mtimes), which would hide the first member from
    # the Docker CLI's check that stdin is an archive and not a Dockerfile.
    with tarfile.open(target, mode="w", format=tarfile.GNU_FORMAT) as tar:
        for rel, path in files:
            tar.add(path, arcname=str(rel), recursive=False)
        for wheel in sorted(wheels.iterdir()):
            tar.add(wheel, arcname=f".wheels/{wheel.name}", recursive=False)


def _missing_marker_requirements(wheels: Path, environment: dict[str, str]) -> list[str]:
    """Requirements of the downloaded wheels that apply on the image but have no wheel yet."""
    from packaging.requirements import InvalidRequirement, Requirement
    from packaging.utils import canonicalize_name

    present = {canonicalize_name(w.name.split("-", 1)[0]) for w in wheels.glob("*.whl")}
    missing: dict[str, str] = {}
    for wheel in sorted(wheels.glob("*.whl")):
        for line in _wheel_requires(wheel):
            try:
                req = Requirement(line)
            except InvalidRequirement:
                continue
            name = canonicalize_name(req.name)
            if req.marker is None or name in present or "extra" in str(req.marker):
                continue
            if req.marker.evaluate(environment):
                missing[name] = f"{req.name}{req.specifier}"
    return sorted(missing.values())


def _wheel_requires(wheel: Path) -> list[str]:
    with zipfile.ZipFile(wheel) as archive:
        names = [n for n in archive.namelist() if n.endswith(".dist-info/METADATA")]
        if not names:
            return []
        text = archive.read(names[0]).decode("utf-8", errors="replace")
    return [line.split(":", 1)[1].strip() for line in text.splitlines()
            if line.startswith("Requires-Dist:")]


def _project_requirements() -> list[str]:
    data: dict[str, Any] = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())
    requirements = data.get("project", {}).get("dependencies", [])
    return [str(r) for r in requirements]
