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
* the world (sim/model.py): usage profiles, CPU contention, memory limits and out-of-memory
  kills, the monitors' windows;
* clusters (sim/routing.py): one, or several under one clock, federated or not;
* metrics: every change of a host's true state goes to ``MetricsRecorder.on_host_state``.

Time is the trace's clock in seconds. Events at the same instant run in a fixed order (task
ends, usage steps, task windows, host windows, then arrivals) and by insertion otherwise, so
a run is deterministic for a trace, profiles and seed (decision times aside: they are wall
clock).
"""

from __future__ import annotations

import gc
import math
import random
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import replace
from typing import Any

from domain.decision import Decision
from domain.energy import PowerModel
from domain.errors import ValidationError
from domain.lifecycle import EndStatus
from domain.model import Request
from measure.recorder import MetricsRecorder, cuts_of
from scheduler.plugin import LoadAware, RoundPolicy
from scheduler.service import Outcome
from sim import preempt
from sim.books import check_books
from sim.config import SimConfig, SimResult, SimStats
from sim.event_heap import Events, new_events
from sim.model import Host, Memory, Monitors, Run, contended_s, next_step, place, reshare, take_off
from sim.monitor_model import WindowAccumulator
from sim.power import POWER_ROUND_S, SimPower
from sim.profiles import Profiles
from sim.routing import Cluster, Clusters
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
_POWER = 6  # the power manager: a round (obj None), or a switch ends (sim/power.py)
_INF = math.inf
# The run pauses Python's cyclic garbage collector and, every this many events, collects what
# was allocated since the last time and freezes the survivors (see Simulation.run).
_GC_EVERY_EVENTS = 500_000

ProgressCallback = Callable[[float, float], None]


class Simulation:
    """One policy over one trace. ``run()`` once; see the module docstring.

    With ``SimConfig.clusters`` the trace's hosts form several clusters, each with its own
    store and scheduler, under one clock, one world model and one recorder (so the report's
    numbers are over all clusters): a new request goes to its home cluster, and when the
    clusters are federated, maybe to a peer (sim/routing.py)."""

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
        self._clusters = Clusters(header, config)
        # the first cluster (the only one, unless config.clusters says otherwise)
        self.store = self._clusters.all[0].store
        self.scheduler = self._clusters.all[0].scheduler
        policy = self.scheduler.policy
        # A load-aware policy reads dated utilization and load windows (DESIGN 3.12).
        monitor = config.monitor
        dated = monitor.dated or (isinstance(policy, LoadAware) and policy.predicts_recent)
        self._monitor = monitor if dated == monitor.dated else replace(monitor, dated=dated)
        # New requests wait in the queue: asked for (--queue-new), or the policy's admission.
        self._queue_new = (self.scheduler.admits_to_queue if config.queue_new is None
                           else config.queue_new)
        self.recorder = MetricsRecorder.for_trace(
            config.policy, header, power_model=config.power_model,
            region_bounds=config.bounds, slo=config.slo, allocation_s=config.allocation_s,
            keep_requests=config.keep_requests,
            **({"standby_w": config.power.standby_w} if config.power is not None else {}),
        )
        self._heap: Events = new_events()
        self._hosts: dict[str, Host] = {}
        self._add_hosts(random.Random(config.seed))
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
        self._memory = Memory(config.memory_cut_margin_bytes)
        self._events = 0
        self._decisions = 0
        self._monitors = Monitors()
        # checkpointable requests placed so far: the progress their checkpoints saved
        # (sim/preempt.py)
        self._ckpt_saved: dict[str, float] = {}
        # services taken off their hosts: how long they ran before (sim/preempt.py)
        self._service_ran: dict[str, float] = {}
        self._pending_max = 0
        self._ran = False
        self._power = self._power_manager()

    def _power_manager(self) -> SimPower | None:
        """The power manager (DESIGN 3.15), when the configuration switches it on."""
        config = self.config
        if config.power is None or not config.power.enabled:
            return None
        if len(self._clusters.all) > 1:
            raise ValidationError("power", "the power manager runs with one cluster only")
        model = config.power_model or PowerModel.named()
        power = SimPower(config.power, self._clusters.all[0], dict.fromkeys(self._hosts, model),
                         policy=config.policy, consolidate=config.power.consolidate,
                         record_state=self.recorder.on_power_state,
                         record_move=self.recorder.on_moved,
                         record_boot_wait=self.recorder.on_boot_wait,
                         queued=self._held)
        self._push(POWER_ROUND_S, _POWER, None)
        return power

    def _add_hosts(self, rng: random.Random) -> None:
        """Every host of the trace, in its cluster's store and in the world, with its
        monitor's first windows due."""
        monitor = self._monitor
        for spec in self.header.hosts:
            store = self._clusters.of_host[spec.id].store
            store.add_host(spec)
            if monitor.dated:  # registration carries the first (idle) sample
                store.update_host_load(spec.id, 0.0)
            # Monitors start at independent moments: a random phase of the host window.
            phase = rng.random() * monitor.host_window_s
            host = Host(spec.id, spec.cpu_capacity, spec.memory_capacity, phase, monitor, 0.0)
            self._hosts[spec.id] = host
            self._push(phase + monitor.host_window_s, _HOST_WINDOW, host)
            self._push(phase + monitor.task_window_s, _TASK_WINDOW, host)

    # ------------------------------------------------------------------ the loop

    def _push(self, t: float, kind: int, obj: Any) -> None:
        self._heap.push(t, kind, obj)

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
            # the earliest event when it is due by the next arrival (first on a tie) and the end
            event = heap.pop_through(arrival_t if arrival_t < end_s else end_s)
            if event is not None:
                t, kind, obj = event
                self._dispatch(t, kind, obj)
            else:  # the next arrival comes first, or both come after the end
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
        elif kind == _ROUND:
            for cluster in self._clusters.all:
                self._follow(cluster, cluster.scheduler.retry_pending(t), t)
            self._push(t + self._watchdog_s, _ROUND, None)
        else:
            self._on_power(t, obj)

    # ------------------------------------------------------------------ requests

    def _arrive(self, t: float, request: TraceRequest, probe: bool) -> None:
        self.recorder.on_submit_request(request, t=t, probe=probe)
        self._requests[request.id] = request
        new = Request(request.id, request.request_class, request.type, request.cpu_shares,
                      request.memory_bytes, request.constraints)
        home, cluster = self._clusters.submit_to(new, t)
        if self._power is not None:  # it may be held for a host not on yet
            held = self._power.submit(self, new, t, self.config.queue_new, request.makespan_s)
            if held is None:
                return
            outcome = held
        else:
            outcome = cluster.scheduler.submit(new, t, queue=self.config.queue_new,
                                               expected_s=request.makespan_s)
        if outcome.admission is not None:  # refused at the door (DESIGN 3.13): nothing ran
            self._requests.pop(request.id, None)
            self.recorder.on_admission_refused(t, request.id)
            return
        if cluster is not home and not any(d.request.id == new.id for d in outcome.applied):
            cluster.offloaded_in_unplaced += 1
        self._follow(cluster, outcome, t, request.id)

    def _follow(
        self, cluster: Cluster, outcome: Outcome, t: float, new_id: str | None = None
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
                cuts = cuts_of(decision)
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
        waiting = len(pending) if len(self._clusters.all) == 1 else self._clusters.waiting()
        self._pending_max = max(self._pending_max, waiting)
        for task in outcome.resumed:  # after every decision, as the scheduler made them
            self._resume(task.id, task.cpu_shares, t)
        for restore in outcome.restored:  # after every decision, as the scheduler made them
            run = self._runs[restore.task]
            self._memory.restore(run, restore.cpu_shares, restore.memory)
            self._touch(run.host, run)
            recorder.on_restore(t, restore.task, restore.cpu_shares, restore.memory)

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
            if cut.task not in decision.kills and cut.task not in decision.suspends:
                run = self._runs[cut.task]
                self._memory.cut(run, cut.cpu_shares, cut.memory)
                self._touch(run.host, run)
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
        if self._memory.over_limit(run):
            self._oom_limit.append(run)
        self._touch(run.host, run)

    def _start(self, host: Host, decision: Decision, t: float) -> None:
        request = self._requests[decision.request.id]
        profile = self.profiles[request.workload]
        acc = WindowAccumulator(host.phase, self._monitor.interval_s, t)
        run = Run(request, host, profile, t, decision.cpu_shares, decision.memory, acc)
        if run.ckpt_s > 0:
            self._checkpointed_start(run)
        place(run)
        self._runs[run.id] = run
        if len(profile.steps) > 1:
            self._push(t + profile.steps[1].at_s, _STEP, run)
        if not run.is_job:  # its client stops it once it ran its makespan in all
            run.stop_t = t + max(0.0, request.makespan_s - self._service_ran.get(run.id, 0.0))
            self._push(run.stop_t, _STOP, run)
        if self._memory.over_limit(run):
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
        take_off(run)
        del self._runs[run.id]
        self._touch(run.host)

    # ------------------------------------------------------------------ task events

    def _on_step(self, t: float, run: Run) -> None:
        steps = run.profile.steps
        if run.paused:  # frozen: the step passes without effect (sim/preempt.py)
            run.step += 1
            if run.step + 1 < len(steps):
                self._push(run.start_t + steps[run.step + 1].at_s, _STEP, run)
            return
        next_step(run)
        if run.step + 1 < len(steps):
            self._push(run.start_t + steps[run.step + 1].at_s, _STEP, run)
        if self._memory.over_limit(run):
            self._oom_limit.append(run)
        self._touch(run.host, run)

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
        if self._power is not None:  # its room is free again (the net spare rule)
            self._power.recent.release(t, run.request.cpu_shares, run.request.memory_bytes)
        self._remove(run)
        self._requests.pop(run.id, None)
        self._ckpt_saved.pop(run.id, None)
        self._service_ran.pop(run.id, None)
        self.recorder.on_task_end(
            t, run.id, status, makespan_s=t - run.start_t,
            expected_makespan_s=run.request.makespan_s if run.is_job else None,
        )
        self._task_ended(t, run)

    def _oom_kill(self, t: float, run: Run) -> None:
        self._memory.killed(run)
        self._remove(run)
        self._requests.pop(run.id, None)
        self._ckpt_saved.pop(run.id, None)
        self._service_ran.pop(run.id, None)
        self.recorder.on_oom_kill(t, run.host.id, run.id)
        self._task_ended(t, run)

    def _task_ended(self, t: float, run: Run) -> None:
        """Its cluster's scheduler frees its place (and may place the waiting)."""
        cluster = self._clusters.of_host[run.host.id]
        _, outcome = cluster.scheduler.task_ended(run.id, t)
        self._follow(cluster, outcome, t)

    # ------------------------------------------------------------------ monitor events

    def _on_host_window(self, t: float, host: Host) -> None:
        self._push(t + self._monitor.host_window_s, _HOST_WINDOW, host)
        cluster = self._clusters.of_host[host.id]
        if self._monitors.host_window(host, cluster.store, t) and cluster.pending:
            self._follow(cluster, cluster.scheduler.retry_pending(t), t)

    def _on_task_window(self, t: float, host: Host) -> None:
        self._push(t + self._monitor.task_window_s, _TASK_WINDOW, host)
        self._monitors.task_window(host, self._clusters.of_host[host.id].store, t)

    # ------------------------------------------------------------------ power (sim/power.py)

    def _on_power(self, t: float, round_: Any) -> None:
        power = self._power
        assert power is not None
        if round_ is None:
            power.round(self, t)
            self._push(t + POWER_ROUND_S, _POWER, None)
        else:
            power.tick(self, t)

    def _held(self, t: float, request_id: str) -> None:
        """A new request is held for a host not on yet: it waits as a queued new request."""
        self._queued_new.add(request_id)
        self.recorder.on_queued(t, request_id)

    def follow_outcome(self, cluster: Cluster, outcome: Outcome, t: float,
                       new_id: str | None = None) -> None:
        if new_id is not None and outcome.admission is not None:  # held, then refused
            self._queued_new.discard(new_id)
            self._requests.pop(new_id, None)
            self.recorder.on_admission_refused(t, new_id)
            return
        self._follow(cluster, outcome, t, new_id)

    def wake_at(self, t: float) -> None:
        self._push(t, _POWER, True)

    def move_run(self, task_id: str, target: str, cpu_shares: int, memory: int,
                 t: float) -> None:
        """Consolidation moved a service (make-before-break): its run goes on, on ``target``,
        with these resources; its usage profile and its client's stop time are unchanged."""
        run = self._runs[task_id]
        take_off(run)
        self._touch(run.host)
        host = self._hosts[target]
        run.host = host
        run.cpu_shares = cpu_shares
        run.memory = memory
        run.limit = memory
        run.acc = WindowAccumulator(host.phase, self._monitor.interval_s, t)
        run.alive = True
        place(run)
        if self._memory.over_limit(run):
            self._oom_limit.append(run)
        self._touch(host, run)

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
                if run.alive and self._memory.over_limit(run):
                    self._memory.oom_limit += 1
                    self._oom_kill(t, run)
                continue
            _, host = self._touched.popitem()
            victim = self._memory.host_victim(host)  # the kernel's choice
            if victim is not None:
                self._oom_kill(t, victim)  # touches the host again
                continue
            served, next_t = reshare(host, t)
            self._recomputed(host, t, served, next_t)

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
        """Tell the recorder (and the power manager) the true state of every host that changed
        at ``t``."""
        recorder = self.recorder
        if self._power is not None:
            for host in self._dirty.values():
                self._power.note_host(t, host.id, len(host.runs))
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
        """The simulator's tasks are exactly the stores', with the same resources (raises
        RuntimeError otherwise; sim/books.py)."""
        check_books(self._clusters, self._runs, self._hosts)

    def _finish(self, wall_s: float) -> SimResult:
        end_s = self.end_s
        contended = contended_s(self._hosts.values(), end_s)
        result = self.recorder.finish(end_s)
        host_time = end_s * len(self._hosts)
        stats = SimStats(
            policy=self.config.policy,
            wall_s=wall_s,
            events=self._events,
            decisions=self._decisions,
            end_s=end_s,
            memory_cuts=self._memory.cuts,
            memory_cuts_partial=self._memory.cuts_partial,
            memory_cut_unapplied_bytes=self._memory.cut_unapplied_bytes,
            oom_host_kills=self._memory.oom_host,
            oom_limit_kills=self._memory.oom_limit,
            oom_kills_by_workload=dict(sorted(self._memory.oom_by_workload.items())),
            contended_host_share=contended / host_time if host_time > 0 else 0.0,
            monitor_host_pushes=self._monitors.host_pushes,
            monitor_host_heartbeats=self._monitors.host_heartbeats,
            monitor_task_pushes=self._monitors.task_pushes,
            pending_max=self._pending_max,
            pending_at_end=self._clusters.waiting(),
            running_at_end=len(self._runs),
            clusters=self._clusters.stats(result.hosts),
        )
        return SimResult(result, stats)


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
