"""The benchmark trace: a JSON Lines file of timed requests, replayed identically per policy.

Format, version 1 (UTF-8; a name ending in ``.gz`` is read and written gzip-compressed):

Line 1, the header::

    {"kind": "header", "version": 1, "source": "thesis", "seed": 7, "duration_s": 3600.0,
     "hosts": [{"id": "host-1", "cpu_capacity": 8192, "memory_capacity": 12884901888}, ...],
     "notes": "free text"}

* ``source``: where the requests come from: ``thesis`` (the generator of DESIGN 7.1),
  ``google2011``, ``alibaba``, or any other short name (letters, digits, ``-_.``);
* ``seed``: the generator's seed, ``null`` for a converted trace;
* ``duration_s`` > 0: the arrival window; every request has ``0 <= t <= duration_s``;
* ``hosts``: the cluster the trace was made for, at least one host, ids unique; capacities are
  CPU shares (1024 per core) and bytes.

Then one line per request, sorted by ``t`` (ties keep file order)::

    {"kind": "request", "t": 0.5, "id": "r000001", "class": 3, "type": "job",
     "workload": "ffmpeg", "cpu_shares": 512, "memory": 536870912, "makespan_s": 120.0,
     "request_rate": null}

* ``t``: seconds from the start of the run at which the client submits it;
* ``id``: unique in the file;
* ``class``: overbooking class 1..4 (DESIGN 3.2);
* ``type``: ``job`` | ``service``; ``workload``: ``ffmpeg`` (job), ``redis`` (service), ``dl``
  (job), ``timeserver`` (service) or ``generic`` (either; converted traces);
* ``cpu_shares`` >= 2, ``memory`` >= 1 (bytes), both integers;
* ``makespan_s`` > 0: how long it runs once started; for a service, how long until the client
  stops it;
* ``request_rate``: client requests per 10 s sent to a service, ``null`` for jobs (and for
  services without client load).

Unknown keys are refused (a typo must not silently change a benchmark). Blank lines are
ignored. Every error is a :class:`TraceError` (a ``ValidationError``) naming the file, the line
and the field.

Small traces are read whole with :func:`read_trace`; large ones (24 h on 1,000 hosts holds
millions of requests) are streamed with :func:`open_trace` / :class:`TraceWriter`.
"""

from __future__ import annotations

import gzip
import io
import json
import math
import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from types import TracebackType
from typing import IO, Any

from domain.classes import MAX_CLASS, MIN_CLASS
from domain.errors import ValidationError
from domain.model import TaskType  # job | service, shared with the scheduler
from workloads.outfiles import OutFile

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
class HostSpec:
    """One machine of the cluster a trace was made for."""

    id: str
    cpu_capacity_shares: int
    memory_capacity_bytes: int

    def __post_init__(self) -> None:
        _check_text(self.id, "hosts.id")
        _check_int(self.cpu_capacity_shares, "hosts.cpu_capacity", minimum=1)
        _check_int(self.memory_capacity_bytes, "hosts.memory_capacity", minimum=1)

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "cpu_capacity": self.cpu_capacity_shares,
            "memory_capacity": self.memory_capacity_bytes,
        }


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
        return sum(h.cpu_capacity_shares for h in self.hosts)

    @property
    def memory_capacity_bytes(self) -> int:
        """Total memory capacity of the cluster."""
        return sum(h.memory_capacity_bytes for h in self.hosts)

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


@dataclass(frozen=True, slots=True)
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

    def to_json(self) -> dict[str, Any]:
        return {
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
            _check_order(previous_t, request)
            if request.id in seen:
                raise ValidationError("id", f"{request.id!r} appears twice")
        except ValidationError as exc:
            raise ValidationError(f"requests.{index}.{exc.field}", exc.message) from None
        seen.add(request.id)
        previous_t = request.t_s


def _check_order(previous_t: float, request: TraceRequest) -> None:
    if request.t_s < previous_t:
        raise ValidationError(
            "t", f"{request.t_s} is before the previous request's {previous_t}; requests must "
            "be sorted by time"
        )


# ---------------------------------------------------------------- JSON <-> values


def _reject_constant(name: str) -> float:
    raise ValueError(f"{name} is not a number")


# One decoder and one encoder for every line (json.loads/dumps with options build new ones).
_DECODER = json.JSONDecoder(parse_constant=_reject_constant)
_ENCODER = json.JSONEncoder(separators=(", ", ": "), allow_nan=False)


def _load_json_line(text: str) -> object:
    return _DECODER.decode(text)


def _require_keys(obj: Mapping[str, object], required: Iterable[str], allowed: set[str]) -> None:
    for key in required:
        if key not in obj:
            raise ValidationError(key, "is missing")
    for key in obj:
        if key not in allowed:
            raise ValidationError(key, f"unknown field (allowed: {', '.join(sorted(allowed))})")


_HEADER_KEYS = {"kind", "version", "source", "seed", "duration_s", "hosts", "notes"}
_HEADER_REQUIRED = ("kind", "version", "source", "seed", "duration_s", "hosts")
_HOST_KEYS = {"id", "cpu_capacity", "memory_capacity"}
_REQUEST_KEYS = {
    "kind", "t", "id", "class", "type", "workload", "cpu_shares", "memory", "makespan_s",
    "request_rate",
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
                    cpu_capacity_shares=_check_int(raw["cpu_capacity"], "cpu_capacity",
                                                   minimum=1),
                    memory_capacity_bytes=_check_int(raw["memory_capacity"], "memory_capacity",
                                                     minimum=1),
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
    )


def _dumps(obj: Mapping[str, Any]) -> str:
    return _ENCODER.encode(obj)


# ---------------------------------------------------------------- files


def _open_text(path: Path, mode: str, *, gz: bool | None = None) -> IO[str]:
    # The handle is returned to a reader/writer class that closes it. ``gz``: compress (default:
    # when the name ends in .gz; a writer's temporary file or device says it apart).
    if path.name.endswith(".gz") if gz is None else gz:
        raw = gzip.GzipFile(path, "rb" if mode == "r" else "wb", compresslevel=6)
        return io.TextIOWrapper(raw, encoding="utf-8", newline="\n")
    return open(path, mode, encoding="utf-8", newline="\n")


class TraceReader:
    """Streams a trace: ``header`` is read on open, requests are validated as iterated.

    Use as a context manager::

        with open_trace(path) as reader:
            print(reader.header.duration_s)
            for request in reader:
                ...
    """

    def __init__(self, path: str | Path, *, check_unique_ids: bool = True) -> None:
        self.path = Path(path)
        self._name = str(path)
        self._check_unique = check_unique_ids
        try:
            self._file = _open_text(self.path, "r")
        except OSError as exc:
            raise TraceError("file", f"cannot open: {exc.strerror or exc}",
                             path=self._name) from None
        self._line_no = 0
        self.header = self._read_header()

    def _next_line(self) -> str | None:
        while True:
            try:
                text = self._file.readline()
            except (OSError, UnicodeDecodeError, EOFError) as exc:
                raise TraceError("file", f"cannot read: {exc}", line=self._line_no + 1,
                                 path=self._name) from None
            if not text:
                return None
            self._line_no += 1
            if text.strip():
                return text

    def _decode(self, text: str) -> object:
        try:
            return _load_json_line(text)
        except ValueError as exc:
            raise TraceError("json", f"not valid JSON: {exc}", line=self._line_no,
                             path=self._name) from None

    def _read_header(self) -> TraceHeader:
        text = self._next_line()
        if text is None:
            self.close()
            raise TraceError("header", "the file is empty; line 1 must be the header",
                             line=1, path=self._name)
        try:
            return header_from_json(self._decode(text))
        except TraceError:
            self.close()
            raise
        except ValidationError as exc:
            self.close()
            raise TraceError(exc.field, exc.message, line=self._line_no,
                             path=self._name) from None

    def __iter__(self) -> Iterator[TraceRequest]:
        previous_t = 0.0
        seen: set[str] = set()
        while (text := self._next_line()) is not None:
            try:
                request = request_from_json(self._decode(text))
                check_request_in_header(self.header, request)
                _check_order(previous_t, request)
                if self._check_unique:
                    if request.id in seen:
                        raise ValidationError("id", f"{request.id!r} appears twice")
                    seen.add(request.id)
            except TraceError:
                raise
            except ValidationError as exc:
                raise TraceError(exc.field, exc.message, line=self._line_no,
                                 path=self._name) from None
            previous_t = request.t_s
            yield request

    def close(self) -> None:
        self._file.close()

    def __enter__(self) -> TraceReader:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


def open_trace(path: str | Path, *, check_unique_ids: bool = True) -> TraceReader:
    """Open a trace for streaming (see :class:`TraceReader`)."""
    return TraceReader(path, check_unique_ids=check_unique_ids)


def read_trace(path: str | Path) -> Trace:
    """Read and validate a whole trace."""
    with open_trace(path) as reader:
        requests = tuple(reader)
        return Trace(reader.header, requests)


def _tmp_name(name: str) -> str:
    """``trace.jsonl.gz`` is written as ``trace.jsonl.tmp.gz``, others as ``NAME.tmp``."""
    return name[:-3] + ".tmp.gz" if name.endswith(".gz") else name + ".tmp"


class TraceWriter:
    """Writes a trace line by line, checking order, window and ids as it goes.

    A regular file is written to ``<path>.tmp`` and renamed on a clean close, so a failed run
    never leaves a half trace under the final name; a character device or a fifo is written in
    place, never replaced (workloads.outfiles). ``check_unique_ids=False`` skips the set of ids
    seen (for generators whose ids are unique by construction: millions of requests).
    """

    def __init__(
        self, path: str | Path, header: TraceHeader, *, check_unique_ids: bool = True
    ) -> None:
        self.path = Path(path)
        self.header = header
        self._check_unique = check_unique_ids
        self._out = OutFile(path, tmp_name=_tmp_name)
        try:
            self._file = _open_text(self._out.write_path, "w", gz=self.path.name.endswith(".gz"))
        except OSError as exc:
            raise TraceError("file", f"cannot write: {exc.strerror or exc}",
                             path=str(path)) from None
        self._file.write(_dumps(header.to_json()) + "\n")
        self._previous_t = 0.0
        self._seen: set[str] = set()
        self.count = 0

    def write(self, request: TraceRequest) -> None:
        try:
            check_request_in_header(self.header, request)
            _check_order(self._previous_t, request)
            if self._check_unique:
                if request.id in self._seen:
                    raise ValidationError("id", f"{request.id!r} appears twice")
                self._seen.add(request.id)
        except ValidationError as exc:
            raise TraceError(exc.field, exc.message, line=self.count + 2,
                             path=str(self.path)) from None
        self._previous_t = request.t_s
        self._file.write(_dumps(request.to_json()) + "\n")
        self.count += 1

    def write_all(self, requests: Iterable[TraceRequest]) -> None:
        for request in requests:
            self.write(request)

    def close(self, *, keep: bool = True) -> None:
        self._file.close()
        if keep:
            self._out.commit()
        else:
            self._out.discard()

    def __enter__(self) -> TraceWriter:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close(keep=exc_type is None)


def write_trace(path: str | Path, trace: Trace) -> None:
    """Write a whole trace."""
    with TraceWriter(path, trace.header) as writer:
        writer.write_all(trace.requests)


def write_requests(
    path: str | Path,
    header: TraceHeader,
    requests: Iterable[TraceRequest],
    *,
    check_unique_ids: bool = True,
) -> int:
    """Stream ``requests`` into a trace file; returns how many were written."""
    with TraceWriter(path, header, check_unique_ids=check_unique_ids) as writer:
        writer.write_all(requests)
        return writer.count
