"""The monitor's main loop: samples on schedule, closes windows, decides, sends with back-off.

One thread does everything (sampling never waits for the network longer than the client's
timeouts, and every number is computed from the real time between readings, so a late sample is
still right). ``run`` stops when the given ``threading.Event`` is set.

Schedule: host and task samples every ``*_interval_s``; a window is ``*_window_s`` worth of
sampling slots (30 s / 3 s = 10 host samples, 45 s / 3 s = 15 task samples), closed on schedule
even if the loop was delayed. Registration (message 11) follows the first host sample.
"""

from __future__ import annotations

import logging
import random
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Protocol

from domain.errors import GreenSwarmError, NotFoundError, ValidationError
from monitor.client import HostRegistration, RegistryPort
from monitor.core import (
    BackoffPolicy,
    HostTracker,
    HostUpdate,
    LoadHistory,
    TaskBatch,
    TaskTracker,
    UtilSample,
    WindowSchedule,
    average,
    slots_per_window,
)
from monitor.host_sources import HostCapacity, HostSource
from monitor.identity import HostIdentity

log = logging.getLogger(__name__)

Clock = Callable[[], float]


class TaskSampler(Protocol):
    def sample(self) -> dict[str, UtilSample]: ...


class PowerMeter(Protocol):
    def read_power_w(self, at_s: float) -> float | None: ...


@dataclass(frozen=True)
class Timings:
    host_interval_s: float = 3.0
    host_window_s: float = 30.0
    task_interval_s: float = 3.0
    task_window_s: float = 45.0


DEFAULT_TIMINGS = Timings()
DEFAULT_BACKOFF = BackoffPolicy()


@dataclass
class MonitorCounters:
    """What the loop did (for logs, tests and operators)."""

    host_samples: int = 0
    task_samples: int = 0
    host_windows: int = 0
    task_windows: int = 0
    registrations: int = 0
    host_updates_sent: int = 0
    task_batches_sent: int = 0
    send_failures: int = 0


class Monitor:
    def __init__(
        self,
        identity: HostIdentity,
        host_source: HostSource,
        registry: RegistryPort,
        timings: Timings = DEFAULT_TIMINGS,
        threshold_pp: float = 10.0,
        backoff: BackoffPolicy = DEFAULT_BACKOFF,
        task_sampler: TaskSampler | None = None,
        power_meter: PowerMeter | None = None,
        clock: Clock = time.monotonic,
        rng: random.Random | None = None,
        resend_s: float = 60.0,
        wall_clock: Clock = time.time,
    ) -> None:
        self.identity = identity
        self._host_source = host_source
        self._registry = registry
        self._timings = timings
        self._backoff = backoff
        self._tasks_sampler = task_sampler
        self._power = power_meter
        self._clock = clock
        self._wall_clock = wall_clock
        self._rng = rng or random.Random()
        # values are sent again, moved or not, at least every resend_s (DESIGN 9)
        self.host = HostTracker(threshold_pp, resend_s=resend_s)
        self.load = LoadHistory()
        self.tasks = TaskTracker(threshold_pp, resend_s=resend_s)
        self.counters = MonitorCounters()
        self.registered = False
        self._capacity: HostCapacity | None = None
        self._latest_host: UtilSample | None = None
        self._host_window: list[UtilSample] = []
        self._task_window: dict[str, list[UtilSample]] = {}
        self._attempt = 0
        self._retry_at_s = 0.0
        self._outage = False
        self._source_failing = False
        self._docker_failing = False

    # --- the loop ----------------------------------------------------------------------------

    def run(self, stop: threading.Event, once: bool = False) -> None:
        """Sample, decide and send until ``stop`` is set (with ``once``: until the first host and
        task windows have closed and what they decided has been handed to the registry)."""
        start_s = self._clock()
        t = self._timings
        host = WindowSchedule(
            start_s, t.host_interval_s, slots_per_window(t.host_interval_s, t.host_window_s)
        )
        tasks = WindowSchedule(
            start_s, t.task_interval_s, slots_per_window(t.task_interval_s, t.task_window_s)
        )
        self._prime(start_s)
        while not stop.is_set():
            now_s = self._clock()
            if host.due(now_s):
                self._sample_host(now_s)
                if host.advance(now_s):
                    self._close_host_window()
            if self._tasks_sampler is not None and tasks.due(now_s):
                self._sample_tasks()
                if tasks.advance(now_s):
                    self._close_task_window()
            self.flush(now_s)
            if once and host.windows >= 1 and (self._tasks_sampler is None or tasks.windows >= 1):
                return
            wake_s = host.next_due_s
            if self._tasks_sampler is not None:
                wake_s = min(wake_s, tasks.next_due_s)
            if self._has_work():
                wake_s = min(wake_s, max(self._retry_at_s, now_s))
            stop.wait(max(0.0, wake_s - self._clock()))

    def _prime(self, now_s: float) -> None:
        """Read every counter once so the first sample measures the first interval."""
        try:
            self._capacity = self._host_source.capacity()
            self._host_source.sample()
        except GreenSwarmError as exc:
            log.warning("host source: %s", exc)
        if self._power is not None:
            self._power.read_power_w(now_s)
        if self._tasks_sampler is not None:
            self._sample_tasks()

    def _sample_host(self, now_s: float) -> None:
        try:
            sample = self._host_source.sample()
            if self._capacity is None:
                self._capacity = self._host_source.capacity()
        except GreenSwarmError as exc:
            if not self._source_failing:
                log.warning("host source failing: %s (will keep trying)", exc)
            self._source_failing = True
            return
        if self._source_failing:
            log.info("host source readable again")
            self._source_failing = False
        power = self._power.read_power_w(now_s) if self._power is not None else None
        if sample is None:
            return
        if power is not None:
            sample = replace(sample, power_w=power)
        self.counters.host_samples += 1
        self._latest_host = sample
        self._host_window.append(sample)

    def _sample_tasks(self) -> None:
        assert self._tasks_sampler is not None
        try:
            samples = self._tasks_sampler.sample()
        except GreenSwarmError as exc:
            if not self._docker_failing:
                log.warning("task sampling failing: %s (will keep trying)", exc)
            self._docker_failing = True
            return
        if self._docker_failing:
            log.info("task sampling works again")
            self._docker_failing = False
        self.counters.task_samples += 1
        for task_id, sample in samples.items():
            self._task_window.setdefault(task_id, []).append(sample)

    def _close_host_window(self) -> None:
        window, self._host_window = self._host_window, []
        mean = average(window)
        if mean is None:
            log.debug("host window closed without samples")
            return
        self.counters.host_windows += 1
        at = self._wall_clock()
        self.load.add(at, mean)
        decision = self.host.window_closed(mean, at, self.load.windows(at))
        log.debug("host window: cpu %.3f memory %.3f -> send %s", mean.cpu_util,
                  mean.memory_util, [r.value for r in decision.resources] or "nothing")

    def _close_task_window(self) -> None:
        window, self._task_window = self._task_window, {}
        means = {task_id: m for task_id, samples in window.items()
                 if (m := average(samples)) is not None}
        self.counters.task_windows += 1
        batch = self.tasks.window_closed(means, self._clock())
        log.debug("task window: %d tasks, %d to send", len(means), len(batch.tasks))

    # --- sending -----------------------------------------------------------------------------

    def _has_work(self) -> bool:
        return (
            (not self.registered and self._latest_host is not None)
            or self.host.pending is not None
            or self.tasks.pending is not None
        )

    def flush(self, now_s: float) -> None:
        """Register if needed, then send what is pending, unless backing off."""
        if not self._has_work() or now_s < self._retry_at_s:
            return
        try:
            if not self.registered:
                self._register()
            if self.host.pending is not None:
                self._send_host(self.host.pending)
            if self.tasks.pending is not None:
                self._send_tasks(self.tasks.pending)
        except GreenSwarmError as exc:
            self._failed(now_s, exc)
            return
        if self._outage:
            log.info("registry reachable again")
        self._outage = False
        self._attempt = 0

    def _failed(self, now_s: float, exc: GreenSwarmError) -> None:
        self.counters.send_failures += 1
        delay_s = self._backoff.delay_s(self._attempt, self._rng.random())
        self._attempt += 1
        self._retry_at_s = now_s + delay_s
        level = logging.DEBUG if self._outage else logging.WARNING
        log.log(level, "registry: %s; retrying in %.1f s (only the latest values are kept)",
                exc, delay_s)
        self._outage = True

    def _register(self) -> None:
        latest = self._latest_host
        if latest is None:
            return
        if self._capacity is None:
            self._capacity = self._host_source.capacity()
        registration = HostRegistration(
            host_id=self.identity.host_id,
            address=self.identity.address,
            cpu_capacity_shares=self._capacity.cpu_shares,
            memory_capacity_bytes=self._capacity.memory_bytes,
            cpu_util=latest.cpu_util,
            memory_util=latest.memory_util,
            measured_at=self._wall_clock(),
        )
        try:
            created = self._registry.register_host(registration)
        except ValidationError as exc:
            log.error("the registry refused our registration: %s", exc)
            raise
        self.registered = True
        self.counters.registrations += 1
        self.host.registered(latest.cpu_util, latest.memory_util, registration.measured_at)
        log.info("host %s %s (%s, %d shares, %d bytes)", self.identity.host_id,
                 "registered" if created else "re-registered", self.identity.address,
                 self._capacity.cpu_shares, self._capacity.memory_bytes)

    def _send_host(self, update: HostUpdate) -> None:
        try:
            self._registry.update_host(self.identity.host_id, update)
        except NotFoundError:
            log.info("the registry does not know host %s: registering again",
                     self.identity.host_id)
            self.registered = False
            self._register()
            self._registry.update_host(self.identity.host_id, update)
        except ValidationError as exc:
            log.error("the registry refused a host update %s: %s (dropped)", update.payload(), exc)
            self.host.pending = None
            return
        self.host.acknowledged(update)
        self.counters.host_updates_sent += 1
        log.debug("host update sent: %s", update.payload())

    def _send_tasks(self, batch: TaskBatch) -> None:
        try:
            result = self._registry.update_tasks(self.identity.host_id, batch)
        except ValidationError as exc:
            log.error("the registry refused a task batch: %s (dropped)", exc)
            self.tasks.pending = None
            return
        self.tasks.acknowledged(batch, result.unknown)
        self.counters.task_batches_sent += 1
        log.debug("task batch sent: %d tasks (%d unknown to the registry)", len(batch.tasks),
                  len(result.unknown))
