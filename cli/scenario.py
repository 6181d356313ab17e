"""Scenarios for ``greenswarm decide``: hosts with their tasks, and one request.

A scenario is ``{"hosts": [...], "request": {...}}`` (see the README for the fields). Region and
class of a host are always derived from its utilization and tasks, never read. Every error
names the field by its path, e.g. ``hosts[1].tasks[0].class``.

For the load-aware policies (DESIGN 3.12) a scenario may also date things, in seconds on any
one clock: ``now`` (default: the latest time given, else 0), a host's ``measured_at`` (default:
``now``) and ``windows`` (as the registry's load watcher gives them), and a task's
``started_at`` (default 0). A task started after its host's ``measured_at`` is one the
measurement cannot see yet.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

from domain.classes import ClassTable, check_class
from domain.constraints import NodeFacts, check_constraints
from domain.errors import ValidationError
from domain.load import LoadWindows
from domain.model import (
    MIN_CPU_SHARES,
    HostSpec,
    Request,
    Task,
    check_fraction_of_one,
    check_int,
    check_labels,
    check_task_type,
)
from domain.regions import RegionBounds
from domain.store import ClusterStore
from host_registry.memory import MemoryStore
from scheduler.load import RecentPlacements

HOST_FIELDS = {"id", "cpu_capacity", "memory_capacity", "cpu_util", "memory_util", "tasks",
               "measured_at", "windows", "hostname", "labels", "role", "platform"}
TASK_FIELDS = {
    "id",
    "class",
    "type",
    "cpu_shares",
    "memory",
    "original_cpu_shares",
    "original_memory",
    "cut_received",
    "cpu_util",
    "memory_util",
    "started_at",
}
REQUEST_FIELDS = {"id", "class", "type", "cpu_shares", "memory", "constraints"}


@dataclass(frozen=True)
class Scenario:
    store: ClusterStore
    request: Request
    now: float = 0.0
    recent: RecentPlacements = field(default_factory=RecentPlacements)
    facts: dict[str, NodeFacts] = field(default_factory=dict)  # for placement constraints


def _object(value: object, path: str, allowed: set[str]) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise ValidationError(path or "scenario", "must be a JSON object")
    unknown = sorted(set(value) - allowed)
    if unknown:
        raise ValidationError(f"{path}.{unknown[0]}" if path else unknown[0], "unknown field")
    return value


def _required(obj: dict[str, Any], key: str, path: str) -> object:
    if key not in obj:
        raise ValidationError(f"{path}.{key}" if path else key, "is required")
    return obj[key]


def _text(value: object, path: str) -> str:
    if not isinstance(value, str) or not value:
        raise ValidationError(path, "must be a non-empty string")
    return value


def parse_fraction(value: object, path: str) -> Fraction:
    """A cut as a number (0.1666…) or an exact string ("1/6"), in [0, 1)."""
    try:
        if isinstance(value, bool):
            raise TypeError
        if isinstance(value, int | float):
            result = Fraction(str(value)).limit_denominator(10_000)
        elif isinstance(value, str):
            result = Fraction(value)
        else:
            raise TypeError
    except (TypeError, ValueError, ZeroDivisionError):
        raise ValidationError(path, "must be a number or a fraction such as '1/6'") from None
    if not 0 <= result < 1:
        raise ValidationError(path, "must be in [0, 1)")
    return result


def parse_request(value: object, path: str = "request") -> Request:
    obj = _object(value, path, REQUEST_FIELDS)
    return Request(
        id=_text(_required(obj, "id", path), f"{path}.id"),
        cls=check_class(_required(obj, "class", path), f"{path}.class"),
        type=check_task_type(_required(obj, "type", path), f"{path}.type"),
        cpu_shares=check_int(
            _required(obj, "cpu_shares", path), f"{path}.cpu_shares", MIN_CPU_SHARES
        ),
        memory=check_int(_required(obj, "memory", path), f"{path}.memory", 1),
        constraints=check_constraints(obj.get("constraints"), f"{path}.constraints"),
    )


def _task(value: object, path: str, host_id: str) -> Task:
    obj = _object(value, path, TASK_FIELDS)
    cpu = check_int(_required(obj, "cpu_shares", path), f"{path}.cpu_shares", 1)
    memory = check_int(_required(obj, "memory", path), f"{path}.memory", 1)
    original_cpu = check_int(
        obj.get("original_cpu_shares", cpu), f"{path}.original_cpu_shares", cpu
    )
    original_memory = check_int(
        obj.get("original_memory", memory), f"{path}.original_memory", memory
    )
    return Task(
        id=_text(_required(obj, "id", path), f"{path}.id"),
        host=host_id,
        cls=check_class(_required(obj, "class", path), f"{path}.class"),
        type=check_task_type(_required(obj, "type", path), f"{path}.type"),
        cpu_shares=cpu,
        memory=memory,
        original_cpu_shares=original_cpu,
        original_memory=original_memory,
        cut_received=parse_fraction(obj.get("cut_received", 0), f"{path}.cut_received"),
        cpu_util=check_fraction_of_one(obj.get("cpu_util", 0.0), f"{path}.cpu_util"),
        memory_util=check_fraction_of_one(obj.get("memory_util", 0.0), f"{path}.memory_util"),
        started_at=_seconds(obj.get("started_at", 0.0), f"{path}.started_at"),
    )


def _seconds(value: object, path: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise ValidationError(path, "must be a number of seconds")
    if value < 0:
        raise ValidationError(path, "must not be negative")
    return float(value)


def _latest_time(hosts: list[Any]) -> float:
    """The default ``now``: the latest ``measured_at`` or ``started_at`` given, else 0."""
    latest = 0.0
    for index, host in enumerate(hosts):
        if not isinstance(host, dict):
            continue
        if "measured_at" in host:
            latest = max(latest, _seconds(host["measured_at"], f"hosts[{index}].measured_at"))
        tasks = host.get("tasks", [])
        for task_index, task in enumerate(tasks if isinstance(tasks, list) else []):
            if isinstance(task, dict) and "started_at" in task:
                path = f"hosts[{index}].tasks[{task_index}].started_at"
                latest = max(latest, _seconds(task["started_at"], path))
    return latest


def load_scenario(
    value: object,
    classes: ClassTable | None = None,
    bounds: RegionBounds | None = None,
    store: ClusterStore | None = None,
) -> Scenario:
    """Load the scenario's hosts and tasks, exactly as given, into ``store`` (by default a new
    in-memory store). Everything is validated before the store is touched."""
    obj = _object(value, "", {"hosts", "request", "now"})
    hosts = _required(obj, "hosts", "")
    if not isinstance(hosts, list):
        raise ValidationError("hosts", "must be a list")
    now = _seconds(obj["now"], "now") if "now" in obj else _latest_time(hosts)
    staging = MemoryStore(classes, bounds)  # validation pass: nothing half-loaded on an error
    recent = _load(hosts, staging, now)
    facts = {host["id"]: _facts(host, f"hosts[{index}]") for index, host in enumerate(hosts)}
    request = parse_request(_required(obj, "request", ""))
    if staging.task(request.id) is not None:
        raise ValidationError("request.id", f"a task {request.id!r} already runs")
    if store is None:
        return Scenario(staging, request, now, recent, facts)
    _load(hosts, store, now)
    return Scenario(store, request, now, recent, facts)


def _facts(host: dict[str, Any], path: str) -> NodeFacts:
    """What constraints see of a scenario's host: ``hostname`` (default its id), ``labels``,
    ``role`` (worker) and ``platform`` ``{"os", "arch"}`` (linux, x86_64)."""
    platform = host.get("platform", {})
    if not isinstance(platform, dict) or set(platform) - {"os", "arch"}:
        raise ValidationError(f"{path}.platform", "must be an object with os and arch")
    texts = {"hostname": host.get("hostname", host["id"]), "role": host.get("role", "worker"),
             "platform.os": platform.get("os", "linux"),
             "platform.arch": platform.get("arch", "x86_64")}
    for name, value in texts.items():
        if not isinstance(value, str) or not value:
            raise ValidationError(f"{path}.{name}", "must be a non-empty string")
    return NodeFacts(host["id"], texts["hostname"], texts["role"], texts["platform.os"],
                     texts["platform.arch"],
                     check_labels(host.get("labels", {}), f"{path}.labels"))


def _load(hosts: list[Any], store: ClusterStore, now: float) -> RecentPlacements:
    """Load the hosts; the tasks started after their host's measurement, as recent."""
    recent = RecentPlacements(horizon_s=math.inf)
    placed: list[tuple[float, str, str]] = []
    seen_tasks: set[str] = set()
    seen_hosts: set[str] = set()
    for index, raw in enumerate(hosts):
        path = f"hosts[{index}]"
        host = _object(raw, path, HOST_FIELDS)
        spec = HostSpec(
            id=_text(_required(host, "id", path), f"{path}.id"),
            cpu_capacity=check_int(
                _required(host, "cpu_capacity", path), f"{path}.cpu_capacity", MIN_CPU_SHARES
            ),
            memory_capacity=check_int(
                _required(host, "memory_capacity", path), f"{path}.memory_capacity", 1
            ),
        )
        if spec.id in seen_hosts:
            raise ValidationError(f"{path}.id", f"host {spec.id!r} appears twice")
        seen_hosts.add(spec.id)
        store.add_host(
            spec,
            check_fraction_of_one(host.get("cpu_util", 0.0), f"{path}.cpu_util"),
            check_fraction_of_one(host.get("memory_util", 0.0), f"{path}.memory_util"),
        )
        measured_at = _seconds(host.get("measured_at", now), f"{path}.measured_at")
        if measured_at > now:
            raise ValidationError(f"{path}.measured_at", "must not be after now")
        windows = (LoadWindows.from_json(host["windows"], f"{path}.windows")
                   if "windows" in host else None)
        store.update_host_load(spec.id, measured_at, windows)
        tasks = host.get("tasks", [])
        if not isinstance(tasks, list):
            raise ValidationError(f"{path}.tasks", "must be a list")
        for task_index, raw_task in enumerate(tasks):
            task_path = f"{path}.tasks[{task_index}]"
            task = _task(raw_task, task_path, spec.id)
            if task.id in seen_tasks:
                raise ValidationError(f"{task_path}.id", f"task {task.id!r} appears twice")
            seen_tasks.add(task.id)
            store.load_task(task)
            if task.started_at > measured_at:
                placed.append((task.started_at, spec.id, task.id))
    for at, host_id, task_id in sorted(placed):
        recent.placed(host_id, task_id, at)
    return recent
