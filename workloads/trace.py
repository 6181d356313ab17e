"""The benchmark trace as values: a header (the cluster, the arrival window) and timed requests.

Each value checks itself when built (:class:`HostSpec`, :class:`TraceHeader`,
:class:`TraceRequest`, :class:`Trace`: the rules of the format, see :mod:`workloads.trace_file`,
which reads and writes the file). ``to_json`` and :func:`header_from_json` /
:func:`request_from_json` give and take the JSON object of one line. Every error is a
``ValidationError`` naming the field; :class:`TraceError` adds the file and the line.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from domain.classes import MAX_CLASS, MIN_CLASS
from domain.constraints import Constraint, check_constraints, constraint_texts
from domain.errors import ValidationError
from domain.model import (  # shared with the scheduler
    HostSpec,
    TaskType,
    check_checkpoint,
    check_labels,
    checkpoint_of,
)

TRACE_VERSION = 1
MIN_CPU_SHARES = 2
_SOURCE_PATTERN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")


class Workload(StrEnum):
    FFMPEG = "ffmpeg"  # video encoding: CPU-intensive job
    REDIS = "redis"  # filled with data and queried: memory-intensive service
    DL = "dl"  # deep-learning training: CPU- and memory-intensive job
    TIMESERVER = "timeserver"  # returns the time: idle service
    GENERIC = "generic"  # converted from a public trace: no known application


class TraceSource(StrEnum):
    """The sources this project produces; the header accepts other short names too."""

    THESIS = "thesis"
    GOOGLE2011 = "google2011"
    ALIBABA = "alibaba"


# The type each named workload has (GENERIC may be either).
WORKLOAD_TYPE: dict[Workload, TaskType] = {
    Workload.FFMPEG: TaskType.JOB,
    Workload.REDIS: TaskType.SERVICE,
    Workload.DL: TaskType.JOB,
    Workload.TIMESERVER: TaskType.SERVICE,
}


class TraceError(ValidationError):
    """A trace that breaks the format; says where (file, line) and which field."""

    def __init__(
        self, field: str, message: str, *, line: int | None = None, path: str | None = None
    ) -> None:
        super().__init__(field, message)
        self.line = line
        self.path = path

    def __str__(self) -> str:
        where = self.path or "trace"
        if self.line is not None:
            where += f" line {self.line}"
        return f"{where}: {self.field}: {self.message}"


@dataclass(frozen=True, slots=True)
class TraceHeader:
    source: str
    seed: int | None
    duration_s: float
    hosts: tuple[HostSpec, ...]
    notes: str = ""
    version: int = TRACE_VERSION

    def __post_init__(self) -> None:
        if self.version != TRACE_VERSION:
            raise ValidationError("version", f"only version {TRACE_VERSION} is supported")
        if not isinstance(self.source, str) or not _SOURCE_PATTERN.match(self.source):
            raise ValidationError(
                "source", "must be a short name such as 'thesis', 'google2011' or 'alibaba'"
            )
        if self.seed is not None:
            _check_int(self.seed, "seed")
        _check_float(self.duration_s, "duration_s", positive=True)
        if not isinstance(self.hosts, tuple) or not self.hosts:
            raise ValidationError("hosts", "must list at least one host")
        seen: set[str] = set()
        for index, host in enumerate(self.hosts):
            if not isinstance(host, HostSpec):
                raise ValidationError(f"hosts.{index}", "must be a HostSpec")
            if host.id in seen:
                raise ValidationError(f"hosts.{index}.id", f"host id {host.id!r} appears twice")
            seen.add(host.id)
        if not isinstance(self.notes, str):
            raise ValidationError("notes", "must be a string")

    @property
    def cpu_capacity_shares(self) -> int:
        """Total CPU capacity of the cluster."""
        return sum(h.cpu_capacity for h in self.hosts)

    @property
    def memory_capacity_bytes(self) -> int:
        """Total memory capacity of the cluster."""
        return sum(h.memory_capacity for h in self.hosts)

    def to_json(self) -> dict[str, Any]:
        return {
            "kind": "header",
            "version": self.version,
            "source": self.source,
            "seed": self.seed,
            "duration_s": float(self.duration_s),
            "hosts": [h.to_json() for h in self.hosts],
            "notes": self.notes,
        }


@dataclass(frozen=True, slots=True, init=False)
class TraceRequest:
    """One request of the trace. ``request_class`` is the JSON key ``class``."""

    t_s: float
    id: str
    request_class: int
    type: TaskType
    workload: Workload
    cpu_shares: int
    memory_bytes: int
    makespan_s: float
    request_rate: int | None = None
    constraints: tuple[Constraint, ...] = ()  # placement constraints (DESIGN 4)
    # A checkpointable job (DESIGN 3.14): it saves its progress this often and resumes from it
    # when restarted; 0: it restarts from scratch. JSON: "checkpoint": true and
    # "checkpoint_interval_s", written only for such a job.
    checkpoint_interval_s: float = 0.0

    # Written by hand (init=False), as the generated one would be: compiled (see
    # native.loader), the dataclass's own __init__ stays interpreted and is several times
    # slower. tests/unit/test_dataclass_inits.py checks it against the fields.
    def __init__(self, t_s: float, id: str, request_class: int, type: TaskType,
                 workload: Workload, cpu_shares: int, memory_bytes: int, makespan_s: float,
                 request_rate: int | None = None,
                 constraints: tuple[Constraint, ...] = (),
                 checkpoint_interval_s: float = 0.0) -> None:
        object.__setattr__(self, "t_s", t_s)
        object.__setattr__(self, "id", id)
        object.__setattr__(self, "request_class", request_class)
        object.__setattr__(self, "type", type)
        object.__setattr__(self, "workload", workload)
        object.__setattr__(self, "cpu_shares", cpu_shares)
        object.__setattr__(self, "memory_bytes", memory_bytes)
        object.__setattr__(self, "makespan_s", makespan_s)
        object.__setattr__(self, "request_rate", request_rate)
        object.__setattr__(self, "constraints", constraints)
        object.__setattr__(self, "checkpoint_interval_s", checkpoint_interval_s)
        self.__post_init__()

    def __post_init__(self) -> None:
        # Checked once here, whoever builds it; ints for times are stored as floats.
        object.__setattr__(self, "t_s", _check_float(self.t_s, "t", minimum=0.0))
        _check_text(self.id, "id")
        _check_int(self.request_class, "class", minimum=MIN_CLASS, maximum=MAX_CLASS)
        if not isinstance(self.type, TaskType):
            raise ValidationError("type", "must be a TaskType")
        if not isinstance(self.workload, Workload):
            raise ValidationError("workload", "must be a Workload")
        expected = WORKLOAD_TYPE.get(self.workload)
        if expected is not None and expected is not self.type:
            raise ValidationError(
                "type", f"workload {self.workload.value!r} is a {expected.value}, not a "
                f"{self.type.value}"
            )
        _check_int(self.cpu_shares, "cpu_shares", minimum=MIN_CPU_SHARES)
        _check_int(self.memory_bytes, "memory", minimum=1)
        object.__setattr__(
            self, "makespan_s", _check_float(self.makespan_s, "makespan_s", positive=True)
        )
        if self.request_rate is not None:
            _check_int(self.request_rate, "request_rate", minimum=0)
            if self.type is TaskType.JOB:
                raise ValidationError("request_rate", "must be null for a job")
        if self.checkpoint_interval_s != 0.0:
            object.__setattr__(self, "checkpoint_interval_s",
                               check_checkpoint(self.checkpoint_interval_s, self.type))

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "kind": "request",
            "t": float(self.t_s),
            "id": self.id,
            "class": self.request_class,
            "type": self.type.value,
            "workload": self.workload.value,
            "cpu_shares": self.cpu_shares,
            "memory": self.memory_bytes,
            "makespan_s": float(self.makespan_s),
            "request_rate": self.request_rate,
        }
        if self.constraints:
            out["constraints"] = constraint_texts(self.constraints)
        if self.checkpoint_interval_s > 0:
            out["checkpoint"] = True
            out["checkpoint_interval_s"] = float(self.checkpoint_interval_s)
        return out


@dataclass(frozen=True, slots=True)
class Trace:
    """A whole trace in memory: header and requests sorted by time."""

    header: TraceHeader
    requests: tuple[TraceRequest, ...]

    def __post_init__(self) -> None:
        check_requests(self.header, self.requests)


# ---------------------------------------------------------------- validation helpers


def _check_text(value: object, field: str) -> str:
    if not isinstance(value, str) or not value or value != value.strip():
        raise ValidationError(field, "must be a non-empty string without surrounding spaces")
    return value


def _check_int(
    value: object, field: str, *, minimum: int | None = None, maximum: int | None = None
) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValidationError(field, f"must be an integer, got {value!r}")
    if minimum is not None and value < minimum:
        raise ValidationError(field, f"must be >= {minimum}, got {value}")
    if maximum is not None and value > maximum:
        raise ValidationError(field, f"must be <= {maximum}, got {value}")
    return value


def _check_float(
    value: object, field: str, *, minimum: float | None = None, positive: bool = False
) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValidationError(field, f"must be a number, got {value!r}")
    number = float(value)
    if not math.isfinite(number):
        raise ValidationError(field, f"must be finite, got {value!r}")
    if positive and number <= 0:
        raise ValidationError(field, f"must be > 0, got {value!r}")
    if minimum is not None and number < minimum:
        raise ValidationError(field, f"must be >= {minimum}, got {value!r}")
    return number


def check_request_in_header(header: TraceHeader, request: TraceRequest) -> None:
    """Checks of one request against its header (the arrival window)."""
    if request.t_s > header.duration_s:
        raise ValidationError(
            "t", f"{request.t_s} is after the end of the trace (duration_s {header.duration_s})"
        )


def check_requests(header: TraceHeader, requests: Iterable[TraceRequest]) -> None:
    """Whole-sequence checks: inside the window, sorted by time, ids unique."""
    previous_t = 0.0
    seen: set[str] = set()
    for index, request in enumerate(requests):
        try:
            check_request_in_header(header, request)
            check_order(previous_t, request)
            if request.id in seen:
                raise ValidationError("id", f"{request.id!r} appears twice")
        except ValidationError as exc:
            raise ValidationError(f"requests.{index}.{exc.field}", exc.message) from None
        seen.add(request.id)
        previous_t = request.t_s


def check_order(previous_t: float, request: TraceRequest) -> None:
    if request.t_s < previous_t:
        raise ValidationError(
            "t", f"{request.t_s} is before the previous request's {previous_t}; requests must "
            "be sorted by time"
        )


# ---------------------------------------------------------------- JSON <-> values


def _require_keys(obj: Mapping[str, object], required: Iterable[str], allowed: set[str]) -> None:
    for key in required:
        if key not in obj:
            raise ValidationError(key, "is missing")
    for key in obj:
        if key not in allowed:
            raise ValidationError(key, f"unknown field (allowed: {', '.join(sorted(allowed))})")


_HEADER_KEYS = {"kind", "version", "source", "seed", "duration_s", "hosts", "notes"}
_HEADER_REQUIRED = ("kind", "version", "source", "seed", "duration_s", "hosts")
_HOST_KEYS = {"id", "cpu_capacity", "memory_capacity", "labels"}
_REQUEST_KEYS = {
    "kind", "t", "id", "class", "type", "workload", "cpu_shares", "memory", "makespan_s",
    "request_rate", "constraints", "checkpoint", "checkpoint_interval_s",
}
_REQUEST_REQUIRED = (
    "kind", "t", "id", "class", "type", "workload", "cpu_shares", "memory", "makespan_s",
)


def header_from_json(obj: object) -> TraceHeader:
    """A header from its decoded JSON object; ValidationError names the field."""
    if not isinstance(obj, dict):
        raise ValidationError("header", "must be a JSON object")
    _require_keys(obj, _HEADER_REQUIRED, _HEADER_KEYS)
    if obj["kind"] != "header":
        raise ValidationError("kind", f"the first line must be the header, got {obj['kind']!r}")
    version = _check_int(obj["version"], "version")
    if version != TRACE_VERSION:
        raise ValidationError("version", f"only version {TRACE_VERSION} is supported, got "
                              f"{version}")
    raw_hosts = obj["hosts"]
    if not isinstance(raw_hosts, list) or not raw_hosts:
        raise ValidationError("hosts", "must be a non-empty list")
    hosts: list[HostSpec] = []
    for index, raw in enumerate(raw_hosts):
        try:
            if not isinstance(raw, dict):
                raise ValidationError("host", "must be a JSON object")
            _require_keys(raw, ("id", "cpu_capacity", "memory_capacity"), _HOST_KEYS)
            hosts.append(
                HostSpec(
                    id=_check_text(raw["id"], "id"),
                    cpu_capacity=_check_int(raw["cpu_capacity"], "cpu_capacity", minimum=1),
                    memory_capacity=_check_int(raw["memory_capacity"], "memory_capacity",
                                               minimum=1),
                    labels=check_labels(raw.get("labels", {}), "labels"),
                )
            )
        except ValidationError as exc:
            field = exc.field.removeprefix("hosts.")
            raise ValidationError(f"hosts.{index}.{field}", exc.message) from None
    seed = obj["seed"]
    notes = obj.get("notes", "")
    if not isinstance(notes, str):
        raise ValidationError("notes", "must be a string")
    return TraceHeader(
        source=_check_text(obj["source"], "source"),
        seed=None if seed is None else _check_int(seed, "seed"),
        duration_s=_check_float(obj["duration_s"], "duration_s", positive=True),
        hosts=tuple(hosts),
        notes=notes,
        version=version,
    )


def request_from_json(obj: object) -> TraceRequest:
    """A request from its decoded JSON object; ValidationError names the field."""
    if not isinstance(obj, dict):
        raise ValidationError("request", "must be a JSON object")
    if obj.get("kind") == "header":
        raise ValidationError("kind", "a second header; only line 1 may be the header")
    _require_keys(obj, _REQUEST_REQUIRED, _REQUEST_KEYS)
    if obj["kind"] != "request":
        raise ValidationError("kind", f"must be 'request', got {obj['kind']!r}")
    try:
        task_type = TaskType(obj["type"])
    except ValueError:
        raise ValidationError(
            "type", f"must be one of {[t.value for t in TaskType]}, got {obj['type']!r}"
        ) from None
    try:
        workload = Workload(obj["workload"])
    except ValueError:
        raise ValidationError(
            "workload", f"must be one of {[w.value for w in Workload]}, got {obj['workload']!r}"
        ) from None
    # The values are checked once, by TraceRequest itself (errors name the JSON keys).
    return TraceRequest(
        t_s=obj["t"],
        id=obj["id"],
        request_class=obj["class"],
        type=task_type,
        workload=workload,
        cpu_shares=obj["cpu_shares"],
        memory_bytes=obj["memory"],
        makespan_s=obj["makespan_s"],
        request_rate=obj.get("request_rate"),
        constraints=check_constraints(obj.get("constraints"), "constraints"),
        checkpoint_interval_s=checkpoint_of(obj, task_type),
    )
