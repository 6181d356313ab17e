"""Per-container sampling of our tasks (containers labelled ``greenswarm.task=<task id>``).

Usage is read from the container's cgroup files (cheap: three small reads), found from the
container's main process (``/proc/<pid>/cgroup``) or from the engine's cgroup parent, and from the
Docker stats API (one-shot) when the files are not there. Utilization is relative to the task's
own allocation: CPU against its CPU shares, memory against its memory limit.

A container that vanished between the listing and the reading is skipped (logged at debug).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from pathlib import Path
from typing import Any

import docker
import requests

from domain.errors import UnavailableError
from domain.labels import LABEL_TASK
from monitor.cgroups import (
    CgroupDirs,
    CgroupVersion,
    detect_version,
    dirs_from_proc_cgroup,
    read_cpu_counter,
    read_memory,
)
from monitor.core import (
    CpuCounter,
    UtilSample,
    cores_used,
    cpu_util_of_shares,
    memory_used_bytes,
    memory_used_from_stats,
    memory_util,
    task_memory_limit_bytes,
)

log = logging.getLogger(__name__)

DEFAULT_CGROUP_PARENTS: tuple[str, ...] = ("docker",)
_NEVER_READ = "0001-01-01T00:00:00Z"
STATS_WORKERS = 8

Clock = Callable[[], float]


class ReadPath(StrEnum):
    CGROUP = "cgroup"
    STATS = "stats"


@dataclass(frozen=True)
class TaskContainer:
    container_id: str
    task_id: str


@dataclass
class _Tracked:
    """What we know of one container between samples."""

    task_id: str
    cpu_shares: int
    memory_limit_bytes: int
    inspected_at_s: float
    dirs: CgroupDirs | None
    previous: CpuCounter | None = None


@dataclass(frozen=True)
class _Usage:
    counter: CpuCounter
    memory_used_bytes: int


class _Vanished(Exception):
    """The container is gone (internal signal, never leaves this module)."""


# The SDK's errors and the transport's (an engine that went away mid-call).
_DOCKER_ERRORS: tuple[type[Exception], ...] = (
    docker.errors.DockerException,
    requests.RequestException,
)
_READ_ERRORS: tuple[type[Exception], ...] = (*_DOCKER_ERRORS, KeyError, ValueError, TypeError)
_STATS_ERRORS: tuple[type[Exception], ...] = (_Vanished, *_READ_ERRORS)


class ContainerSampler:
    """Samples every running task container; ``sample()`` = ``read(list_tasks())``."""

    def __init__(
        self,
        client: Any,
        host_memory_bytes: int,
        cgroup_root: Path = Path("/sys/fs/cgroup"),
        cgroup_parents: Sequence[str] = DEFAULT_CGROUP_PARENTS,
        proc_root: Path = Path("/proc"),
        clock: Clock = time.monotonic,
        refresh_s: float = 45.0,
    ) -> None:
        self._client = client
        self._host_memory_bytes = host_memory_bytes
        self._root = cgroup_root
        self._version = detect_version(cgroup_root)
        self._parents = tuple(p for p in cgroup_parents if p)
        self._proc = proc_root
        self._clock = clock
        self._refresh_s = refresh_s
        self._tracked: dict[str, _Tracked] = {}
        self._pool: ThreadPoolExecutor | None = None

    # --- listing ------------------------------------------------------------------------------

    def list_tasks(self) -> list[TaskContainer]:
        """Running containers that carry the task label (one Docker API call)."""
        try:
            summaries: list[dict[str, Any]] = self._client.api.containers(
                filters={"label": LABEL_TASK}
            )
        except _DOCKER_ERRORS as exc:
            raise UnavailableError(f"cannot list containers: {exc}") from exc
        found: list[TaskContainer] = []
        for summary in summaries:
            task_id = (summary.get("Labels") or {}).get(LABEL_TASK, "")
            if not task_id:
                log.debug("container %s has an empty %s label", summary.get("Id"), LABEL_TASK)
                continue
            found.append(TaskContainer(str(summary["Id"]), str(task_id)))
        listed = {c.container_id for c in found}
        for gone in [cid for cid in self._tracked if cid not in listed]:
            del self._tracked[gone]
        return found

    def sample(self) -> dict[str, UtilSample]:
        return self.read(self.list_tasks())

    def read_path(self, container_id: str) -> ReadPath | None:
        """How the container was last read (None if it is not tracked)."""
        tracked = self._tracked.get(container_id)
        if tracked is None:
            return None
        return ReadPath.CGROUP if tracked.dirs is not None else ReadPath.STATS

    # --- reading ------------------------------------------------------------------------------

    def read(self, containers: Iterable[TaskContainer]) -> dict[str, UtilSample]:
        """Utilization per task id since the previous reading of each container; a container read
        for the first time only primes its counter, a vanished one is skipped.

        Cgroup files are read in line; the containers without files go to the stats API in
        parallel (the engine answers a one-shot request at its next collection tick, about a
        second away, so one by one would take a second per container)."""
        ready: list[tuple[TaskContainer, _Tracked, _Usage]] = []
        via_api: list[tuple[TaskContainer, _Tracked]] = []
        for container in containers:
            try:
                tracked = self._refresh(container)
            except _Vanished:
                self._vanished(container)
                continue
            except _READ_ERRORS as exc:
                self._unreadable(container, exc)
                continue
            usage = self._file_usage(container.container_id, tracked)
            if usage is None:
                via_api.append((container, tracked))
            else:
                ready.append((container, tracked, usage))
        if via_api:
            for (container, tracked), outcome in zip(
                via_api, self._stats_in_parallel([c.container_id for c, _ in via_api]), strict=True
            ):
                if isinstance(outcome, _Vanished):
                    self._vanished(container)
                elif isinstance(outcome, Exception):
                    self._unreadable(container, outcome)
                else:
                    ready.append((container, tracked, outcome))
        samples: dict[str, UtilSample] = {}
        for container, tracked, usage in ready:
            sample = self._utilization(tracked, usage)
            if sample is None:
                continue
            if container.task_id in samples:
                log.debug("task %s runs in more than one container; kept one", container.task_id)
                continue
            samples[container.task_id] = sample
        return samples

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True)
            self._pool = None

    def _vanished(self, container: TaskContainer) -> None:
        log.debug("container %s (task %s) vanished while sampling; skipped",
                  container.container_id[:12], container.task_id)
        self._tracked.pop(container.container_id, None)

    @staticmethod
    def _unreadable(container: TaskContainer, exc: BaseException) -> None:
        log.debug("container %s: cannot read it (%s); skipped this sample",
                  container.container_id[:12], exc)

    def _utilization(self, tracked: _Tracked, usage: _Usage) -> UtilSample | None:
        previous, tracked.previous = tracked.previous, usage.counter
        if previous is None:
            return None
        cores = cores_used(previous, usage.counter)
        if cores is None:
            return None
        limit = task_memory_limit_bytes(tracked.memory_limit_bytes, self._host_memory_bytes)
        return UtilSample(
            cpu_util=cpu_util_of_shares(cores, tracked.cpu_shares),
            memory_util=memory_util(usage.memory_used_bytes, limit),
        )

    def _refresh(self, container: TaskContainer) -> _Tracked:
        """Inspect a new container, and a known one once per ``refresh_s`` (its shares and memory
        change when the agent applies a cut)."""
        now = self._clock()
        tracked = self._tracked.get(container.container_id)
        if tracked is not None and now - tracked.inspected_at_s < self._refresh_s:
            return tracked
        try:
            attrs: dict[str, Any] = self._client.api.inspect_container(container.container_id)
        except docker.errors.NotFound as exc:
            raise _Vanished from exc
        state = attrs.get("State") or {}
        if not state.get("Running", False):
            raise _Vanished
        host_config = attrs.get("HostConfig") or {}
        shares = int(host_config.get("CpuShares") or 0)
        memory = int(host_config.get("Memory") or 0)
        if tracked is None:
            dirs = self._resolve_dirs(container.container_id, attrs)
            tracked = _Tracked(container.task_id, shares, memory, now, dirs)
            self._tracked[container.container_id] = tracked
        else:
            tracked.cpu_shares, tracked.memory_limit_bytes = shares, memory
            tracked.inspected_at_s = now
        return tracked

    def _resolve_dirs(self, container_id: str, attrs: dict[str, Any]) -> CgroupDirs | None:
        """The container's cgroup: where its main process is (exact, also for a custom cgroup
        parent), else ``<parent>/<id>`` for the known parents, else the systemd scope."""
        if self._version is CgroupVersion.NONE:
            return None
        candidates: list[CgroupDirs] = []
        pid = int((attrs.get("State") or {}).get("Pid") or 0)
        if pid > 0:
            try:
                text = (self._proc / str(pid) / "cgroup").read_text(encoding="utf-8")
            except OSError:
                text = ""
            from_proc = dirs_from_proc_cgroup(text, self._root, self._version)
            if from_proc is not None and container_id in str(from_proc.cpuacct):
                candidates.append(from_proc)
        parent = str((attrs.get("HostConfig") or {}).get("CgroupParent") or "")
        for candidate_parent in (parent, *self._parents):
            if candidate_parent:
                path = f"{candidate_parent}/{container_id}"
                candidates.append(CgroupDirs.under(self._root, self._version, path))
        candidates.append(
            CgroupDirs.under(self._root, self._version, f"system.slice/docker-{container_id}.scope")
        )
        for dirs in candidates:
            if dirs.exists():
                return dirs
        log.debug("no cgroup files for container %s; using the Docker stats API", container_id[:12])
        return None

    def _file_usage(self, container_id: str, tracked: _Tracked) -> _Usage | None:
        """From the cgroup files; None when there are none (or they just became unreadable,
        most likely because the container is gone: the stats API will tell)."""
        if tracked.dirs is None:
            return None
        try:
            counter = read_cpu_counter(tracked.dirs, self._clock())
            memory = read_memory(tracked.dirs)
        except (OSError, ValueError, KeyError) as exc:
            log.debug("cgroup files of %s unreadable (%s); asking Docker", container_id[:12], exc)
            tracked.dirs = None
            tracked.previous = None  # the API's counter runs on the engine's clock
            return None
        return _Usage(counter, memory_used_bytes(memory.usage_bytes, memory.cache_bytes))

    def _stats_in_parallel(self, container_ids: list[str]) -> list[_Usage | Exception]:
        if len(container_ids) == 1:
            return [self._stats_outcome(container_ids[0])]
        if self._pool is None:
            self._pool = ThreadPoolExecutor(STATS_WORKERS, thread_name_prefix="monitor-stats")
        return list(self._pool.map(self._stats_outcome, container_ids))

    def _stats_outcome(self, container_id: str) -> _Usage | Exception:
        try:
            return self._stats_usage(container_id)
        except _STATS_ERRORS as exc:
            return exc

    def _stats_usage(self, container_id: str) -> _Usage:
        """One-shot stats; the counter is stamped with the engine's own reading time."""
        try:
            stats: dict[str, Any] = self._client.api.stats(
                container_id, stream=False, one_shot=True
            )
        except docker.errors.NotFound as exc:
            raise _Vanished from exc
        memory_stats = stats.get("memory_stats") or {}
        read = str(stats.get("read") or _NEVER_READ)
        if read == _NEVER_READ or "usage" not in memory_stats:
            raise _Vanished  # stopped: the engine has no cgroup to read any more
        at_s = datetime.fromisoformat(read).timestamp()
        usage_ns = int(((stats.get("cpu_stats") or {}).get("cpu_usage") or {})["total_usage"])
        return _Usage(CpuCounter(usage_ns, at_s), memory_used_from_stats(memory_stats))
