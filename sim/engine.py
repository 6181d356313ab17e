"""The discrete-event simulator (DESIGN 7.2): the real scheduler, a modelled cluster.

What is real: every decision is taken by ``scheduler.service.Scheduler`` with the policy
of ``make_policy`` on a ``host_registry.memory.MemoryStore``, exactly as in the live manager.
The simulator only plays the world around it:

* arrivals from the trace; a request becomes ``Request(id, class, type, cpu, memory)`` and goes
  through ``Scheduler.submit`` (refused ones are failed allocations, never queued: the thesis
  behaviour; with ``SimConfig.queue_new`` they ask to queue, wait in the pending queue and
  count as successful once placed); the scheduler reschedules kill victims itself and queues
  those that find no host;
* tasks: every placed decision starts a run on its host. A job has ``makespan_s`` seconds of
  work at full speed and restarts from the beginning after a kill (the thesis behaviour), or
  from its last checkpoint; a service runs until its runs add up to ``makespan_s`` seconds of
  wall time, then its client stops it; a paused run makes no progress (sim/preempt.py);
* usage: each run follows its workload's profile (sim/profiles.py): it wants a
  fraction of its original allocated cores and holds a fraction of its original memory;
* CPU contention (sim/contention.py): a host's cores are shared by CPU shares,
  work-conserving; a job progresses at served / wanted (at most 1), so contended jobs take
  longer than their makespan;
* memory: the limit of a container is its booked memory. A cut lowers it like the live agent:
  never below the current use plus a margin (the rest is counted as a cut not fully applied).
  A task whose use exceeds its limit, and the largest task of a host whose tasks use more than
  its memory, are killed for lack of memory (counted as OOM kills, never rescheduled);
* the monitor (sim/monitor_model.py): hosts and tasks are averaged over 30 s / 45 s
  windows and pushed only past the 10 p.p. threshold, so decisions see stale utilization;
* metrics: every change of a host's true state goes to ``MetricsRecorder.on_host_state``.

Time is the trace's clock in seconds. Events at the same instant run in a fixed order (task
ends, usage steps, task windows, host windows, then arrivals) and by insertion otherwise, so
a run is deterministic for a trace, profiles and seed (decision times aside: they are wall
clock).
"""

from __future__ import annotations

import bisect
import gc
import heapq
import itertools
import math
import random
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import replace
from fractions import Fraction
from typing import Any

from domain.decision import Decision
from domain.energy import PowerModel
from domain.errors import ValidationError
from domain.lifecycle import EndStatus
from domain.model import Request
from federation.offload import advertise, choose_peer, should_offload
from host_registry.memory import MemoryStore
from measure.recorder import Cut, MetricsRecorder
from measure.results import HostSummary
from monitor.core import UtilSample
from scheduler import registry
from scheduler.plugin import LoadAware, RoundPolicy
from scheduler.service import Outcome, Scheduler
from sim import preempt
from sim.config import ClusterStats, FederationMode, SimConfig, SimResult, SimStats
from sim.contention import share_cpu
from sim.model import Host, Run, serve
from sim.monitor_model import (
    WindowAccumulator,
    close_task_window,
)
from sim.profiles import Profiles
from workloads.trace import TraceHeader, TraceRequest

# A job whose work left is below this is done (float residue of rate x time).
_WORK_EPS_S = 1e-6

# Event kinds, in the order they run at the same instant.
_END = 0  # a host's next job completion
_STOP = 1  # a service's client stops it
_STEP = 2  # a run moves to the next step of its usage profile
_TASK_WINDOW = 3  # a host's task monitor closes a 45 s window
_HOST_WINDOW = 4  # a host's monitor closes a 30 s window
_ROUND = 5  # a round policy's watchdog: a round over the queue
_INF = math.inf
# The run pauses Python's cyclic garbage collector and, every this many events, collects what
# was allocated since the last time and freezes the survivors (see Simulation.run).
_GC_EVERY_EVENTS = 500_000

ProgressCallback = Callable[[float, float], None]


class _Cluster:
    """One Swarm of the simulation (DESIGN 12): its own store and scheduler (with its own
    policy instance), its hosts, its pending requests, and its federation counters."""

    __slots__ = ("arrivals", "hosts", "name", "no_peer", "offloaded_in",
                 "offloaded_in_unplaced", "offloaded_out", "pending", "scheduler", "store")

    def __init__(self, name: str, store: MemoryStore, scheduler: Scheduler) -> None:
        self.name = name
        self.store = store
        self.scheduler = scheduler
        self.hosts: list[str] = []
        self.pending: set[str] = set()
        self.arrivals = 0
        self.offloaded_out = 0
        self.offloaded_in = 0
        self.offloaded_in_unplaced = 0
        self.no_peer = 0


class Simulation:
    """One policy over one trace. ``run()`` once; see the module docstring.

    With ``SimConfig.clusters`` the trace's hosts form several clusters, each with its own
    store and scheduler, under one clock, one world model and one recorder (so the report's
    numbers are over all clusters): a new request goes to its home cluster (round-robin in
    arrival order), and when the clusters are federated, to a peer if its home does not place
    it (federation.offload). Kill victims and waiting requests stay in their cluster."""

    def __init__(
        self,
        header: TraceHeader,
        requests: Iterable[tuple[TraceRequest, bool]],
        profiles: Profiles,
        config: SimConfig,
        *,
        progress: ProgressCallback | None = None,
    ) -> None:
        self.header = header
        self.config = config
        self.end_s = header.duration_s if config.end_s is None else config.end_s
        self.profiles = profiles
        self.progress = progress
        self._arrivals: Iterator[tuple[TraceRequest, bool]] = iter(requests)
        setup = config.clusters
        sizes = setup.sizes if setup is not None else (len(header.hosts),)
        if sum(sizes) != len(header.hosts):
            raise ValidationError("clusters", f"the clusters take {sum(sizes)} hosts, the "
                                  f"trace has {len(header.hosts)}")
        plugin = registry.plugin(config.policy, simulated=True)
        self._clusters: list[_Cluster] = []
        for index, name in enumerate(setup.names if setup is not None else ("c1",)):
            store = MemoryStore(config.classes, config.bounds)
            # each cluster its own policy instance (a random policy: its own seed)
            scheduler = Scheduler(
                store, plugin.make(config.options.get(config.policy), config.seed + index),
                skip_unchanged=config.skip_unchanged_retries,
                admits_to_queue=plugin.admits_to_queue, freshness=config.freshness,
                slo=config.slo, alpha_s=config.allocation_s, admission=config.admission,
            )
            self._clusters.append(_Cluster(name, store, scheduler))
        self._by_name = {cluster.name: cluster for cluster in self._clusters}
        self._federated = (setup is not None and len(self._clusters) > 1
                           and setup.federation is FederationMode.OFFLOAD)
        self._power = config.power_model or PowerModel.named()
        self._arrived = 0
        # the first cluster (the only one, unless config.clusters says otherwise)
        self.store = self._clusters[0].store
        self.scheduler = self._clusters[0].scheduler
        policy = self.scheduler.policy
        # A load-aware policy reads dated utilization and load windows (DESIGN 3.12).
        monitor = config.monitor
        dated = monitor.dated or (isinstance(policy, LoadAware) and policy.predicts_recent)
        if dated != monitor.dated:
            monitor = replace(monitor, dated=dated)
        self._monitor = monitor
        # New requests wait in the queue: asked for (--queue-new), or the policy's admission.
        self._queue_new = plugin.admits_to_queue if config.queue_new is None else config.queue_new
        self.recorder = MetricsRecorder.for_trace(
            config.policy, header, power_model=config.power_model,
            region_bounds=config.bounds, slo=config.slo, allocation_s=config.allocation_s,
            keep_requests=config.keep_requests,
        )
        self._heap: list[tuple[float, int, int, Any]] = []
        self._seq = 0
        self._hosts: dict[str, Host] = {}
        rng = random.Random(config.seed)
        self._cluster_of: dict[str, _Cluster] = {}
        bounds = list(itertools.accumulate(sizes))
        for index, spec in enumerate(header.hosts):
            cluster = self._clusters[bisect.bisect_right(bounds, index)]
            cluster.hosts.append(spec.id)
            self._cluster_of[spec.id] = cluster
        # What placement constraints see of a trace's host (DESIGN 4): its id, its labels.
        for cluster in self._clusters:
            cluster.scheduler.set_node_facts({spec.id: spec.facts() for spec in header.hosts
                                              if self._cluster_of[spec.id] is cluster})
        for spec in header.hosts:
            store = self._cluster_of[spec.id].store
            store.add_host(spec)
            if dated:  # registration carries the first (idle) sample
                store.update_host_load(spec.id, 0.0)
            # Monitors start at independent moments: a random phase of the host window.
            phase = rng.random() * monitor.host_window_s
            host = Host(spec.id, spec.cpu_capacity, spec.memory_capacity, phase, monitor, 0.0)
            self._hosts[spec.id] = host
            self._push(phase + monitor.host_window_s, _HOST_WINDOW, host)
            self._push(phase + monitor.task_window_s, _TASK_WINDOW, host)
        # A round policy runs a round at least every watchdog_s (DESIGN 3.11).
        self._watchdog_s = policy.watchdog_s if isinstance(policy, RoundPolicy) else 0.0
        if self._watchdog_s > 0:
            self._push(self._watchdog_s, _ROUND, None)
        self._runs: dict[str, Run] = {}
        self._requests: dict[str, TraceRequest] = {}  # placed or waiting, by id
        self._queued_new: set[str] = set()  # of those, new requests never placed yet
        self._touched: dict[str, Host] = {}
        self._dirty: dict[str, Host] = {}
        self._oom_limit: list[Run] = []
        self._events = 0
        self._decisions = 0
        self._memory_cuts = 0
        self._memory_cuts_partial = 0
        self._memory_cut_unapplied = 0
        self._oom_host = 0
        self._oom_limit_kills = 0
        self._oom_by_workload: dict[str, int] = {}
        # checkpointable requests placed so far: the progress their checkpoints saved
        # (sim/preempt.py); refused at admission (DESIGN 3.13)
        self._ckpt_saved: dict[str, float] = {}
        # services taken off their hosts: how long they ran before (sim/preempt.py)
        self._service_ran: dict[str, float] = {}
        self._refused_admission = 0
        self._host_pushes = 0
        self._host_heartbeats = 0
        self._task_pushes = 0
        self._pending_max = 0
        self._ran = False

    # ------------------------------------------------------------------ the loop

    def _push(self, t: float, kind: int, obj: Any) -> None:
        self._seq += 1
        heapq.heappush(self._heap, (t, kind, self._seq, obj))

    def run(self) -> SimResult:
        if self._ran:
            raise RuntimeError("a Simulation runs once")
        self._ran = True
        wall_start = time.perf_counter()
        # Cyclic garbage is rare here (tasks, hosts and records are freed by reference
        # counting), yet the collector's passes over the old generation, which holds every
        # record of the run, grew to a tenth of a long run's time. So the run collects only
        # what it allocated since the last pass, every _GC_EVERY_EVENTS events, and freezes
        # the survivors (gc.freeze: never traversed again until the end); memory and results
        # are the same.
        # (A caller that froze objects itself keeps them frozen: the run then only collects.)
        collecting = gc.isenabled()
        freezing = gc.get_freeze_count() == 0
        gc.disable()
        try:
            self._loop(freezing)
        finally:
            if freezing:
                gc.unfreeze()
            if collecting:
                gc.enable()
        return self._finish(time.perf_counter() - wall_start)

    def _loop(self, freezing: bool) -> None:
        end_s = self.end_s
        heap = self._heap
        arrival = next(self._arrivals, None)
        progress = self.progress
        while True:
            arrival_t = arrival[0].t_s if arrival is not None else _INF
            heap_t = heap[0][0] if heap else _INF
            if heap_t <= arrival_t:
                if heap_t > end_s:
                    break
                t, kind, _, obj = heapq.heappop(heap)
                self._dispatch(t, kind, obj)
            else:
                if arrival is None or arrival_t > end_s:
                    break
                t = arrival_t
                self._arrive(t, arrival[0], arrival[1])
                arrival = next(self._arrivals, None)
            if self._touched or self._oom_limit:  # (most events change no host)
                self._settle(t)
            if self._dirty:
                self._flush(t)
            self._events += 1
            if self.config.check_invariants:
                self.check_books()
            if progress is not None and self._events % 2000 == 0:
                progress(t, end_s)
            if self._events % _GC_EVERY_EVENTS == 0:
                gc.collect()
                if freezing:
                    gc.freeze()
        if progress is not None:
            progress(end_s, end_s)

    def _dispatch(self, t: float, kind: int, obj: Any) -> None:
        if kind == _END:
            self._on_job_end(t, obj)
        elif kind == _STOP:
            # (a stop moved by a pause, or of a paused service, is not this one)
            if obj.alive and not obj.paused and obj.stop_t == t:
                self._end_run(t, obj, EndStatus.STOPPED)
        elif kind == _STEP:
            if obj.alive:
                self._on_step(t, obj)
        elif kind == _TASK_WINDOW:
            self._on_task_window(t, obj)
        elif kind == _HOST_WINDOW:
            self._on_host_window(t, obj)
        else:
            for cluster in self._clusters:
                self._follow(cluster, cluster.scheduler.retry_pending(t), t)
            self._push(t + self._watchdog_s, _ROUND, None)

    # ------------------------------------------------------------------ requests

    def _arrive(self, t: float, request: TraceRequest, probe: bool) -> None:
        self.recorder.on_submit_request(request, t=t, probe=probe)
        self._requests[request.id] = request
        new = Request(request.id, request.request_class, request.type, request.cpu_shares,
                      request.memory_bytes, request.constraints)
        home = self._clusters[0] if len(self._clusters) == 1 else self._home()
        cluster = self._route(home, new, t) if self._federated else home
        outcome = cluster.scheduler.submit(new, t, queue=self.config.queue_new,
                                           expected_s=request.makespan_s)
        if outcome.admission is not None:  # refused at the door (DESIGN 3.13): nothing ran
            self._refused_admission += 1
            self._requests.pop(request.id, None)
            self.recorder.on_admission_refused(t, request.id)
            return
        if cluster is not home and not any(d.request.id == new.id for d in outcome.applied):
            cluster.offloaded_in_unplaced += 1
        self._follow(cluster, outcome, t, request.id)

    def _home(self) -> _Cluster:
        """The home cluster of the next arrival: round-robin in arrival order."""
        home = self._clusters[self._arrived % len(self._clusters)]
        self._arrived += 1
        home.arrivals += 1
        return home

    def _route(self, home: _Cluster, request: Request, t: float) -> _Cluster:
        """Where a new request of ``home`` is submitted, federated (DESIGN 12): at home,
        unless its home would not place it (or, by the setup, only by killing) and a peer
        advertises room; then at the cheapest such peer. Submitted exactly once."""
        setup = self.config.clusters
        assert setup is not None
        if not should_offload(home.scheduler.preview(request, t), setup.offload_when):
            return home
        adverts = [advertise(c.name, c.store, self._power,
                             wake_counts_idle=setup.wake_counts_idle)
                   for c in self._clusters if c is not home]
        peer = choose_peer(request, adverts, home=home.name)
        if peer is None:
            home.no_peer += 1
            return home
        home.offloaded_out += 1
        self._by_name[peer].offloaded_in += 1
        return self._by_name[peer]

    def _follow(
        self, cluster: _Cluster, outcome: Outcome, t: float, new_id: str | None = None
    ) -> None:
        """Mirror what ``cluster``'s scheduler applied, in its order, and tell the recorder."""
        recorder = self.recorder
        pending = cluster.pending
        queued = self._queued_new
        placed_now: set[str] = set()
        new_decided = False
        for decision in outcome.decisions:
            request_id, ms = decision.request.id, decision.decision_ms
            new_decided = new_decided or request_id == new_id
            if ms is None:  # a retry may_place turned down: tried and failed, not decided
                if request_id in queued:
                    recorder.on_queued(t, request_id)
                else:
                    recorder.on_reschedule(t, request_id, False)
                continue
            self._decisions += 1
            if decision.placed:
                self._apply(decision, t)
                cuts = self._cuts_of(decision)
                pass_name = decision.pass_ or decision.policy
                pending.discard(request_id)
                placed_now.add(request_id)
                if request_id == new_id or request_id in queued:
                    queued.discard(request_id)
                    recorder.on_decision(
                        t, request_id, decision.request.cls, decision.request.type, True,
                        decision_ms=ms, pass_name=pass_name, host_id=decision.host,
                        cuts=cuts, kills=decision.kills,
                    )
                else:
                    recorder.on_reschedule(
                        t, request_id, True, decision_ms=ms, pass_name=pass_name,
                        host_id=decision.host, cuts=cuts, kills=decision.kills,
                    )
                for victim_id in decision.suspends:  # paused instead of killed (3.14)
                    recorder.on_suspended(t, victim_id)
            elif request_id in queued or (request_id == new_id and self._queue_new):
                queued.add(request_id)  # in the queue: outcome.queued has it
                recorder.on_queued(t, request_id, decision_ms=ms)
            elif request_id == new_id:
                request = self._requests.pop(request_id)
                recorder.on_decision(t, request_id, request.request_class, request.type,
                                     False, decision_ms=ms)
            else:
                recorder.on_reschedule(t, request_id, False, decision_ms=ms)
        # A round may queue a request and place it, or place one and preempt it back into
        # the queue, within one outcome: the store says where each ended up.
        for request_id in {*(entry.request.id for entry in outcome.queued), *placed_now}:
            if cluster.store.is_pending(request_id):
                pending.add(request_id)
            else:
                pending.discard(request_id)
        if (new_id is not None and not new_decided and new_id in pending
                and new_id not in queued):
            # queued by a round policy without being tried in the round (more urgent requests
            # came first): a new request waiting for its first place all the same
            queued.add(new_id)
            recorder.on_queued(t, new_id)
        waiting = (len(pending) if len(self._clusters) == 1
                   else sum(len(c.pending) for c in self._clusters))
        self._pending_max = max(self._pending_max, waiting)
        for task in outcome.resumed:  # after every decision, as the scheduler made them
            self._resume(task.id, task.cpu_shares, t)
        for restore in outcome.restored:  # after every decision, as the scheduler made them
            self._restore(self._runs[restore.task], restore.cpu_shares, restore.memory)
            recorder.on_restore(t, restore.task, restore.cpu_shares, restore.memory)

    @staticmethod
    def _cuts_of(decision: Decision) -> list[Cut]:
        cuts = [Cut(c.task, c.cpu_freed, c.memory_freed) for c in decision.cuts]
        if decision.cut_received > Fraction(0):
            request = decision.request
            cuts.append(Cut(request.id, request.cpu_shares - decision.cpu_shares,
                            request.memory - decision.memory))
        return cuts

    # ------------------------------------------------------------------ applying decisions

    def _apply(self, decision: Decision, t: float) -> None:
        host = self._hosts[decision.host or ""]
        for victim_id in decision.kills:
            victim = self._runs.get(victim_id)
            if victim is not None:
                if victim.ckpt_s > 0:  # what its last checkpoint saved carries over
                    self._ckpt_saved[victim_id] += preempt.saved_on_kill(victim, t)
                elif not victim.is_job:  # what it served counts to its client
                    self._service_ran[victim_id] = (self._service_ran.get(victim_id, 0.0)
                                                    + preempt.service_ran_s(victim, t))
                self._remove(victim)  # the request stays known: the victim is rescheduled
        for victim_id in decision.suspends:  # paused on the host (DESIGN 3.14)
            victim = self._runs.get(victim_id)
            if victim is not None:
                preempt.pause(victim, t)
                self._touch(host, victim)
        for cut in decision.cuts:
            if cut.task in decision.kills or cut.task in decision.suspends:
                continue
            self._cut(self._runs[cut.task], cut.cpu_shares, cut.memory, t)
        self._start(host, decision, t)

    def _resume(self, run_id: str, cpu_shares: int, t: float) -> None:
        """A paused run thawed on its host (DESIGN 3.14)."""
        run = self._runs.get(run_id)
        if run is None or not run.paused:
            return
        preempt.resume(run, t, cpu_shares)
        if not run.is_job:
            self._push(run.stop_t, _STOP, run)
        self.recorder.on_resumed(t, run_id)
        if run.mem_use > run.limit:
            self._oom_limit.append(run)
        self._touch(run.host, run)

    def _start(self, host: Host, decision: Decision, t: float) -> None:
        request = self._requests[decision.request.id]
        profile = self.profiles[request.workload]
        acc = WindowAccumulator(host.phase, self._monitor.interval_s, t)
        run = Run(request, host, profile, t, decision.cpu_shares, decision.memory, acc)
        if run.ckpt_s > 0:
            self._checkpointed_start(run)
        host.runs[run.id] = run
        self._runs[run.id] = run
        host.demand += run.demand
        host.mem_use += run.mem_use
        host.booked_cpu += run.cpu_shares
        host.booked_mem += run.memory
        if len(profile.steps) > 1:
            self._push(t + profile.steps[1].at_s, _STEP, run)
        if not run.is_job:  # its client stops it once it ran its makespan in all
            run.stop_t = t + max(0.0, request.makespan_s - self._service_ran.get(run.id, 0.0))
            self._push(run.stop_t, _STOP, run)
        if run.mem_use > run.limit:
            self._oom_limit.append(run)
        self._touch(host, run)

    def _checkpointed_start(self, run: Run) -> None:
        """A checkpointable job starts with the work its checkpoints left (sim/preempt.py);
        on a placement after its first, its checkpoints count from alpha on, as its run does in
        the accounting."""
        saved = self._ckpt_saved.get(run.id)
        if saved is None:
            self._ckpt_saved[run.id] = 0.0
            return
        run.ckpt_origin = self.config.allocation_s
        run.work_left = max(0.0, run.request.makespan_s - saved)
        run.work0 = run.work_left
        run.finish_t = run.start_t + run.work_left

    def _remove(self, run: Run) -> None:
        """Take a run off its host (it ended, was killed, or was killed for memory)."""
        run.alive = False
        host = run.host
        del host.runs[run.id]
        del self._runs[run.id]
        host.demand -= run.demand
        host.mem_use -= run.mem_use
        host.booked_cpu -= run.cpu_shares
        host.booked_mem -= run.memory
        if not host.runs:  # no float residue on an empty host
            host.demand = 0.0
            host.mem_use = 0.0
        host.recount = host.recount or run.is_job
        self._touch(host)

    def _cut(self, run: Run, cpu_shares: int, memory: int, t: float) -> None:
        host = run.host
        host.booked_cpu += cpu_shares - run.cpu_shares
        host.booked_mem += memory - run.memory
        run.cpu_shares = cpu_shares
        if memory < run.memory:
            self._memory_cuts += 1
            limit = self._lowered_limit(run, memory)
            if limit > memory:
                self._memory_cuts_partial += 1
                self._memory_cut_unapplied += limit - memory
            run.limit = limit
        run.memory = memory
        self._touch(host, run)

    def _lowered_limit(self, run: Run, memory: int) -> int:
        """The container's limit once set to ``memory`` below it, by the live agent's rule:
        never below what the container uses plus a margin."""
        floor = math.ceil(run.mem_use) + self.config.memory_cut_margin_bytes
        return min(run.limit, max(memory, floor))

    def _restore(self, run: Run, cpu_shares: int, memory: int) -> None:
        """A cut given back (DESIGN 3.8): the run's CPU weight and booked memory grow back,
        and its container's limit is set to the booked memory as the live agent sets it
        (raised at once; lowered, by the rule of a cut, only where an earlier cut the node
        could apply only in part had left it above)."""
        host = run.host
        host.booked_cpu += cpu_shares - run.cpu_shares
        host.booked_mem += memory - run.memory
        run.cpu_shares = cpu_shares
        run.memory = memory
        run.limit = memory if memory >= run.limit else self._lowered_limit(run, memory)
        self._touch(host, run)

    # ------------------------------------------------------------------ task events

    def _on_step(self, t: float, run: Run) -> None:
        steps = run.profile.steps
        run.step += 1
        step = steps[run.step]
        if run.paused:  # frozen: the step passes without effect (sim/preempt.py)
            if run.step + 1 < len(steps):
                self._push(run.start_t + steps[run.step + 1].at_s, _STEP, run)
            return
        host = run.host
        demand = run.profile.cpu_fraction(step, run.request.request_rate) * run.alloc_cores
        mem_use = step.memory_fraction * run.original_memory
        host.demand += demand - run.demand
        host.mem_use += mem_use - run.mem_use
        run.demand = demand
        run.mem_use = mem_use
        if run.step + 1 < len(steps):
            self._push(run.start_t + steps[run.step + 1].at_s, _STEP, run)
        if mem_use > run.limit:
            self._oom_limit.append(run)
        self._touch(host, run)

    def _on_job_end(self, t: float, host: Host) -> None:
        if host.next_t != t:
            return  # superseded: the host's completions moved since this was scheduled
        host.next_t = _INF
        done = [run for run in host.runs.values()
                if run.is_job and run.finish_t <= t + _WORK_EPS_S]
        for run in sorted(done, key=lambda r: r.id):
            if run.alive:  # an earlier end's decisions (a qos round) may have preempted it
                self._end_run(t, run, EndStatus.FINISHED)
        host.recount = True  # look for the next completion
        self._touch(host)

    def _end_run(self, t: float, run: Run, status: EndStatus) -> None:
        self._remove(run)
        self._requests.pop(run.id, None)
        self._ckpt_saved.pop(run.id, None)
        self._service_ran.pop(run.id, None)
        self.recorder.on_task_end(
            t, run.id, status, makespan_s=t - run.start_t,
            expected_makespan_s=run.request.makespan_s if run.is_job else None,
        )
        cluster = self._cluster_of[run.host.id]
        _, outcome = cluster.scheduler.task_ended(run.id, t)
        self._follow(cluster, outcome, t)

    def _oom_kill(self, t: float, run: Run) -> None:
        key = f"{run.request.workload.value} class {run.request.request_class}"
        self._oom_by_workload[key] = self._oom_by_workload.get(key, 0) + 1
        self._remove(run)
        self._requests.pop(run.id, None)
        self._ckpt_saved.pop(run.id, None)
        self._service_ran.pop(run.id, None)
        self.recorder.on_oom_kill(t, run.host.id, run.id)
        cluster = self._cluster_of[run.host.id]
        _, outcome = cluster.scheduler.task_ended(run.id, t)
        self._follow(cluster, outcome, t)

    # ------------------------------------------------------------------ monitor events

    def _on_host_window(self, t: float, host: Host) -> None:
        self._push(t + self._monitor.host_window_s, _HOST_WINDOW, host)
        update = host.monitor.window_closed(t)
        if update is None:
            return
        cluster = self._cluster_of[host.id]
        store = cluster.store
        if not update.has_values:  # a heartbeat: the values held are still current
            self._host_heartbeats += 1
            store.update_host_load(host.id, t, update.windows)
            return
        sent = host.monitor.held
        assert sent is not None
        self._host_pushes += 1
        before = store.host(host.id)
        store.update_host_utilization(host.id, sent.cpu_util, sent.memory_util,
                                      update.measured_at, update.windows)
        # "A utilization drop" frees room for the waiting (DESIGN 3.7).
        if cluster.pending and (sent.cpu_util < before.cpu_util
                                or sent.memory_util < before.memory_util):
            self._follow(cluster, cluster.scheduler.retry_pending(t), t)

    def _on_task_window(self, t: float, host: Host) -> None:
        self._push(t + self._monitor.task_window_s, _TASK_WINDOW, host)
        averages: dict[str, UtilSample] = {}
        for run in host.runs.values():
            average = run.acc.close(t)
            if average is not None:
                averages[run.id] = average
        batch = close_task_window(host.task_tracker, averages)
        store = self._cluster_of[host.id].store
        for task in batch.tasks:
            store.update_task_utilization(task.task_id, task.cpu_util, task.memory_util)
        self._task_pushes += len(batch.tasks)

    # ------------------------------------------------------------------ hosts

    def _touch(self, host: Host, run: Run | None = None) -> None:
        """``host`` changed (``run`` started on it or changed): recompute it before ``t`` ends."""
        self._touched[host.id] = host
        if run is not None:
            host.changed.append(run)

    def _settle(self, t: float) -> None:
        """Out-of-memory kills first, then CPU shares and rates of every changed host."""
        while self._touched or self._oom_limit:
            if self._oom_limit:
                run = self._oom_limit.pop()
                if run.alive and run.mem_use > run.limit:
                    self._oom_limit_kills += 1
                    self._oom_kill(t, run)
                continue
            _, host = self._touched.popitem()
            if host.mem_use > host.cap_mem and host.runs:
                # The kernel's choice: the largest user of memory.
                victim = max(host.runs.values(), key=lambda r: (r.mem_use, r.id))
                self._oom_host += 1
                self._oom_kill(t, victim)  # touches the host again
                continue
            self._recompute(host, t)

    def _recompute(self, host: Host, t: float) -> None:
        contended = host.demand > host.cap_cores + 1e-12
        if not contended and not host.contended:
            self._recompute_changed(host, t)
            return
        host.changed.clear()
        host.recount = False
        runs = list(host.runs.values())
        if contended:
            served_all = share_cpu(host.cap_cores, [r.demand for r in runs],
                                   [r.cpu_shares for r in runs])
        else:
            served_all = [r.demand for r in runs]
        if contended != host.contended:
            if host.contended:
                host.contended_s += t - host.contended_since
            else:
                host.contended_since = t
            host.contended = contended
        total = 0.0
        next_t = _INF
        for run, served in zip(runs, served_all, strict=True):
            total += served
            serve(run, served, t)
            if run.is_job and not run.paused:
                rate = served / run.demand if served < run.demand else 1.0
                if rate != run.rate:
                    preempt.advance(run, t)
                    run.rate = rate
                    run.finish_t = t + max(0.0, run.work_left) / rate
                if run.finish_t < next_t:
                    next_t = run.finish_t
        self._recomputed(host, t, total, next_t)

    def _recompute_changed(self, host: Host, t: float) -> None:
        """``_recompute`` for a host uncontended before and after: every run is served what it
        wants and every job runs at full speed, so only the changed runs are served anew (and
        the next completion looked for among all jobs only when a job left). The same result,
        without sharing the CPU out again."""
        next_t = host.next_t
        for run in host.changed:
            if not run.alive:
                continue
            serve(run, run.demand, t)
            if run.is_job and run.finish_t < next_t:
                next_t = run.finish_t
        host.changed.clear()
        runs = host.runs.values()
        if host.recount:
            host.recount = False
            next_t = min([r.finish_t for r in runs if r.is_job], default=_INF)
        total = sum([r.demand for r in runs])  # in the order _recompute adds them up
        self._recomputed(host, t, total, next_t)

    def _recomputed(self, host: Host, t: float, served: float, next_t: float) -> None:
        """The host serves ``served`` cores from ``t`` and its next job ends at ``next_t``."""
        host.served = served
        host.monitor.accumulator.set(
            t, served / host.cap_cores, min(1.0, host.mem_use / host.cap_mem)
        )
        if next_t != host.next_t:
            host.next_t = next_t
            if next_t < _INF:
                self._push(next_t, _END, host)
        self._dirty[host.id] = host

    def _flush(self, t: float) -> None:
        """Tell the recorder the true state of every host that changed at ``t``."""
        recorder = self.recorder
        for host in self._dirty.values():
            # numbers the engine keeps finite and >= 0: the recorder need not check them
            recorder.on_host_state_unchecked(
                t, host.id,
                host.served / host.cap_cores,
                min(1.0, host.mem_use / host.cap_mem),
                len(host.runs),
                max(0.0, host.mem_use),
                host.booked_cpu,
                host.booked_mem,
            )
        self._dirty.clear()

    # ------------------------------------------------------------------ checks and the end

    def check_books(self) -> None:
        """The simulator's tasks are exactly the store's, with the same resources, and every
        host's allocation is the sum of its tasks' (raises RuntimeError otherwise). With
        several clusters, no task is in two of their stores (never placed twice)."""
        store_tasks = {}
        for cluster in self._clusters:
            for task in cluster.store.tasks():
                if task.id in store_tasks:
                    raise RuntimeError(f"task {task.id} is placed in two clusters")
                store_tasks[task.id] = task
        if set(store_tasks) != set(self._runs):
            only_sim = sorted(set(self._runs) - set(store_tasks))[:5]
            only_store = sorted(set(store_tasks) - set(self._runs))[:5]
            raise RuntimeError(f"tasks differ: simulator only {only_sim}, store only "
                               f"{only_store}")
        for run in self._runs.values():
            task = store_tasks[run.id]
            if (task.host, task.cpu_shares, task.memory) != (
                run.host.id, run.cpu_shares, run.memory
            ):
                raise RuntimeError(f"task {run.id} booked differently")
        for host in self._hosts.values():
            view = self._cluster_of[host.id].store.host(host.id)
            cpu = sum(r.cpu_shares for r in host.runs.values())
            memory = sum(r.memory for r in host.runs.values())
            if (view.cpu_allocated, view.memory_allocated, view.task_count) != (
                cpu, memory, len(host.runs)
            ) or (host.booked_cpu, host.booked_mem) != (cpu, memory):
                raise RuntimeError(f"host {host.id}: allocations differ")
            if host.mem_use > host.cap_mem * (1 + 1e-9):
                raise RuntimeError(f"host {host.id} uses more memory than it has")
            if host.served > host.cap_cores * (1 + 1e-9):
                raise RuntimeError(f"host {host.id} serves more CPU than it has")
        for cluster in self._clusters:
            pending = {entry.request.id for entry in cluster.store.pending()}
            if pending != cluster.pending:
                raise RuntimeError("pending queues differ")

    def _finish(self, wall_s: float) -> SimResult:
        end_s = self.end_s
        contended = 0.0
        for host in self._hosts.values():
            contended += host.contended_s
            if host.contended:
                contended += end_s - host.contended_since
        result = self.recorder.finish(end_s)
        host_time = end_s * len(self._hosts)
        stats = SimStats(
            policy=self.config.policy,
            wall_s=wall_s,
            events=self._events,
            decisions=self._decisions,
            end_s=end_s,
            memory_cuts=self._memory_cuts,
            memory_cuts_partial=self._memory_cuts_partial,
            memory_cut_unapplied_bytes=self._memory_cut_unapplied,
            oom_host_kills=self._oom_host,
            oom_limit_kills=self._oom_limit_kills,
            oom_kills_by_workload=dict(sorted(self._oom_by_workload.items())),
            contended_host_share=contended / host_time if host_time > 0 else 0.0,
            monitor_host_pushes=self._host_pushes,
            monitor_host_heartbeats=self._host_heartbeats,
            monitor_task_pushes=self._task_pushes,
            pending_max=self._pending_max,
            pending_at_end=sum(len(c.pending) for c in self._clusters),
            running_at_end=len(self._runs),
            clusters=self._cluster_stats(result.hosts) if self.config.clusters else (),
        )
        return SimResult(result, stats)

    def _cluster_stats(self, hosts: Iterable[HostSummary]) -> tuple[ClusterStats, ...]:
        energy = {host.host_id: host for host in hosts}
        return tuple(
            ClusterStats(
                name=cluster.name,
                hosts=tuple(cluster.hosts),
                arrivals=cluster.arrivals,
                offloaded_out=cluster.offloaded_out,
                offloaded_in=cluster.offloaded_in,
                offloaded_in_unplaced=cluster.offloaded_in_unplaced,
                no_peer=cluster.no_peer,
                energy_kwh=math.fsum(energy[h].energy_kwh for h in cluster.hosts),
                energy_kwh_switch_off=math.fsum(energy[h].energy_kwh_switch_off
                                                for h in cluster.hosts),
            )
            for cluster in self._clusters
        )


def simulate(
    header: TraceHeader,
    requests: Iterable[tuple[TraceRequest, bool]],
    profiles: Profiles,
    config: SimConfig,
    *,
    progress: ProgressCallback | None = None,
) -> SimResult:
    """Run one policy over ``requests`` (``(request, is_probe)`` in time order)."""
    return Simulation(header, requests, profiles, config, progress=progress).run()
