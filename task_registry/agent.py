"""The node agent (DESIGN 2, 4): the Task Registry's hands on one node.

* When one of our containers starts (Docker event), it gets the CPU shares of its task (Swarm
  services carry none) and, after a restart of the agent, whatever cut the registry records.
* A cut is applied live (CPU shares, memory and memory+swap together). Memory is never lowered
  below what the container uses plus a margin; the agent answers what it really applied, and
  the manager books that, so the books stay honest.
* A task the manager suspends is paused (``docker pause``: the cgroup freezer; its memory and
  place kept) and unpaused when it resumes (DESIGN 3.14); the reconciliation brings a
  container to what the registry books (paused or not) when a push did not reach the node.
* Every exit of our containers is reported (exit code, finished or failed, out of memory or
  not, and the service it belonged to), then the container and its anonymous volumes are
  removed. An exit that may be the OOM killer's waits a little for Docker's late ``oom`` event
  (task_registry/exits.py).
* It reports with its node's own credential and takes only the manager's word (DESIGN 9).
* The agent keeps no state of its own: on start and every ``reconcile_interval_s`` it rebuilds
  its view from the containers' labels and the registry, so a restart loses nothing.
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import docker
import docker.errors
import requests

from domain.credentials import own_credential
from domain.errors import ForbiddenError, GreenSwarmError, NotFoundError, UnavailableError
from domain.labels import DOCKER_API_VERSION, LABEL_CPU, LABEL_TASK
from domain.settings import load_settings, secret_setting
from monitor.cgroups import CgroupVersion, detect_version, dirs_from_proc_cgroup, read_memory
from monitor.core import memory_used_bytes, memory_used_from_stats
from task_registry.exits import DEFAULT_OOM_GRACE_S, ExitBook, ReportNow, WaitForOom
from web.client import HttpClient, HttpSettings
from web.edge import BodyLimits

log = logging.getLogger(__name__)
SERVICE_ID_LABEL = "com.docker.swarm.service.id"


@dataclass(frozen=True)
class AgentSettings:
    # Node identity (DESIGN 9, domain/credentials.py): the nodes' shared secret, from which the
    # agent derives its node's credential, or that credential itself; never the operator's
    # token. The agent takes only the manager's word derived from the credential.
    node_secret: str = field(default="", repr=False)
    node_credential: str = field(default="", repr=False)
    manager_url: str = "http://127.0.0.1:8080"
    docker_url: str = "unix:///var/run/docker.sock"
    listen_host: str = "0.0.0.0"
    listen_port: int = 8081
    node_id: str = ""  # default: the local engine's Swarm node id
    memory_margin_bytes: int = 16 * 2**20
    memory_margin_fraction: float = 0.10
    reconcile_interval_s: float = 10.0
    # an exit by SIGKILL with no out-of-memory notice yet is reported this long after the agent
    # first saw it, unless Docker's late oom event comes first (task_registry/exits.py)
    oom_grace_s: float = DEFAULT_OOM_GRACE_S
    cgroup_root: str = "/sys/fs/cgroup"
    proc_root: str = "/proc"
    max_body_bytes: int = BodyLimits.max_body_bytes  # bounds on request bodies (DESIGN 9)
    max_json_depth: int = BodyLimits.max_json_depth
    max_json_string_chars: int = BodyLimits.max_json_string_chars

    @property
    def body_limits(self) -> BodyLimits:
        return BodyLimits(self.max_body_bytes, self.max_json_depth, self.max_json_string_chars)

    @classmethod
    def from_env(cls, **overrides: object) -> AgentSettings:
        """GREENSWARM_AGENT_<FIELD>; the node secret (or credential) and the manager URL are
        shared with the monitor: GREENSWARM_NODE_SECRET, GREENSWARM_NODE_CREDENTIAL (or their
        _FILE), GREENSWARM_MANAGER_URL."""
        aliases = {"manager_url": "GREENSWARM_MANAGER_URL"}
        overrides = {"node_secret": secret_setting(os.environ, "GREENSWARM_NODE_SECRET"),
                     "node_credential": secret_setting(os.environ, "GREENSWARM_NODE_CREDENTIAL"),
                     **overrides}
        return load_settings(cls, os.environ, "GREENSWARM_AGENT_", overrides, aliases)


@dataclass(frozen=True)
class Desired:
    host: str
    cpu_shares: int
    memory: int
    suspended: bool = False  # paused on its host (DESIGN 3.14)


class ManagerLink:
    """The agent's calls to the registries (messages 6, 10, and reading a task), with its
    node's credential, through the one HTTP client (web/client.py): a connection never made is
    tried again at once (a manager restarting), a report is never sent twice (the next
    reconciliation reports what is still unreported)."""

    def __init__(self, base_url: str, credential: str, timeout_s: float = 5.0) -> None:
        self._http = HttpClient(base_url, "manager", bearer=credential, context="manager",
                                settings=HttpSettings(connect_timeout_s=timeout_s,
                                                      read_timeout_s=timeout_s))
        self.base_url = self._http.base_url

    def desired(self, task_id: str) -> Desired | None:
        body = self._call("GET", f"/registry/tasks/{task_id}")
        if body is None:
            return None
        return Desired(str(body["host"]), int(body["cpu_shares"]), int(body["memory"]),
                       bool(body.get("suspended", False)))

    def report_end(
        self, task_id: str, exit_code: int, service_id: str | None, oom: bool = False
    ) -> None:
        status = "finished" if exit_code == 0 and not oom else "failed"
        self._call(
            "POST",
            f"/registry/tasks/{task_id}/end",
            {"status": status, "exit_code": exit_code, "service_id": service_id, "oom": oom},
        )

    def report_resources(self, task_id: str, cpu_shares: int, memory: int) -> None:
        self._call(
            "PUT",
            f"/registry/tasks/{task_id}/resources",
            {"cpu_shares": cpu_shares, "memory": memory},
        )

    def _call(self, method: str, path: str,
              body: dict[str, Any] | None = None) -> dict[str, Any] | None:
        answer = self._http.answer(method, path, body)
        if answer.status == 404:
            return None  # no such task (any more): the callers treat it as "nothing booked"
        return answer.json_object()


class Agent:
    def __init__(self, settings: AgentSettings, link: ManagerLink | None = None) -> None:
        """``link``: the registries as this node's credential reaches them (by default at
        ``settings.manager_url``)."""
        self.settings = settings
        self.client = docker.DockerClient(base_url=settings.docker_url, version=DOCKER_API_VERSION)
        self.node_id = settings.node_id or self._swarm_node_id()
        self.credential = own_credential(self.node_id, settings.node_secret,
                                         settings.node_credential)
        self.link = link or ManagerLink(settings.manager_url, self.credential)
        self._cgroup_root = Path(settings.cgroup_root)
        self._cgroup_version = detect_version(self._cgroup_root)
        self._lock = threading.Lock()  # one change at a time per node
        self._exits = ExitBook(settings.oom_grace_s)
        self._exits_lock = threading.Lock()  # one exit report at a time, each reported once
        self._rechecks: set[str] = set()  # containers with a look-again timer running
        self._stop = threading.Event()
        self._events: Any = None

    def _swarm_node_id(self) -> str:
        try:
            node_id = self.client.info().get("Swarm", {}).get("NodeID") or ""
        except docker.errors.DockerException as exc:
            raise UnavailableError(f"the local Docker engine is unreachable: {exc}") from exc
        if not node_id:
            raise UnavailableError("the local engine is not in a Swarm; give --node-id")
        return str(node_id)

    # -- containers -------------------------------------------------------------------------

    def containers(self, *, include_exited: bool = False) -> list[Any]:
        filters = {"label": LABEL_TASK}
        if not include_exited:
            filters["status"] = "running"
        try:  # one removed between docker-py's list and its inspection is simply gone
            return list(self.client.containers.list(all=include_exited, filters=filters,
                                                    ignore_removed=True))
        except docker.errors.DockerException as exc:
            raise UnavailableError(f"cannot list containers: {exc}") from exc

    def _running(self, task_id: str) -> Any:
        for container in self.containers():
            if container.labels.get(LABEL_TASK) == task_id:
                return container
        raise NotFoundError(f"no running container of task {task_id!r} on this node")

    def describe(self) -> list[dict[str, Any]]:
        out = []
        for container in self.containers(include_exited=True):
            host_config = container.attrs.get("HostConfig", {})
            out.append(
                {
                    "task": container.labels.get(LABEL_TASK),
                    "container": container.id,
                    "status": container.status,
                    "cpu_shares": host_config.get("CpuShares", 0),
                    "memory": host_config.get("Memory", 0),
                    "service_id": container.labels.get(SERVICE_ID_LABEL),
                }
            )
        return out

    # -- cuts -------------------------------------------------------------------------------

    def apply(self, task_id: str, cpu_shares: int, memory: int) -> tuple[int, int]:
        """Set a task's resources live; returns what was applied (memory may stay higher)."""
        with self._lock:
            return self._apply(self._running(task_id), cpu_shares, memory)

    def _apply(self, container: Any, cpu_shares: int, memory: int) -> tuple[int, int]:
        container.reload()
        host_config = container.attrs.get("HostConfig", {})
        current_cpu = int(host_config.get("CpuShares") or 0)
        current_memory = int(host_config.get("Memory") or 0)
        target_memory = memory
        if current_memory and memory < current_memory:
            floor = self._memory_floor(container)
            target_memory = min(current_memory, max(memory, floor))
            if target_memory > memory:
                log.info(
                    "task %s uses %d bytes: memory cut to %d instead of %d",
                    container.labels.get(LABEL_TASK),
                    floor,
                    target_memory,
                    memory,
                )
        changes: dict[str, int] = {}
        if cpu_shares != current_cpu:
            changes["cpu_shares"] = cpu_shares
        if target_memory != current_memory:
            changes["mem_limit"] = target_memory
            changes["memswap_limit"] = target_memory
        if changes:
            try:
                container.update(**changes)
            except docker.errors.APIError as exc:
                if "mem_limit" not in changes:
                    raise UnavailableError(f"cannot update {container.id[:12]}: {exc}") from exc
                log.warning("memory update of %s refused (%s); CPU only", container.id[:12], exc)
                container.update(cpu_shares=cpu_shares)
                target_memory = current_memory
        return cpu_shares, target_memory

    def _memory_floor(self, container: Any) -> int:
        used = self._memory_used(container)
        margin = max(
            self.settings.memory_margin_bytes, int(used * self.settings.memory_margin_fraction)
        )
        return used + margin

    def _memory_used(self, container: Any) -> int:
        """Memory in use without page cache, from the cgroup files, else the stats API."""
        pid = int(container.attrs.get("State", {}).get("Pid") or 0)
        if pid and self._cgroup_version is not CgroupVersion.NONE:
            with contextlib.suppress(OSError, ValueError, KeyError):
                text = (Path(self.settings.proc_root) / str(pid) / "cgroup").read_text()
                dirs = dirs_from_proc_cgroup(text, self._cgroup_root, self._cgroup_version)
                if dirs is not None:
                    reading = read_memory(dirs)
                    return memory_used_bytes(reading.usage_bytes, reading.cache_bytes)
        stats = container.stats(stream=False)
        return memory_used_from_stats(stats.get("memory_stats") or {})

    # -- pauses (DESIGN 3.14) ---------------------------------------------------------------

    def pause(self, task_id: str) -> bool:
        """Pause the task's container (``docker pause``); True once it is paused (one paused
        already stays so: a push repeated by the manager changes nothing)."""
        with self._lock:
            return self._set_paused(self._live(task_id), paused=True)

    def unpause(self, task_id: str) -> bool:
        """Unpause the task's container (``docker unpause``); False once it runs."""
        with self._lock:
            return self._set_paused(self._live(task_id), paused=False)

    def _live(self, task_id: str) -> Any:
        """The task's container that runs or is paused (404 when the node has none)."""
        try:
            found = self.client.containers.list(filters={
                "label": f"{LABEL_TASK}={task_id}", "status": ["running", "paused"]},
                ignore_removed=True)
        except docker.errors.DockerException as exc:
            raise UnavailableError(f"cannot list containers: {exc}") from exc
        if not found:
            raise NotFoundError(f"no running or paused container of task {task_id!r} on "
                                "this node")
        return found[0]

    @staticmethod
    def _set_paused(container: Any, *, paused: bool) -> bool:
        """``container`` paused or running as asked; what it is now."""
        try:
            container.reload()
            if paused and container.status == "running":
                container.pause()
            elif not paused and container.status == "paused":
                container.unpause()
            else:
                return bool(container.status == "paused")
        except docker.errors.NotFound as exc:
            raise NotFoundError(f"container {container.id[:12]} is gone") from exc
        except docker.errors.DockerException as exc:
            what = "pause" if paused else "unpause"
            raise UnavailableError(f"cannot {what} {container.id[:12]}: {exc}") from exc
        log.info("task %s %s", container.labels.get(LABEL_TASK),
                 "paused" if paused else "running again")
        return paused

    # -- kills and exits --------------------------------------------------------------------

    def _exited(self, container: Any) -> None:
        """Report one exited container of ours, then remove it and its anonymous volumes; an
        exit that may still get its out-of-memory notice is looked at again later."""
        with self._exits_lock:
            try:
                container.reload()  # its state now; gone: reported and removed meanwhile
            except docker.errors.NotFound:
                return
            if container.status not in ("exited", "dead"):
                return
            state = container.attrs.get("State", {})
            verdict = self._exits.decide(container.id, int(state.get("ExitCode", -1)),
                                         bool(state.get("OOMKilled", False)), time.monotonic())
            if isinstance(verdict, WaitForOom):
                self._look_again(container.id, verdict.wait_s)
                return
            self._report_exit(container, verdict)

    def _report_exit(self, container: Any, verdict: ReportNow) -> None:
        task_id = container.labels.get(LABEL_TASK)
        try:
            self.link.report_end(task_id, verdict.exit_code,
                                 container.labels.get(SERVICE_ID_LABEL), verdict.oom)
        except ForbiddenError as exc:  # the task is booked on another node now
            if self._booked_here(task_id):
                log.warning("the exit of %s was refused (%s); will retry", task_id, exc)
                return
            log.info("the exit of %s is no longer this node's to report (%s)", task_id, exc)
        except GreenSwarmError as exc:  # unreachable, or refused (a body it rejects)
            log.warning("could not report the exit of %s (%s); will retry", task_id, exc)
            return  # keep the container: the next reconciliation reports it
        self._exits.reported(container.id)
        with contextlib.suppress(docker.errors.NotFound, docker.errors.APIError):
            container.remove(v=True)
        log.info("task %s exited with code %d%s; container removed", task_id,
                 verdict.exit_code, " (out of memory)" if verdict.oom else "")

    def _booked_here(self, task_id: str) -> bool:
        """Whether the registry books ``task_id`` on this node (yes when it cannot say)."""
        try:
            desired = self.link.desired(task_id)
        except GreenSwarmError:
            return True
        return desired is not None and desired.host == self.node_id

    def _look_again(self, container_id: str, wait_s: float) -> None:
        """One timer per container (called with the exits lock held)."""
        if container_id in self._rechecks:
            return
        self._rechecks.add(container_id)
        timer = threading.Timer(wait_s, self._looked_again, (container_id,))
        timer.daemon = True
        timer.start()

    def _looked_again(self, container_id: str) -> None:
        with self._exits_lock:
            self._rechecks.discard(container_id)
        try:
            self._exited(self.client.containers.get(container_id))
        except docker.errors.NotFound:
            return
        except (docker.errors.DockerException, requests.RequestException, UnavailableError) as exc:
            log.warning("exit of %s not handled now (%s); the timer retries", container_id[:12],
                        exc)

    # -- reconciliation ---------------------------------------------------------------------

    def converge(self) -> None:
        """Exited containers reported and removed; running ones set to the booked resources."""
        for container in self.containers(include_exited=True):
            if container.status in ("exited", "dead"):
                self._exited(container)
            elif container.status == "running":
                self._converge_running(container)
            elif container.status == "paused":
                self._converge_paused(container)

    def _desired(self, task_id: str) -> Desired | None:
        """What the registry books for ``task_id``; None when it cannot say (or has none)."""
        try:
            return self.link.desired(task_id)
        except UnavailableError as exc:
            log.debug("registry unreachable (%s): using the labels of %s", exc, task_id)
        except GreenSwarmError as exc:  # the manager refused to answer: not transient, say so
            log.warning("the registry refused task %s (%s): using its labels", task_id, exc)
        return None

    def _converge_paused(self, container: Any) -> None:
        """A paused container whose task the registry books here as running again (its resume
        did not reach the node) is unpaused and given its resources; one the registry cannot
        speak for stays paused."""
        if self._bring_to_booking(container, paused=False):
            self._converge_running(container)

    def _bring_to_booking(self, container: Any, *, paused: bool) -> bool:
        """Pause (``paused``) or unpause ``container`` when the registry books its task here
        that way, read again under the node's lock: a push of the manager that changed the
        booking meanwhile is applied after this, never undone by it. Whether it changed."""
        task_id = container.labels.get(LABEL_TASK)
        with self._lock:
            desired = self._desired(task_id)
            if desired is None or desired.host != self.node_id or desired.suspended != paused:
                return False
            self._set_paused(container, paused=paused)
            return True

    def _converge_running(self, container: Any) -> None:
        task_id = container.labels.get(LABEL_TASK)
        desired = self._desired(task_id)
        if desired is not None and desired.host != self.node_id:
            return  # booked elsewhere: a stale container on its way out
        if desired is not None and desired.suspended:  # its pause did not reach the node
            self._bring_to_booking(container, paused=True)
            return
        cpu = desired.cpu_shares if desired else int(container.labels.get(LABEL_CPU, "0") or 0)
        if cpu < 2:
            return
        with self._lock:
            memory = (
                desired.memory
                if desired
                else int(container.attrs.get("HostConfig", {}).get("Memory") or 0)
            )
            applied_cpu, applied_memory = self._apply(container, cpu, memory or 0)
        if desired and (applied_cpu, applied_memory) != (desired.cpu_shares, desired.memory):
            try:
                self.link.report_resources(task_id, applied_cpu, applied_memory)
            except UnavailableError:
                pass  # the next reconciliation finds the difference and reports it again
            except GreenSwarmError as exc:
                log.warning("the registry refused what %s really has (%s)", task_id, exc)

    def run(self) -> None:
        """Reconcile now and on a timer; follow Docker events until ``stop``."""
        with contextlib.suppress(UnavailableError):
            self.converge()
        threading.Thread(target=self._timer, name="agent-reconcile", daemon=True).start()
        backoff_s = 1.0
        while not self._stop.is_set():
            try:
                self._follow_events()
                backoff_s = 1.0
            except (docker.errors.DockerException, requests.RequestException, OSError) as exc:
                if self._stop.is_set():
                    return
                log.warning(
                    "Docker events stream lost (%s); reconnecting in %.0f s", exc, backoff_s
                )
                self._stop.wait(backoff_s)
                backoff_s = min(backoff_s * 2, 30.0)

    def _timer(self) -> None:
        while not self._stop.wait(self.settings.reconcile_interval_s):
            try:
                self.converge()
            except UnavailableError as exc:
                log.warning("reconciliation failed: %s", exc)

    def _follow_events(self) -> None:
        self._events = self.client.events(
            decode=True, filters={"type": "container", "label": LABEL_TASK}
        )
        for event in self._events:
            if self._stop.is_set():
                return
            self.handle_event(event)

    def handle_event(self, event: dict[str, Any]) -> None:
        """One Docker event of our containers: a start sets its resources, a die reports the
        exit; an oom is remembered for the exit it belongs to, which may already be waiting
        for it (the kernel's notice can reach Docker after the exit)."""
        action = event.get("Action") or event.get("status")
        container_id = str(event.get("id") or "")
        if action == "oom":
            with self._exits_lock:
                self._exits.oom_seen(container_id, time.monotonic())
        elif action not in ("start", "die"):
            return
        try:
            container = self.client.containers.get(container_id)
        except docker.errors.NotFound:
            return
        try:
            if action == "start":
                self._converge_running(container)
            elif container.status in ("exited", "dead"):
                self._exited(container)
        except UnavailableError as exc:
            log.warning("event %s of %s not handled now (%s); the timer retries", action,
                        container_id[:12], exc)

    def stop(self) -> None:
        self._stop.set()
        if self._events is not None:
            with contextlib.suppress(Exception):
                self._events.close()

