"""The Swarm backend (DESIGN 4): nodes in, pinned one-replica services out, via the Docker SDK.

Every placed request becomes a replicated service with one replica, pinned with
``node.id==<id>``, a memory limit equal to its allocation and no reservations (so Swarm's own
resource filter never second-guesses an overbooked placement), restart condition ``none`` for
jobs, and labels that carry the request. Docker's errors become the project's errors here.
"""

from __future__ import annotations

import contextlib
import copy
import json
import logging
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any

import docker
import docker.errors
from docker.types import (
    EndpointSpec,
    Mount,
    Resources,
    RestartPolicy,
    RollbackConfig,
    ServiceMode,
    UpdateConfig,
)

from domain.constraints import NodeFacts
from domain.errors import NotFoundError, UnavailableError, ValidationError
from domain.labels import (
    CAPACITY_CPU_LABEL,
    CAPACITY_MEMORY_LABEL,
    DOCKER_API_VERSION,
    LABEL_CLASS,
    LABEL_CPU,
    LABEL_MEMORY,
    LABEL_SPEC,
    LABEL_TASK,
    LABEL_TYPE,
)
from manager.checkpoints import MOUNT_TARGET, job_env

log = logging.getLogger(__name__)


class NodeAvailability(StrEnum):
    """A Swarm node's availability, as Swarm defines it (DESIGN 4)."""

    ACTIVE = "active"  # takes new tasks
    PAUSE = "pause"  # keeps its tasks running, takes no new ones
    DRAIN = "drain"  # its tasks move away: a lost host


class TaskState(StrEnum):
    """The states of a Swarm task that matter to us."""

    PENDING = "pending"  # not started yet (new ... starting)
    RUNNING = "running"
    COMPLETE = "complete"
    FAILED = "failed"  # failed, or gone (orphaned, removed)
    REJECTED = "rejected"  # Swarm refused its container (no such image, memory below 6 MiB)
    SHUTDOWN = "shutdown"


_FAILED_STATES = {"failed", "orphaned", "remove"}


@contextlib.contextmanager
def docker_errors(what: str) -> Iterator[None]:
    try:
        yield
    except docker.errors.NotFound as exc:
        raise NotFoundError(f"{what}: {exc.explanation or exc}") from exc
    except docker.errors.APIError as exc:
        if exc.status_code is not None and 400 <= exc.status_code < 500:
            raise ValidationError("request", f"{what}: {exc.explanation or exc}") from exc
        raise UnavailableError(f"{what}: {exc.explanation or exc}") from exc
    except docker.errors.DockerException as exc:
        raise UnavailableError(f"{what}: {exc}") from exc
    except OSError as exc:
        raise UnavailableError(f"{what}: the Docker engine is unreachable ({exc})") from exc


@dataclass(frozen=True)
class NodeInfo:
    id: str
    hostname: str
    address: str
    cpu_shares: int
    memory_bytes: int
    labels: Mapping[str, str]
    availability: NodeAvailability = NodeAvailability.ACTIVE
    role: str = "worker"
    os: str = "linux"
    arch: str = "x86_64"
    engine_labels: Mapping[str, str] = field(default_factory=dict)
    ready: bool = True  # Swarm's status: False for a node that is Down (or unknown)

    def facts(self) -> NodeFacts:
        """What placement constraints can ask about this node (DESIGN 4)."""
        return NodeFacts(self.id, self.hostname, self.role, self.os, self.arch,
                         tuple(sorted(self.labels.items())),
                         tuple(sorted(self.engine_labels.items())))


@dataclass(frozen=True)
class ServiceInfo:
    id: str
    name: str
    task_id: str  # our request id
    state: TaskState
    node_id: str | None
    exit_code: int | None
    message: str
    running_since: float | None = None  # RUNNING: when Swarm saw its container run (epoch s)
    # the service's last update as Swarm reports it (UpdateStatus.State: "updating",
    # "completed", "rollback_completed", ...; None: never updated)
    update_state: str | None = None


@dataclass(frozen=True)
class Placement:
    """What to create: the request's spec, where (None: let Swarm decide), with what."""

    task_id: str
    spec: Mapping[str, Any]
    node_id: str | None
    cpu_shares: int
    memory: int
    reserve: bool = False  # the 'swarm' policy: reservations = request, Swarm places
    constraints: tuple[str, ...] = ()  # extra Swarm constraints (the 'swarm' policy)
    # a checkpointing job's directory (DESIGN 3.14, manager/checkpoints.py), mounted at
    # /checkpoint, its place and interval in its environment
    checkpoint_dir: str | None = None


class SwarmBackend:
    def __init__(self, base_url: str, service_prefix: str = "gs-") -> None:
        self.client = docker.DockerClient(base_url=base_url, version=DOCKER_API_VERSION, timeout=30)
        self.prefix = service_prefix

    def service_name(self, task_id: str) -> str:
        return f"{self.prefix}{task_id}"

    def ping(self) -> bool:
        with docker_errors("ping"):
            return bool(self.client.ping())

    # -- nodes ------------------------------------------------------------------------------

    def nodes(self, label: str = "", only: frozenset[str] = frozenset(),
              include_down: bool = False) -> list[NodeInfo]:
        """Ready nodes, whatever their availability (optionally only those with ``label`` or
        in ``only``); a node of unknown availability is left out. With ``include_down``, the
        nodes that are not Ready too (``ready`` False): those that are Down now."""
        with docker_errors("list nodes"):
            raw_nodes = [node.attrs for node in self.client.nodes.list()]
        found = []
        for attrs in raw_nodes:
            spec, status, desc = (
                attrs.get("Spec", {}),
                attrs.get("Status", {}),
                attrs.get("Description", {}),
            )
            ready = status.get("State") == "ready"
            if not ready and not include_down:
                continue
            try:
                availability = NodeAvailability(spec.get("Availability"))
            except ValueError:
                continue
            labels: dict[str, str] = spec.get("Labels") or {}
            hostname = desc.get("Hostname", "")
            if label and label not in labels:
                continue
            if only and attrs["ID"] not in only and hostname not in only:
                continue
            resources = desc.get("Resources", {})
            cpu = _int_label(labels, CAPACITY_CPU_LABEL) or int(
                resources.get("NanoCPUs", 0) * 1024 // 10**9
            )
            memory = _int_label(labels, CAPACITY_MEMORY_LABEL) or int(
                resources.get("MemoryBytes", 0)
            )
            if cpu < 2 or memory < 1:
                log.warning("node %s reports no capacity; skipped", attrs["ID"])
                continue
            platform = desc.get("Platform", {}) or {}
            found.append(
                NodeInfo(attrs["ID"], hostname, status.get("Addr", ""), cpu, memory, labels,
                         availability, str(spec.get("Role", "worker")),
                         str(platform.get("OS", "")), str(platform.get("Architecture", "")),
                         (desc.get("Engine", {}) or {}).get("Labels") or {}, ready)
            )
        return found

    # -- services ---------------------------------------------------------------------------

    def create(self, placement: Placement) -> str:
        spec = placement.spec
        is_job = spec["type"] == "job"
        container_labels = {
            LABEL_TASK: placement.task_id,
            LABEL_CLASS: str(spec["class"]),
            LABEL_TYPE: str(spec["type"]),
            LABEL_CPU: str(placement.cpu_shares),
            LABEL_MEMORY: str(placement.memory),
        }
        labels = {
            **container_labels,
            LABEL_SPEC: json.dumps(spec, sort_keys=True),
        }
        if placement.reserve:
            resources = Resources(
                cpu_reservation=placement.cpu_shares * 10**9 // 1024,
                mem_reservation=placement.memory,
                mem_limit=placement.memory,
            )
        else:
            resources = Resources(mem_limit=placement.memory)
        ports = {
            int(p["published"]): (int(p["target"]), p.get("protocol", "tcp"), "host")
            for p in spec.get("ports", [])
        }
        command = spec.get("command")
        env = dict(spec.get("env", {}))
        mounts = [Mount(target=m, source=None, type="volume") for m in spec.get("volumes", [])]
        if placement.checkpoint_dir is not None:
            env = {**job_env(spec), **env}
            mounts.append(Mount(target=MOUNT_TARGET, source=placement.checkpoint_dir,
                                type="bind"))
        with docker_errors(f"create service for {placement.task_id}"):
            service = self.client.services.create(
                image=spec["image"],
                args=command if command else None,
                name=self.service_name(placement.task_id),
                env=[f"{k}={v}" for k, v in sorted(env.items())],
                labels=labels,
                container_labels=container_labels,
                constraints=[
                    *([f"node.id=={placement.node_id}"] if placement.node_id else []),
                    *placement.constraints,
                ]
                or None,
                resources=resources,
                restart_policy=RestartPolicy(condition="none" if is_job else "any"),
                mode=ServiceMode("replicated", replicas=1),
                endpoint_spec=EndpointSpec(mode="dnsrr", ports=ports or None),
                mounts=mounts or None,
            )
        return str(service.id)

    def move(self, task_id: str, node_id: str) -> None:
        """Pin the service of ``task_id`` to ``node_id``, make-before-break (DESIGN 3.15): a
        service update with the new ``node.id`` constraint and the update order
        ``start-first``, so the new container runs before the old one stops; an update that
        fails rolls back (start-first too), leaving the old container where it was. The rest of
        the task template (image, command, env, resources, other constraints) is the service's
        own: the current spec is read and only its placement changed."""
        with docker_errors(f"move service of {task_id}"):
            service = self.client.services.get(self.service_name(task_id))
            template = copy.deepcopy(service.attrs["Spec"]["TaskTemplate"])
            placement = template.setdefault("Placement", {})
            kept = [c for c in placement.get("Constraints") or []
                    if not c.replace(" ", "").startswith("node.id==")]
            placement["Constraints"] = [f"node.id=={node_id}", *kept]
            self.client.api.update_service(
                service.id, service.version, task_template=template,
                update_config=UpdateConfig(order="start-first", failure_action="rollback"),
                rollback_config=RollbackConfig(order="start-first"),
                fetch_current_spec=True)

    def remove(self, task_id: str) -> bool:
        """Remove the service of ``task_id``; False when there was none."""
        try:
            with docker_errors(f"remove service of {task_id}"):
                self.client.services.get(self.service_name(task_id)).remove()
        except NotFoundError:
            return False
        return True

    def services(self) -> list[ServiceInfo]:
        """Our services, each with the state of its newest task (two Docker calls in all)."""
        with docker_errors("list services"):
            services = [s for s in self.client.services.list(filters={"label": LABEL_TASK})
                        if s.name.startswith(self.prefix)]
            tasks = self.tasks_by_service([s.id for s in services])
        found = [self._describe(s.attrs, tasks.get(s.id, [])) for s in services]
        return [info for info in found if info is not None]

    def tasks_by_service(self, service_ids: list[str]) -> dict[str, list[dict[str, Any]]]:
        """The Swarm tasks of these services, by service id (only theirs, not every stack's).
        The engine refuses the whole filter when one of them was removed meanwhile: then every
        task is listed and the others are left out here."""
        if not service_ids:
            return {}
        try:
            listed = self.client.api.tasks(filters={"service": service_ids})
        except docker.errors.NotFound:
            listed = self.client.api.tasks()
        wanted = set(service_ids)
        tasks: dict[str, list[dict[str, Any]]] = {}
        for task in listed:
            service_id = str(task.get("ServiceID", ""))
            if service_id in wanted:
                tasks.setdefault(service_id, []).append(task)
        return tasks

    @staticmethod
    def _describe(attrs: Mapping[str, Any], tasks: list[dict[str, Any]]) -> ServiceInfo | None:
        labels = attrs.get("Spec", {}).get("Labels", {}) or {}
        task_id = labels.get(LABEL_TASK)
        if not task_id:
            return None
        newest = _newest_said(tasks)
        state, node_id, exit_code, message = TaskState.PENDING, None, None, ""
        running_since = None
        if newest is not None:
            status = newest.get("Status", {})
            state = _task_state(status.get("State", ""))
            node_id = newest.get("NodeID")
            exit_code = status.get("ContainerStatus", {}).get("ExitCode")
            message = status.get("Err") or status.get("Message", "")
            if state is TaskState.RUNNING:
                running_since = swarm_time(status.get("Timestamp"))
        update = attrs.get("UpdateStatus") or {}
        return ServiceInfo(
            attrs["ID"], attrs["Spec"]["Name"], task_id, state, node_id, exit_code, message,
            running_since, update.get("State") or None,
        )

    def close(self) -> None:
        self.client.close()


def _newest_said(tasks: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The task whose state stands for the service: the newest, except that a new task Swarm
    made right after it refused the last one's container (``rejected``: no such image, memory
    below the floor) stands for that refusal. Swarm replaces a refused task within a second,
    so the newest is nearly always the pending replacement and a refusal read from it alone
    would be seen only by chance.

    Newest is created last (``CreatedAt``), not changed last (``Version.Index``, bumped at
    every change of a task): after a start-first update (a consolidation move, DESIGN 3.15) the
    old task is shut down after the new one runs, so it is the one changed last."""
    ordered = sorted(tasks, key=_created_order, reverse=True)
    if not ordered:
        return None
    newest = ordered[0]
    if (len(ordered) > 1 and _task_state(newest.get("Status", {}).get("State", ""))
            is TaskState.PENDING
            and _task_state(ordered[1].get("Status", {}).get("State", "")) is TaskState.REJECTED):
        return ordered[1]
    return newest


def _created_order(task: Mapping[str, Any]) -> tuple[float, int]:
    """A task's place in creation order: ``CreatedAt``, then its version (a task without a
    readable creation time sorts by its version alone, as before)."""
    created = swarm_time(task.get("CreatedAt"))
    return (0.0 if created is None else created, int(task.get("Version", {}).get("Index", 0)))


def swarm_time(raw: object) -> float | None:
    """A Swarm timestamp ("2026-11-26T19:20:31.123456789Z", nanoseconds and all) in epoch
    seconds; None when absent or unreadable."""
    if not isinstance(raw, str) or not raw:
        return None
    text = raw.strip()
    if text.endswith("Z"):
        text = text[:-1] + "+00:00"
    head, dot, rest = text.partition(".")
    if dot:  # at most microseconds for datetime: cut the fraction, keep the offset
        digits = len(rest) - len(rest.lstrip("0123456789"))
        text = head + "." + rest[:min(digits, 6)] + rest[digits:]
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        return None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment.timestamp()


def _task_state(raw: str) -> TaskState:
    if raw == "running":
        return TaskState.RUNNING
    if raw == "rejected":
        return TaskState.REJECTED
    if raw == "complete":
        return TaskState.COMPLETE
    if raw in _FAILED_STATES:
        return TaskState.FAILED
    if raw == "shutdown":
        return TaskState.SHUTDOWN
    return TaskState.PENDING


def _int_label(labels: Mapping[str, str], key: str) -> int:
    try:
        return int(labels.get(key, "0"))
    except ValueError:
        log.warning("label %s=%r is not an integer; ignored", key, labels.get(key))
        return 0
