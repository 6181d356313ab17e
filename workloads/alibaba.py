"""The readers of Alibaba cluster-trace-gpu-v2023: its pods (:func:`convert_alibaba`) and its
nodes (:func:`read_node_list`).

Alibaba ``openb_pod_list_*.csv`` (clusterdata cluster-trace-gpu-v2023)
--------------------------------------------------------------------
A header line; columns used: a name (``name``, or ``pod_name``, ``pod_id``, ``id``),
``cpu_milli``, ``memory_mib``, ``qos``, ``creation_time``, ``deletion_time`` (seconds) and,
when present, ``scheduled_time`` (seconds, empty for a pod that never ran), ``pod_phase``,
``num_gpu`` and ``gpu_milli``. GPUs are out of scope: pods asking for them are counted and
their GPUs ignored (``gpu_spec`` is not read).

* one request per pod that ran, id = the name, arriving at ``creation_time``; a pod without a
  ``scheduled_time`` (``pod_phase`` Pending) never ran and is left out (counted);
* size: ``cpu_shares = round(cpu_milli x 1024 / 1000 x scale)`` (at least 2),
  ``memory = round(memory_mib x MiB x scale)`` (at least 6 MiB); ``scale`` defaults to 1
  (``--resource-scale`` shrinks the trace's machines-sized pods onto small hosts);
* makespan: ``deletion_time - scheduled_time`` (``creation_time`` when the file has no
  ``scheduled_time``), at least 1 s; censored (counted) when there is no deletion time, or the
  pod is still Running at the data's last timestamp (the largest time in the files), which the
  data gives as its deletion time: it runs until that timestamp;
* class from ``qos``: Guaranteed, LSR, LSE (reserved or exclusive cores) -> 1; LS (latency
  sensitive) -> 2; Burstable -> 3; BE (best effort) -> 4; case-insensitive, anything else is
  an error naming the value;
* type: Guaranteed, LSR, LSE, LS -> ``service``; Burstable, BE -> ``job``.

Alibaba ``openb_node_list_*.csv`` (:func:`read_node_list`): the cluster the pods ran on, one
host per row (columns ``sn``, ``cpu_milli``, ``memory_mib``; ``gpu`` and ``model`` are ignored):
id = ``sn``, ``cpu_shares = round(cpu_milli x 1024 / 1000)``, ``memory = memory_mib MiB``.

Read with the shared machinery of :mod:`workloads.readers` (window, counts, notes).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

from domain.errors import ValidationError
from domain.model import HostSpec, TaskType
from workloads.cluster import MIB
from workloads.readers import (
    Conversion,
    Run,
    Sizes,
    check_window,
    csv_rows,
    finish_conversion,
    optional_float,
)
from workloads.trace import TraceError, TraceSource

ALIBABA_QOS: dict[str, tuple[int, TaskType]] = {
    "guaranteed": (1, TaskType.SERVICE),
    "lsr": (1, TaskType.SERVICE),
    "lse": (1, TaskType.SERVICE),
    "ls": (2, TaskType.SERVICE),
    "burstable": (3, TaskType.JOB),
    "be": (4, TaskType.JOB),
}
ALIBABA_NAME_COLUMNS = ("name", "pod_name", "pod_id", "id")


@dataclass(slots=True)
class _Pod:
    run: Run
    deleted_s: float | None
    running: bool  # pod_phase Running


class _PodRow(NamedTuple):
    """One row of a pod list, read."""

    name: str
    cpu_milli: float | None
    memory_mib: float | None
    request_class: int
    task_type: TaskType
    created_s: float
    deleted_s: float | None
    scheduled_s: float | None
    phase: str
    gpu: bool


def _header(row: Sequence[str], line: int, path: Path) -> tuple[dict[str, int], str]:
    """The columns of a pod list's header, and the one that names a pod."""
    columns = {name.strip().lower(): i for i, name in enumerate(row)}
    missing = [c for c in ("cpu_milli", "memory_mib", "qos", "creation_time", "deletion_time")
               if c not in columns]
    names = [c for c in ALIBABA_NAME_COLUMNS if c in columns]
    if missing or not names:
        if not names:
            missing.append("name (or " + ", ".join(ALIBABA_NAME_COLUMNS[1:]) + ")")
        raise TraceError(
            "columns", f"the header lacks {', '.join(missing)}; found "
            f"{', '.join(columns) or 'nothing'}", line=line, path=str(path)
        )
    return columns, names[0]


def _read_pod(row: Sequence[str], columns: dict[str, int], name_column: str,
              seen: Mapping[str, tuple[str, int]]) -> _PodRow:
    """A row read and checked (ValidationError naming the column); ``seen``: where each name
    read so far was."""
    if len(row) != len(columns):
        raise ValidationError(
            "columns", f"expected {len(columns)} columns as in the header, got {len(row)}"
        )
    name = row[columns[name_column]].strip()
    if not name:
        raise ValidationError(name_column, "is empty")
    if name in seen:
        other_path, other_line = seen[name]
        raise ValidationError(
            name_column, f"{name!r} also appears at {other_path} line {other_line}"
        )
    cpu_milli = optional_float(row[columns["cpu_milli"]], "cpu_milli")
    memory_mib = optional_float(row[columns["memory_mib"]], "memory_mib")
    qos_text = row[columns["qos"]].strip()
    if qos_text.lower() not in ALIBABA_QOS:
        raise ValidationError(
            "qos", f"unknown QoS {qos_text!r}; known: Guaranteed, LSR, LSE, LS, Burstable, BE"
        )
    request_class, task_type = ALIBABA_QOS[qos_text.lower()]
    created = optional_float(row[columns["creation_time"]], "creation_time")
    if created is None:
        raise ValidationError("creation_time", "is empty")
    deleted = optional_float(row[columns["deletion_time"]], "deletion_time")
    scheduled = None
    if "scheduled_time" in columns:
        scheduled = optional_float(row[columns["scheduled_time"]], "scheduled_time")
    phase = row[columns["pod_phase"]].strip().lower() if "pod_phase" in columns else ""
    gpu = any(
        optional_float(row[columns[c]], c) for c in ("num_gpu", "gpu_milli") if c in columns
    )
    return _PodRow(name, cpu_milli, memory_mib, request_class, task_type, created, deleted,
                   scheduled, phase, gpu)


def convert_alibaba(
    paths: Sequence[str | Path],
    hosts: Sequence[HostSpec],
    *,
    resource_scale: float = 1.0,
    window_start_s: float = 0.0,
    window_end_s: float | None = None,
    limit: int | None = None,
    hosts_note: str = "",
) -> Conversion:
    """Alibaba ``openb_pod_list`` files -> a trace (mapping in the module docstring)."""
    if not (math.isfinite(resource_scale) and resource_scale > 0):
        raise ValidationError("resource_scale", f"must be > 0, got {resource_scale}")
    check_window(window_start_s, window_end_s)
    pods: list[_Pod] = []
    rows = never_ran = gpus = 0
    data_end_s = 0.0
    sizes = Sizes()
    seen: dict[str, tuple[str, int]] = {}
    for raw_path in paths:
        path = Path(raw_path)
        columns: dict[str, int] | None = None
        name_column = ""
        for line, row in csv_rows(path):
            if columns is None:
                columns, name_column = _header(row, line, path)
                continue
            rows += 1
            try:
                pod = _read_pod(row, columns, name_column, seen)
            except ValidationError as exc:
                raise TraceError(exc.field, exc.message, line=line, path=str(path)) from None
            seen[pod.name] = (str(path), line)
            scheduled = pod.scheduled_s
            data_end_s = max(data_end_s, pod.created_s, pod.deleted_s or 0.0, scheduled or 0.0)
            if scheduled is None and ("scheduled_time" in columns or pod.phase == "pending"):
                never_ran += 1
                continue
            gpus += pod.gpu
            pods.append(_ran(pod, sizes, resource_scale))
        if columns is None:
            raise TraceError("header", "the file is empty; expected a CSV header line",
                             line=1, path=str(path))
    censored = 0
    for p in pods:
        if p.deleted_s is None or (p.running and p.deleted_s >= data_end_s):
            p.run.end_s = data_end_s
            censored += 1
    extra = (f"Resource scale {resource_scale:g}; {gpus} of the pods that ran ask for GPUs: "
             "their GPUs were ignored (only CPU and memory are placed).")
    return finish_conversion(
        TraceSource.ALIBABA, "Alibaba openb_pod_list", [p.run for p in pods], hosts,
        rows=rows, start_s=window_start_s, end_s=window_end_s, limit=limit,
        data_end_s=data_end_s, never_ran=never_ran, censored=censored, sizes=sizes,
        gpu_requests=gpus, extra=" ".join(p for p in (extra, hosts_note) if p),
    )


def _ran(pod: _PodRow, sizes: Sizes, resource_scale: float) -> _Pod:
    """The run of a pod that ran (until its deletion; the caller censors the open ones)."""
    cpu_shares, memory_bytes = sizes.size(
        None if pod.cpu_milli is None else pod.cpu_milli * 1024 / 1000 * resource_scale,
        None if pod.memory_mib is None else pod.memory_mib * MIB * resource_scale,
    )
    start = pod.scheduled_s if pod.scheduled_s is not None else pod.created_s
    run = Run(pod.created_s, start, pod.deleted_s if pod.deleted_s is not None else start,
              pod.name, pod.request_class, pod.task_type, cpu_shares, memory_bytes)
    return _Pod(run, pod.deleted_s, pod.phase == "running")


# ------------------------------------------------------------------ Alibaba node list

ALIBABA_NODE_COLUMNS = ("sn", "cpu_milli", "memory_mib")


def read_node_list(path: str | Path) -> tuple[HostSpec, ...]:
    """The hosts of an Alibaba ``openb_node_list`` file, in file order (see the docstring)."""
    source = Path(path)
    hosts: list[HostSpec] = []
    columns: dict[str, int] | None = None
    for line, row in csv_rows(source):
        if columns is None:
            columns = {name.strip().lower(): i for i, name in enumerate(row)}
            missing = [c for c in ALIBABA_NODE_COLUMNS if c not in columns]
            if missing:
                raise TraceError("columns", f"the header lacks {', '.join(missing)}; found "
                                 f"{', '.join(columns)}", line=line, path=str(source))
            continue
        try:
            if len(row) != len(columns):
                raise ValidationError("columns", f"expected {len(columns)} columns as in the "
                                      f"header, got {len(row)}")
            cpu_milli = optional_float(row[columns["cpu_milli"]], "cpu_milli")
            memory_mib = optional_float(row[columns["memory_mib"]], "memory_mib")
            if not cpu_milli:
                raise ValidationError("cpu_milli", "a node needs more than 0 CPU")
            if not memory_mib:
                raise ValidationError("memory_mib", "a node needs more than 0 memory")
            hosts.append(HostSpec(row[columns["sn"]].strip(), round(cpu_milli * 1024 / 1000),
                                  round(memory_mib * MIB)))
        except ValidationError as exc:
            field = "sn" if exc.field.startswith("hosts.") else exc.field
            raise TraceError(field, exc.message, line=line, path=str(source)) from None
    if not hosts:
        raise TraceError("file", "no node listed; expected a header line (sn,cpu_milli,"
                         "memory_mib,...) and one line per node", path=str(source))
    ids = [h.id for h in hosts]
    if len(set(ids)) != len(ids):
        twice = sorted({i for i in ids if ids.count(i) > 1})[:3]
        raise TraceError("sn", f"node names appear twice: {', '.join(twice)}", path=str(source))
    return tuple(hosts)
