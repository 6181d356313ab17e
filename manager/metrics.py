"""Prometheus exposition of the manager (DESIGN 11), with ``prometheus_client``.

Two kinds of series, in one registry of the manager's own (never the library's global one, so
that several managers in one process, as in the tests, do not mix):

* counters of what the manager did, fed by every outcome it carries out (:meth:`observe`):
  ``greenswarm_decisions_total{policy, pass, outcome}`` (outcome ``placed``, ``queued`` or
  ``refused``), ``greenswarm_decision_seconds`` (a histogram of the scheduler's own time),
  ``greenswarm_cuts_total``, ``greenswarm_restores_total``, ``greenswarm_kills_total{pass}``
  (``preempt`` for the qos policy's preemptions), ``greenswarm_reconcile_errors_total`` (every
  failure of one record in the reconciliation, the queue's retries or node-loss handling,
  manager/faults.py);
* gauges read from the registries at scrape time (:class:`StateCollector`): per host
  (labels ``host``, ``name``, ``region``, ``class``) its CPU and memory utilization, allocated
  CPU shares and memory, capacities, overbooking factor, task count, estimated watts (the
  energy model at its utilization and memory in use, DESIGN 7.4) and measured watts (RAPL,
  where its monitor reads it); each host's power state (DESIGN 3.15),
  ``greenswarm_host_power_state{host, name, state}`` (1 for its state, 0 for the others);
  the pending queue's length,
  its oldest wait and its lowest Q; the requests by status;
* what an operator asks first (DESIGN 11): the cluster's energy since the manager started,
  ``greenswarm_energy_kwh_total{source}`` (estimated as the hosts were switched, measured where
  hosts read RAPL, and ``estimated_all_on`` had every host stayed on; metered every sync
  interval), and per class its requests by SLO state,
  ``greenswarm_slo_requests{class, state}`` (met, missed: over; meeting, missing: active, now),
  its fulfilment ``greenswarm_slo_fulfilment_ratio{class}`` (the share that met or meets its
  objective; absent while a class has no request) and ``greenswarm_slo_objective{class}``. The
  SLO figures come from the tally the records keep as they change (manager/slo_tally.py): a
  scrape reads a few counters, never a request's history.

A scrape that cannot read Redis yields the counters and ``greenswarm_up 0`` rather than an
error, so Prometheus keeps the series it can.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Iterable, Iterator

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from domain.errors import GreenSwarmError
from domain.lifecycle import RequestStatus
from domain.model import HostView
from domain.pending import PendingEntry
from domain.power import PowerState
from manager.power import PowerView
from manager.slo_tally import ClassFulfilment
from scheduler.service import Outcome

log = logging.getLogger(__name__)
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
# decisions take 0.05-1 ms in memory and about 1 ms with Redis (DESIGN 8)
DECISION_BUCKETS_S = (0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.1, 1.0)

HostsReader = Callable[[], Iterable[HostView]]
PendingReader = Callable[[], list[PendingEntry]]
StatusCounter = Callable[[], dict[RequestStatus, int]]
SloReader = Callable[[float], list[ClassFulfilment]]


class StateCollector(Collector):
    """The gauges, read from the registries on every scrape."""

    def __init__(self, hosts: HostsReader, names: Callable[[str], str], pending: PendingReader,
                 statuses: StatusCounter, clock: Callable[[], float], power: PowerView,
                 slo: SloReader | None = None) -> None:
        self._hosts, self._names, self._pending, self._statuses = hosts, names, pending, statuses
        self._clock, self._power, self._slo = clock, power, slo

    def collect(self) -> Iterator[Metric]:
        up = GaugeMetricFamily("greenswarm_up", "1 when the registries could be read")
        try:
            families = list(self._families())
        except GreenSwarmError as exc:
            log.warning("metrics: cannot read the registries: %s", exc)
            up.add_metric([], 0.0)
            yield up
            return
        up.add_metric([], 1.0)
        yield up
        yield from families

    def _families(self) -> Iterator[Metric]:
        labels = ["host", "name", "region", "class"]

        def gauge(name: str, doc: str) -> GaugeMetricFamily:
            return GaugeMetricFamily(f"greenswarm_host_{name}", doc, labels=labels)

        g = {
            "cpu": gauge("cpu_utilization", "CPU utilization the monitor reported (0-1)"),
            "mem": gauge("memory_utilization", "memory utilization the monitor reported (0-1)"),
            "cpu_alloc": gauge("cpu_allocated_shares", "CPU shares booked"),
            "mem_alloc": gauge("memory_allocated_bytes", "memory booked"),
            "cpu_cap": gauge("cpu_capacity_shares", "CPU capacity (1024 per core)"),
            "mem_cap": gauge("memory_capacity_bytes", "memory capacity"),
            "of": gauge("overbooking_factor", "booked over capacity, the larger of CPU, memory"),
            "tasks": gauge("tasks", "tasks booked"),
            "watts": gauge("power_estimated_watts", "the energy model's estimate (DESIGN 7.4)"),
            "measured": gauge("power_measured_watts", "RAPL, where the host's monitor reads it"),
        }
        now = self._clock()
        hosts = list(self._hosts())
        powers = self._power.hosts(hosts, now)
        for host in hosts:
            key = [host.id, self._names(host.id), host.region.value,
                   str(host.host_class) if host.host_class is not None else "empty"]
            power = powers[host.id]
            if power.measured_w is not None:
                g["measured"].add_metric(key, power.measured_w)
            for name, value in (
                ("cpu", host.cpu_util), ("mem", host.memory_util),
                ("cpu_alloc", host.cpu_allocated), ("mem_alloc", host.memory_allocated),
                ("cpu_cap", host.cpu_capacity), ("mem_cap", host.memory_capacity),
                ("of", host.overbooking_factor), ("tasks", host.task_count),
                ("watts", power.estimated_w),
            ):
                g[name].add_metric(key, float(value))
        yield from g.values()
        yield self._power_states(hosts)
        entries = self._pending()
        length = GaugeMetricFamily("greenswarm_queue_length", "requests in the pending queue")
        length.add_metric([], float(len(entries)))
        oldest = GaugeMetricFamily("greenswarm_queue_oldest_wait_seconds",
                                   "how long the longest-waiting request has waited (0: none)")
        oldest.add_metric([], max((now - e.enqueued_at for e in entries), default=0.0))
        lowest = GaugeMetricFamily("greenswarm_queue_lowest_q_seconds",
                                   "the most urgent waiting request's Q (DESIGN 3.10); absent "
                                   "when the queue is empty")
        if entries:
            # an entry's deadline is when its Q reaches 0, as the queue orders it
            lowest.add_metric([], min(e.deadline for e in entries) - now)
        yield from (length, oldest, lowest)
        requests = GaugeMetricFamily("greenswarm_requests", "request records by status",
                                     labels=["status"])
        counts = self._statuses()
        for status in RequestStatus:
            requests.add_metric([status.value], float(counts.get(status, 0)))
        yield requests
        yield from self._first_asked(now)

    def _power_states(self, hosts: list[HostView]) -> Metric:
        """Each host's power state (DESIGN 3.15): 1 for the state it is in, 0 for the others
        (every host on without the power manager)."""
        states = GaugeMetricFamily("greenswarm_host_power_state",
                                   "1 for the host's power state (on, shutting-down, off, "
                                   "booting), 0 for the others", labels=["host", "name", "state"])
        state_of = self._power.state_of
        for host in hosts:
            now_in = PowerState.ON if state_of is None else state_of(host.id)
            for state in PowerState:
                states.add_metric([host.id, self._names(host.id), state.value],
                                  1.0 if state is now_in else 0.0)
        return states

    def _first_asked(self, now: float) -> Iterator[Metric]:
        """The cluster's kWh and each class's SLO fulfilment (DESIGN 11)."""
        energy = CounterMetricFamily("greenswarm_energy_kwh",
                                     "the cluster's energy since the manager started (kWh), "
                                     "as its hosts were switched",
                                     labels=["source"])
        energy.add_metric(["estimated"], self._power.energy.estimated_kwh)
        energy.add_metric(["measured"], self._power.energy.measured_kwh)
        # what the hosts would have drawn had none been switched off (DESIGN 3.15)
        energy.add_metric(["estimated_all_on"], self._power.energy_all_on.estimated_kwh)
        yield energy
        if self._slo is None:
            return
        states = GaugeMetricFamily("greenswarm_slo_requests",
                                   "requests by SLO state: met, missed (over), meeting, missing "
                                   "(active, now)", labels=["class", "state"])
        share = GaugeMetricFamily("greenswarm_slo_fulfilment_ratio",
                                  "the share of a class's requests that met or meet their "
                                  "objective (DESIGN 3.10)", labels=["class"])
        objective = GaugeMetricFamily("greenswarm_slo_objective",
                                      "the availability objective of the class", labels=["class"])
        for row in self._slo(now):
            cls = str(row.cls)
            for state, value in (("met", row.met), ("missed", row.missed),
                                 ("meeting", row.meeting), ("missing", row.missing)):
                states.add_metric([cls, state], float(value))
            if row.fulfilment is not None:
                share.add_metric([cls], row.fulfilment)
            objective.add_metric([cls], row.objective)
        yield from (states, share, objective)


class ManagerMetrics:
    """The manager's registry: its counters, and the collector of its state."""

    def __init__(self, state: StateCollector | None = None) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        r = self.registry
        self.decisions = Counter("greenswarm_decisions", "scheduling decisions",
                                 ["policy", "pass", "outcome"], registry=r)
        self.decision_seconds = Histogram("greenswarm_decision_seconds",
                                          "the scheduler's time per decision",
                                          buckets=DECISION_BUCKETS_S, registry=r)
        self.cuts = Counter("greenswarm_cuts", "tasks cut to make room", registry=r)
        self.restores = Counter("greenswarm_restores", "cuts given back (DESIGN 3.8)",
                                registry=r)
        self.kills = Counter("greenswarm_kills",
                             "tasks taken off a host to make room (pass preempt: qos)",
                             ["pass"], registry=r)
        self.reconcile_errors = Counter("greenswarm_reconcile_errors",
                                        "records that failed on their own in the "
                                        "reconciliation, queue retries or node-loss handling "
                                        "(each was skipped; the health check lists them)",
                                        registry=r)
        self.leader = Gauge("greenswarm_manager_leader",
                            "1 while this manager holds the lease and schedules, 0 on a "
                            "standby (DESIGN 13)", registry=r)
        self.suspensions = Counter("greenswarm_suspensions",
                                   "tasks paused on their hosts to make room (DESIGN 3.14)",
                                   ["pass"], registry=r)
        self.resumes = Counter("greenswarm_resumes", "paused tasks running again (DESIGN 3.14)",
                               registry=r)
        self.admission_refusals = Counter(
            "greenswarm_admission_refusals",
            "new requests not admitted (DESIGN 3.13), by class and the resource short",
            ["class", "resource"], registry=r)
        self.moves = Counter("greenswarm_consolidation_moves",
                             "services moved by consolidation (DESIGN 3.15): started, moved "
                             "(running on the new host), undone", ["result"], registry=r)
        for result in ("started", "moved", "undone"):
            self.moves.labels(result)  # each result shown from 0
        if state is not None:
            r.register(state)

    def observe(self, outcome: Outcome) -> None:
        """Count what one outcome decided (a retry that was not decided counts nothing)."""
        queued = {entry.request.id for entry in outcome.queued}
        for decision in outcome.decisions:
            if decision.decision_ms is None:
                continue
            pass_ = decision.pass_.value if decision.pass_ is not None else ""
            result = ("placed" if decision.placed
                      else "queued" if decision.request.id in queued else "refused")
            self.decisions.labels(decision.policy or "", pass_, result).inc()
            if math.isfinite(decision.decision_ms):
                self.decision_seconds.observe(decision.decision_ms / 1000)
            if decision.placed:
                self.cuts.inc(len(decision.cuts))
                if decision.kills:
                    self.kills.labels(pass_).inc(len(decision.kills))
                if decision.suspends:
                    self.suspensions.labels(pass_).inc(len(decision.suspends))
        if outcome.restored:
            self.restores.inc(len(outcome.restored))
        if outcome.resumed:
            self.resumes.inc(len(outcome.resumed))

    def moved(self, result: str) -> None:
        """A consolidation move ``started``, ``moved`` or ``undone``."""
        self.moves.labels(result).inc()

    def refused_at_admission(self, cls: int, resource: str) -> None:
        self.admission_refusals.labels(str(cls), resource).inc()

    def exposition(self) -> bytes:
        return generate_latest(self.registry)
