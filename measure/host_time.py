"""The per-host time accounting of :class:`measure.recorder.MetricsRecorder`.

:class:`HostBook` holds every host's :class:`HostTime` and the cluster's energy meter, and
records each state the recorder checked.

Each host's state is piecewise constant between two ``on_host_state`` calls. :func:`advance`
integrates it over the time it held: utilization, booking, busy and empty time, time per region
(LEE / DEE / EED) and, per bin of the plots' width, the series of :data:`SERIES_COLUMNS` plus how
much of the bin was accounted for; :func:`host_series` turns the bins into the bin averages of a
:class:`measure.results.HostSeries`. Pure: no I/O.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import TypeAlias

from domain.energy import DEFAULT_STANDBY_W, EnergyMeter, PowerModel
from domain.errors import ValidationError
from domain.model import HostSpec
from domain.regions import Region, RegionBounds
from measure.results import SERIES_COLUMNS, HostSeries

_N_SERIES = len(SERIES_COLUMNS)

# The Rust implementation of HostTime and advance (native/rust/src/host_time.rs, DESIGN 10)
# when this process runs the native core (importable only then: see domain.rooms): a class
# with the same attributes (read-only but ``oom``; ``bins`` a copy) and ``advance(t)`` and
# ``record(...)`` methods, the book's regions and bins given at construction. The Python class
# and function below stay the reference (tests/unit/test_native_host_time.py compares them).
try:
    from greenswarm_core import HostTime as NativeHostTime
except ImportError:
    NativeHostTime = None  # type: ignore[assignment,misc]


class HostTime:
    """One host's current state, its time integrals and its series bins."""

    __slots__ = ("bins", "busy_s", "cap_cpu", "cap_mem", "cpu", "cpu_alloc", "cpu_alloc_s",
                 "cpu_busy_s", "cpu_s", "empty_s", "last_t", "mem", "mem_alloc", "mem_alloc_s",
                 "mem_busy_s", "mem_bytes", "mem_s", "model", "of_busy_s", "oom", "power",
                 "region_s", "tasks", "used")

    def __init__(self, spec: HostSpec, model: PowerModel, t0: float, bins: int = 0) -> None:
        """``bins``: how many bins to make at once (those a run is expected to reach: a column
        grows bin by bin otherwise; a bin never reached reads as uncovered either way)."""
        self.cap_cpu = spec.cpu_capacity
        self.cap_mem = spec.memory_capacity
        self.model = model
        self.last_t = t0
        self.cpu = 0.0
        self.mem = 0.0
        self.mem_bytes = 0.0
        # the watts of (cpu, mem_bytes), kept with them: whoever sets one sets the other
        self.power = model.power_w_unchecked(0.0, 0.0)
        self.cpu_alloc = 0.0  # fraction of capacity
        self.mem_alloc = 0.0
        self.tasks = 0
        self.used = False
        self.cpu_s = self.mem_s = self.cpu_busy_s = self.mem_busy_s = 0.0
        self.busy_s = self.empty_s = self.cpu_alloc_s = self.mem_alloc_s = self.of_busy_s = 0.0
        self.region_s = [0.0, 0.0, 0.0]
        self.oom = 0
        # bins[k] = [sum of value x dt per bin] for each series, plus coverage at index _N_SERIES
        self.bins: list[list[float]] = [[0.0] * bins for _ in range(_N_SERIES + 1)]


_REGION_INDEX = {Region.LEE: 0, Region.DEE: 1, Region.EED: 2}


def advance(host: HostTime, t: float, bounds: RegionBounds, t0_s: float, step_s: float) -> None:
    """Integrate the host's current state over [last_t, t) (its power: ``host.power``, which
    the caller keeps equal to ``host.model.power_w_unchecked(host.cpu, host.mem_bytes)``)."""
    a = host.last_t
    dt = t - a
    if dt <= 0:
        return
    empty = host.tasks == 0
    host.cpu_s += host.cpu * dt
    host.mem_s += host.mem * dt
    host.cpu_alloc_s += host.cpu_alloc * dt
    host.mem_alloc_s += host.mem_alloc * dt
    if empty:
        host.empty_s += dt
    else:
        host.busy_s += dt
        host.cpu_busy_s += host.cpu * dt
        host.mem_busy_s += host.mem * dt
        host.of_busy_s += max(host.cpu_alloc, host.mem_alloc) * dt
    region = bounds.classify(max(host.cpu, host.mem))
    host.region_s[_REGION_INDEX[region]] += dt
    power = host.power
    # Per bin of the plots, the series, then the coverage (the bin's time this host has been
    # accounted for). The columns are unpacked and the eight sums written out (no zip, no
    # min): the same float operations as a loop over (column, value) pairs, so the same sums.
    c_cpu, c_mem, c_cpu_alloc, c_mem_alloc, c_tasks, c_power, c_power_off, c_cover = host.bins
    cpu, mem, cpu_alloc, mem_alloc = host.cpu, host.mem, host.cpu_alloc, host.mem_alloc
    tasks = float(host.tasks)
    power_off = 0.0 if empty else power
    start = a
    while start < t:
        index = math.floor((start - t0_s) / step_s)
        bin_end = t0_s + (index + 1) * step_s
        if not bin_end < t:
            bin_end = t  # min(t, bin end)
        if bin_end <= start:  # float edge: move to the next bin
            index += 1
            bin_end = t0_s + (index + 1) * step_s
            if not bin_end < t:
                bin_end = t
        piece = bin_end - start
        if len(c_cpu) <= index:  # all columns have the same length
            for column in host.bins:
                column.extend([0.0] * (index + 1 - len(column)))
        c_cpu[index] += cpu * piece
        c_mem[index] += mem * piece
        c_cpu_alloc[index] += cpu_alloc * piece
        c_mem_alloc[index] += mem_alloc * piece
        c_tasks[index] += tasks * piece
        c_power[index] += power * piece
        c_power_off[index] += power_off * piece
        c_cover[index] += piece
        start = bin_end
    host.last_t = t


AnyHostTime: TypeAlias = "HostTime | NativeHostTime"


def host_time_implementation() -> str:
    """``rust`` or ``python``: which HostTime a :class:`HostBook` of this process makes."""
    return "python" if NativeHostTime is None else "rust"


def host_series(hosts: Mapping[str, AnyHostTime], t0_s: float, step_s: float,
                t_end: float) -> HostSeries:
    """Each host's bins as bin averages over the time accounted for in them."""
    duration = t_end - t0_s
    n_bins = math.ceil(duration / step_s - 1e-9) if duration > 0 else 0
    values: dict[str, list[tuple[float, ...]]] = {name: [] for name in SERIES_COLUMNS}
    for host in hosts.values():
        bins = host.bins  # once: the Rust class's is a copy
        # the bins never reached count as uncovered; every column is as long as the coverage
        coverage = bins[_N_SERIES][:n_bins]
        missing = (0.0,) * (n_bins - len(coverage))
        for k, name in enumerate(SERIES_COLUMNS):
            row = [value / covered if covered > 0 else 0.0
                   for value, covered in zip(bins[k], coverage, strict=False)]
            values[name].append((*row, *missing))
    return HostSeries(
        t0_s=t0_s,
        step_s=step_s,
        host_ids=tuple(hosts),
        values={name: tuple(rows) for name, rows in values.items()},
    )


# At most this many bins of the plots are made at once (the columns grow beyond).
PREALLOCATED_BINS = 3600


class HostBook:
    """Every host's time accounting and the cluster's energy meter (see the module docstring).

    ``duration_hint_s``: the bins of the expected duration are made at once (+1: a float edge
    at the end; at most PREALLOCATED_BINS). Each host's accounting and energy meter are the
    Rust classes when this process loaded the Rust core (the accounting then updates the meter
    itself), unless ``reference`` (to compare them)."""

    __slots__ = ("bounds", "energy", "hosts", "models", "step_s", "t0_s")

    def __init__(
        self,
        specs: Sequence[HostSpec],
        power_model: PowerModel | Mapping[str, PowerModel] | None,
        bounds: RegionBounds,
        t0_s: float,
        step_s: float,
        duration_hint_s: float | None,
        standby_w: float = DEFAULT_STANDBY_W,
        *,
        reference: bool = False,
    ) -> None:
        self.bounds = bounds
        self.t0_s = t0_s
        self.step_s = step_s
        self.models = _power_models(specs, power_model)
        seen: set[str] = set()
        for spec in specs:
            if spec.id in seen:
                raise ValidationError("hosts", f"host id {spec.id!r} appears twice")
            seen.add(spec.id)
        self.energy = EnergyMeter([h.id for h in specs], self.models, t_start_s=t0_s,
                                  standby_w=standby_w, reference=reference)
        bins = 0
        if duration_hint_s and 0 < duration_hint_s < math.inf:
            bins = min(PREALLOCATED_BINS, math.ceil(duration_hint_s / step_s) + 1)
        self.hosts: dict[str, AnyHostTime] = {}
        for spec in specs:
            model = self.models[spec.id]
            meter = self.energy.native_meter(spec.id)  # None: the reference, or no Rust core
            if meter is None or NativeHostTime is None:
                self.hosts[spec.id] = HostTime(spec, model, t0_s, bins)
                continue
            self.hosts[spec.id] = NativeHostTime(
                spec.cpu_capacity, spec.memory_capacity, model, t0_s, bins, bounds.lee_below,
                bounds.eed_above, t0_s, step_s, _power_table(model), (spec.id, meter))

    def host(self, host_id: str) -> AnyHostTime:
        host = self.hosts.get(host_id)
        if host is None:
            raise ValidationError("host_id", f"unknown host {host_id!r}")
        return host

    def record(
        self,
        t: float,
        host_id: str,
        host: AnyHostTime,
        cpu: float,
        mem: float,
        mem_bytes: float,
        task_count: int,
        cpu_alloc: float | None,
        mem_alloc: float | None,
    ) -> None:
        """Record the host's state, checked by the caller, from ``t`` on (allocations: None
        keeps them)."""
        if not isinstance(host, HostTime):  # the Rust class: the same steps, the meter's too
            host.record(t, cpu, mem, mem_bytes, task_count, cpu_alloc, mem_alloc)
            return
        advance(host, t, self.bounds, self.t0_s, self.step_s)
        if cpu != host.cpu or mem_bytes != host.mem_bytes:  # else the same watts
            host.power = host.model.power_w_unchecked(cpu, mem_bytes)
        host.cpu = cpu
        host.mem = mem
        host.mem_bytes = mem_bytes
        host.tasks = task_count
        if task_count:
            host.used = True
        if cpu_alloc is not None:
            host.cpu_alloc = cpu_alloc / host.cap_cpu
        if mem_alloc is not None:
            host.mem_alloc = mem_alloc / host.cap_mem
        self.energy.update_unchecked(t, host_id, cpu, mem_bytes, task_count == 0, host.power)

    def close(self, t_end: float) -> None:
        """Every host's state held until ``t_end``."""
        for host_id, host in self.hosts.items():
            if t_end < host.last_t:
                raise ValidationError(
                    "t_end", f"{t_end} is before the last state of {host_id} at {host.last_t}"
                )
            if isinstance(host, HostTime):
                advance(host, t_end, self.bounds, self.t0_s, self.step_s)
            else:
                host.advance(t_end)


def _power_table(model: PowerModel) -> tuple[tuple[float, ...], float] | None:
    """What the Rust class needs to compute the model's power itself (PowerModel's
    ``power_w_unchecked``, the same float operations): its table's watts and its memory watts
    per GiB; None for another model (a subclass may compute its own way: it is asked)."""
    if type(model) is not PowerModel:
        return None
    return model.table.watts, model.memory_w_per_gib


def _power_models(
    specs: Sequence[HostSpec], power_model: PowerModel | Mapping[str, PowerModel] | None
) -> dict[str, PowerModel]:
    """Every host's power model: the default, one for all, or one each."""
    default_model = PowerModel.named()
    models: dict[str, PowerModel] = {}
    for spec in specs:
        if power_model is None:
            models[spec.id] = default_model
        elif isinstance(power_model, PowerModel):
            models[spec.id] = power_model
        else:
            if spec.id not in power_model:
                raise ValidationError("power_model", f"no power model for host {spec.id!r}")
            models[spec.id] = power_model[spec.id]
    return models
