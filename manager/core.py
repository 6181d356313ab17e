"""The live service: requests in, the scheduler's decisions carried out on a real Swarm.

``Manager`` is the composition root: it builds the parts, starts and stops them, and runs the
timer that posts the periodic work (reconciliation, the queue's retries, power, history) to the
scheduling loop. Everything that changes the books runs on that one loop. The parts, each its
own module, are what the Flask blueprints call:

=========================  =======================================================================
 ``submissions``            POST /requests: read, recorded, decided here or offered to a peer
                            (manager/submit.py)
 ``offloading``             the forward to a peer, and stopping there (manager/offload.py)
 ``endings``                a request stopped, ended by its container, killed (manager/endings.py)
 ``deployments``            several requests placed all or nothing (manager/deployments.py)
 ``views``, ``health``      the JSON answers about requests, hosts, peers; GET /healthz
                            (manager/views.py)
=========================  =======================================================================

A decision is applied to the registries first (by the Scheduler), then carried out
(manager/effects.py); the periodic reconciliation with the Swarm (manager/reconcile.py) brings
nodes and services in line. The registries' events reach the parts through ``ManagerEvents``.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from domain.errors import DamagedRecordError, GreenSwarmError
from domain.lifecycle import FINAL, TaskEnd
from domain.model import HostSpec, HostView, Task
from domain.power import PowerState
from host_registry.power import RedisPowerReadings
from host_registry.redis_store import RedisStore, redis_errors
from manager.agents import AgentClient
from manager.checkpoints import CheckpointDirs
from manager.deployments import Deployments
from manager.effects import Effects
from manager.endings import Endings
from manager.faults import RecordFaults
from manager.history import History, build_sample
from manager.leadership import Leadership, LeaderView, holder_id, lease_on
from manager.loop import SchedulingLoop
from manager.metrics import ManagerMetrics, StateCollector
from manager.moving import CONSOLIDATING, LiveConsolidation, MoveParts
from manager.nodes import NodeNames
from manager.offload import Offloading
from manager.peering import Peering
from manager.power import PowerView
from manager.power_backends import BackendKind, DockerNodes, make_backend
from manager.reconcile import SwarmSync
from manager.records import RequestRecords
from manager.settings import ManagerSettings
from manager.slo_tally import ClassFulfilment, SloTally
from manager.submit import Submissions
from manager.swarm import SwarmBackend
from manager.switching import PowerControl, PowerParts, PowerStates
from manager.views import Health, Views
from scheduler.consolidation import Consolidator
from scheduler.plugin import PlacedBy
from scheduler.service import Scheduler

log = logging.getLogger(__name__)


@dataclass
class _State:
    retry_queued: bool = False
    prepared: bool = False  # the records migrated and their tally kept (at the first lead)
    freed: set[str] = field(default_factory=set)  # hosts to give cuts back on at the retry


class Manager:
    def __init__(
        self,
        settings: ManagerSettings,
        store: RedisStore,
        records: RequestRecords,
        backend: SwarmBackend,
        agents: AgentClient,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.settings = settings
        self.store = store
        self.records = records
        self.backend = backend
        self.agents = agents
        self.clock = clock
        records.replicate(settings.redis_wait_replicas)  # answered means on a replica
        plugin = settings.plugin
        by_swarm = plugin.placed_by is PlacedBy.SWARM
        slo = settings.slo_table
        self.scheduler = Scheduler(store, plugin.make(settings.options, settings.seed),
                                   admits_to_queue=plugin.admits_to_queue,
                                   freshness=settings.cluster.freshness(),
                                   slo=slo, alpha_s=settings.allocation_s,
                                   admission=settings.admission)
        self.loop = SchedulingLoop()
        self.power = PowerView(settings.power_model, store.sibling(RedisPowerReadings),
                               clock(), stale_after_s=settings.cluster.stale_after_s)
        self.node_names = store.sibling(NodeNames)  # kept for good; metrics name hosts by it
        self.slo_tally = store.sibling(
            lambda connection, prefix: SloTally(connection, prefix, slo, settings.allocation_s))
        self.peering = Peering(settings.federation_name, settings.peers(),
                               refresh_s=settings.peer_refresh_s,
                               timeout_s=settings.peer_timeout_s, clock=clock)
        self.views = Views(settings, store, records, self.scheduler, self.node_names,
                           self.peering, self.loop, clock)
        self.metrics = ManagerMetrics(StateCollector(
            store.all_hosts, self.views.host_name, store.pending, records.counts, clock,
            self.power, self.slo_classes))
        self.history = store.sibling(
            lambda connection, prefix: History(connection, prefix, settings.history_interval_s,
                                               settings.history_keep_s))
        # a record failing outside a pass is listed until it has not failed for two retries
        self.faults = RecordFaults(clock, self.metrics.reconcile_errors.inc,
                                   window_s=2 * max(settings.sync_interval_s,
                                                    settings.retry_interval_s) + 1.0)
        # under the registries' prefix: managers of other registries sharing the storage
        # never sweep each other's directories
        self.checkpoints = CheckpointDirs(f"{settings.checkpoint_dir}/{settings.redis_prefix}") \
            if settings.checkpoint_dir else None
        self.effects = Effects(store, records, backend, agents, self.room_freed, self.faults,
                               observe=self.metrics.observe, checkpoints=self.checkpoints)
        self.swarm = SwarmSync(settings, store, records, backend, self.scheduler, self.effects,
                               clock, self.queue_retry, by_swarm=by_swarm,
                               faults=self.faults, names=self.node_names)
        self.health = Health(settings, store, backend, self.swarm,
                             self._leader_view)
        self.offloading = Offloading(settings, records, self.loop, self.peering)
        self.submissions = Submissions(settings, store, records, self.scheduler, self.swarm,
                                       self.effects, self.loop, self.peering, self.offloading,
                                       clock, by_swarm=by_swarm,
                                       refused_at_admission=self.metrics.refused_at_admission)
        self.endings = Endings(store, records, self.scheduler, backend, self.swarm,
                               self.effects, self.loop, self.offloading, self.faults,
                               clock)
        self.deployments = Deployments(settings, store, records, self.loop, self.peering,
                                       self.submissions, self.offloading, self.endings,
                                       self.views, self.faults)
        self.switching = self._power_control() if settings.power_settings.enabled else None
        self.consolidation = (self._consolidation(self.switching)
                              if self.switching is not None else None)
        self._state = _State()
        self._stop = threading.Event()
        self._timer = threading.Thread(target=self._tick, name="manager-timer", daemon=True)
        lease = lease_on(store, holder_id(), settings.manager_url, settings.leader_lease_s,
                         settings.leader_renew_s, settings.redis_wait_replicas)
        self.leadership = Leadership(lease, settings.leader_renew_s, settings.leader_lease_s,
                                     self._lead, self._follow)

    def _power_control(self) -> PowerControl:
        """The power manager at work (DESIGN 3.15): its backend, closed hosts, the scheduler's
        gate, the reconciliation's exemption and the power view's states."""
        settings = self.settings
        backend_settings = settings.power_backend_settings
        nodes = (DockerNodes(settings.docker_url) if backend_settings.backend is BackendKind.LAB
                 else None)
        control = PowerControl(
            settings.power_settings, make_backend(backend_settings, nodes=nodes),
            settings.power_model,
            PowerParts(self.store, self.scheduler, self.records, self.loop, self.clock,
                       self.queue_retry, self.swarm.host_name, self.swarm.close_hosts,
                       lambda host_id: host_id in self.swarm.ready_ids,
                       lambda: self.swarm.passes),
            self.store.sibling(PowerStates))
        control.ready_timeout_s = backend_settings.ready_timeout_s
        self.scheduler.power = control
        self.swarm.power_exempt = control.exempt
        self.power.state_of = control.state_of
        self.power.standby_w = settings.power_settings.standby_w
        return control

    def _consolidation(self, control: PowerControl) -> LiveConsolidation | None:
        """Consolidation (DESIGN 3.15): the energy and qos policies with the power manager, its
        ``consolidate`` on (``GREENSWARM_POWER_CONSOLIDATE``, default on) and a backend that
        switches (with ``advise`` or ``none`` no host is switched off, so none is emptied)."""
        settings = self.settings
        if (not settings.power_settings.consolidate or settings.policy not in CONSOLIDATING
                or not control.backend.switches):
            return None
        scheduler = self.scheduler
        phi_s = float(getattr(scheduler.policy, "safety_margin_s", 10.0))
        moving = LiveConsolidation(
            Consolidator(settings.power_settings, scheduler.slo, scheduler.alpha_s, phi_s),
            MoveParts(self.store, self.records, self.backend, self.clock, self.swarm.host_name,
                      lambda: control.on_hosts() - self.swarm.paused, control.excluded,
                      self.swarm.close_hosts))
        moving.counted = self.metrics.moved
        self.swarm.moving = moving.moving
        self.swarm.emptying = moving.emptying
        control.keep_on = moving.emptying
        return moving

    # -- life cycle -------------------------------------------------------------------------

    def start(self) -> None:
        """Start the loop and the timer, then seek the lease: the leader reconciles with the
        Swarm at once and then on the timer (DESIGN 13); a standby only serves reads."""
        self.loop.start()
        self._timer.start()
        self.leadership.start()  # a lone manager leads at once: _lead runs before this returns
        if self.leadership.is_leader:  # records migrated before anything is served, as ever;
            # a failure here stops the start, as it always did
            self.loop.call(lambda: self._take_over(strict=True), timeout_s=3600.0)

    def stop(self) -> None:
        self._stop.set()
        self.leadership.stop()  # gives the lease up: a standby takes over without waiting
        self.peering.stop()
        self.loop.stop()

    # -- leadership (DESIGN 13) -------------------------------------------------------------

    def _lead(self, token: int) -> None:
        """This manager now holds the lease: its writes carry the token; it takes over the
        books (records migrated, a reconciliation, the queue) on the loop. The store's idle
        connections are dropped first: the lease may have found a new primary that they do
        not know of."""
        self.store.forget_idle_connections()
        self.store.fence(token)
        self.records.fence(token)
        if self.switching is not None:
            self.switching.states.fence(token)
        self.metrics.leader.set(1)
        if not self.leadership.starting:  # at start, start() waits for it instead
            self.loop.post(self._take_over)
        self.peering.active = True
        self.peering.start()

    def _follow(self) -> None:
        """No longer the leader: the periodic work stops here. The store keeps the old token,
        so a write already under way is refused by Redis rather than double-booking."""
        self.metrics.leader.set(0)
        self.peering.active = False

    def _leader_view(self) -> LeaderView | None:
        """None for a manager that takes part in no election (its parts driven by hand)."""
        return self.leadership.view if self.leadership.elected else None

    def _take_over(self, strict: bool = False) -> None:
        """The books become this manager's: records migrated and the SLO tally kept (before
        any write of its own; retried by the timer until done), a reconciliation, the queue."""
        if not self._state.prepared:
            try:
                self._prepare_records()
            except GreenSwarmError as exc:
                if strict:
                    raise
                log.warning("leadership: the records could not be prepared (again soon): %s",
                            exc)
                return
            self._state.prepared = True
        if self.switching is not None:  # as the last leader left them, at every take-over
            self.switching.load()
        if self.consolidation is not None:  # before the reconciliation: it leaves them alone
            try:
                self.consolidation.resume()
            except GreenSwarmError as exc:
                log.warning("consolidation: the moves under way not taken over: %s", exc)
        self._sync_logged()
        self.queue_retry()

    def _tick(self) -> None:
        next_sync = time.monotonic() + self.settings.sync_interval_s  # _take_over does one
        next_retry = 0.0
        while not self._stop.wait(0.5):
            if not self.leadership.is_leader:
                continue  # a standby's books are the leader's to keep
            now = time.monotonic()
            if not self._state.prepared:  # the records failed at the take-over: again
                if now >= next_sync:
                    next_sync = now + self.settings.sync_interval_s
                    self.loop.post(self._take_over)
                continue
            if now >= next_sync:
                next_sync = now + self.settings.sync_interval_s
                self.loop.post(self._sync_logged)
                if self.switching is not None:
                    self.loop.post(self.power_tick)
                self._meter_power()
            if now >= next_retry:
                next_retry = now + self.settings.retry_interval_s
                self.queue_retry()
            if self.history.due(now):
                self._sample()

    def _prepare_records(self) -> None:
        """Before any write: records of an earlier version are migrated to today's form, and the
        SLO tally is kept from now on (rebuilt when it is missing or was made otherwise)."""
        done = self.records.migrate()
        if done.from_version < done.to_version:
            log.info("records migrated from schema version %d to %d: %d records, %d stream "
                     "entries rewritten, %d left unread", done.from_version, done.to_version,
                     done.records, done.stream_entries, len(done.unread))
        self.records.keep_tally(self.slo_tally)

    def slo_classes(self, now: float) -> list[ClassFulfilment]:
        """Each class's requests by SLO state at ``now`` (DESIGN 3.10, 11), from the tally."""
        with redis_errors():
            return self.slo_tally.classes(now)

    def _meter_power(self) -> None:
        """The cluster's power now, into its kWh so far (every sync interval)."""
        try:
            self.power.meter(self.clock(), self.store.all_hosts())
        except GreenSwarmError as exc:
            log.warning("power: cannot read the hosts: %s", exc)

    def power_state_json(self, host_id: str) -> dict[str, Any]:
        """A host's power state for ``GET /hosts`` (always on without the power manager)."""
        if self.switching is None:
            return {"state": PowerState.ON.value, "since": None}
        return self.switching.host_json(host_id)

    def power_tick(self) -> None:
        """The power manager's round (after each reconciliation)."""
        assert self.switching is not None
        try:
            self.switching.tick()
        except GreenSwarmError as exc:
            log.warning("power: the round failed: %s", exc)
        if self.consolidation is not None:
            try:
                self.consolidation.tick()
            except GreenSwarmError as exc:
                log.warning("consolidation: the round failed: %s", exc)

    def _sample(self) -> None:
        """One sample of the cluster into the manager's history (DESIGN 11)."""
        try:
            now, hosts = self.clock(), list(self.store.all_hosts())
            self.history.record(build_sample(
                now, hosts, self.power.hosts(hosts, now), self.power.energy,
                len(self.store.pending()), self.slo_classes(now)))
        except GreenSwarmError as exc:
            log.warning("history: no sample: %s", exc)

    def _sync_logged(self) -> None:
        try:
            self.swarm.sync()
        except GreenSwarmError as exc:
            self.swarm.pass_error = str(exc)
            log.warning("reconciliation with the Swarm failed: %s", exc)
        else:
            self.swarm.pass_error = None
        if self.checkpoints is not None:
            self.checkpoints.sweep(self._ended)

    def _ended(self, request_id: str) -> bool:
        """Whether a request is over (its checkpoint directory can go): no record, or final.
        Read from the record's status alone (not its spec and history, on every sync pass for
        every directory). A damaged record (no status, or one that is no status) keeps its
        directory and is listed as failing: one bad record never stops the sweep (DESIGN 9)."""
        try:
            status = self.records.status_of(request_id)
            if status is None and self.records.exists(request_id):
                raise DamagedRecordError(f"request {request_id!r}: its record has no status")
        except DamagedRecordError as exc:
            self.faults.fail("request", request_id, f"{exc}; its checkpoint directory is kept")
            return False
        except GreenSwarmError:
            return False  # not a request's name, or Redis away: kept until it can be told
        return status is None or status in FINAL

    # -- the pending queue's retries ------------------------------------------------------------

    def queue_retry(self) -> None:
        """Retry the pending queue soon (at most one retry waits on the loop)."""
        if not self._state.retry_queued:
            self._state.retry_queued = True
            self.loop.post(self._retry)

    def room_freed(self, host_id: str) -> None:
        """A booking was undone outside the scheduler (a service that could not start): the
        next retry also gives cuts back on its host (DESIGN 3.8)."""
        self._state.freed.add(host_id)
        self.queue_retry()

    def _retry(self) -> None:
        self._state.retry_queued = False
        freed, self._state.freed = self._state.freed, set()
        try:
            outcome = self.scheduler.retry_pending(self.clock(), freed=freed)
        except GreenSwarmError as exc:  # Redis: the timer retries soon
            log.warning("retrying the pending queue failed: %s", exc)
            return
        self.effects.carry_out(outcome)  # each request on its own


class ManagerEvents:
    """The registries' events (RegistryEvents), routed to the manager's parts and its loop."""

    def __init__(self, manager: Manager) -> None:
        self.manager = manager

    def admit_host(self, spec: HostSpec) -> None:
        self.manager.swarm.admit_host(spec)

    def host_changed(self, host: HostView) -> None:
        self.manager.queue_retry()

    def task_resized(self, task: Task) -> None:
        effects = self.manager.effects
        self.manager.loop.call(lambda: effects.resized(task))

    def host_removed(self, host_id: str) -> None:
        swarm = self.manager.swarm
        self.manager.loop.call(lambda: swarm.host_lost(host_id, "was removed from the registry"))

    def task_ended(self, end: TaskEnd) -> bool:
        return self.manager.endings.task_ended(end)

    def kill(self, task_id: str) -> None:
        self.manager.endings.kill(task_id)
