"""Decide, apply, and follow through: victims are rescheduled, the unplaceable wait (3.7),
and cuts are given back where room grew (3.8).

``Scheduler`` is still pure: it talks to a ClusterStore and returns an ``Outcome`` that lists,
in order, every decision it applied and every cut it gave back. The live manager turns those
lists into Docker calls; the simulator into events.

Cuts given back: an event that lets a task leave a host (it ends, is killed, is taken off for
rescheduling) ends with the restoration of that host's cut tasks (``ClusterStore.restore_cuts``),
after every decision the event led to, so after the pending queue's retry. Waiting requests
come first: a waiting request is not running and loses availability every second it waits
(DESIGN 3.10), a cut task runs and loses none; and restoring first would let the retry's cut
pass cut the same tasks again at once, two live updates for nothing. A placement that kills
nothing never triggers it (it only takes room: the cut pass cuts what it needs, DESIGN 3.5);
one that kills does, on the host its victims left.

Paused tasks resumed (DESIGN 3.14): at the same moments and on the same hosts, just before the
cuts are given back, a host's suspended tasks run again as far as its CPU room allows, the most
urgent first. Admission control (3.13): a new request that would wait in the queue is admitted
first (``scheduler.admission``); the scheduler keeps the admitted requests' demand.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Protocol

from domain.constraints import NodeFacts
from domain.decision import Decision
from domain.errors import ConflictError, NotFoundError
from domain.model import Request, Task, TaskType
from domain.pending import PendingEntry, PendingReason, violation_deadline
from domain.preemption import times_after_kill
from domain.restore import TaskRestore
from domain.slo import SloTable
from domain.store import ChangeLog, ClusterReader, ClusterStore
from scheduler.admission import AdmissionLedger, AdmissionMode, Refusal
from scheduler.constraints import JUST_LEFT, PAUSED, merged, name_constraints, ruled_out
from scheduler.load import Freshness, LoadView, RecentPlacements
from scheduler.plugin import LoadAware, Policy, RoundPolicy, TimeAware
from scheduler.preview import Preview, Stamp


class PowerGate(Protocol):
    """The power manager as the scheduler sees it (DESIGN 3.15; the manager's
    manager/switching.py): told of every new request (the spare-room rule's record), and asked,
    for a request no host on takes without a kill, whether a host not on yet will take it."""

    def arrived(self, request: Request, now: float) -> None: ...

    def ended(self, cpu_shares: int, memory: int, now: float) -> None:
        """A task of these (original) resources ended: its room is free (the net spare
        rule)."""
        ...

    def hold(self, request: Request, now: float) -> str | None:
        """The host (booting, or switched on for it now) ``request`` waits for; None: none
        would take it."""
        ...

# Kill chains end by construction (victims are of strictly higher classes, or class-4 services
# for class-4 jobs); this bound only guards against a broken invariant.
MAX_CHAIN = 10_000
# How many pending entries one retry round decides at most (most urgent first); the rest wait
# for the next event that frees room. Keeps an event's cost bounded when the queue is long.
DEFAULT_RETRY_LIMIT = 32


# The reason of a retry that was not decided (see Scheduler.retry_pending).
NOT_RETRIED = "no host that changed since its last try could take it"


@dataclass(init=False)
class Outcome:
    """What one event led to, in the order it was applied."""

    # every decision taken, in order, each with its decision_ms; a retry that was not decided
    # (no changed host could take it) is a refusal with decision_ms None
    decisions: list[Decision] = field(default_factory=list)
    applied: list[Decision] = field(default_factory=list)  # placed and applied, in order
    killed: list[Task] = field(default_factory=list)  # tasks killed by those decisions
    queued: list[PendingEntry] = field(default_factory=list)  # newly put in the pending queue
    refused: list[Decision] = field(default_factory=list)  # new requests refused outright
    # new requests no pass placed, queued as they asked (their entries are in ``queued``)
    waiting: list[Decision] = field(default_factory=list)
    # cuts given back once the decisions were applied, in order (DESIGN 3.8)
    restored: list[TaskRestore] = field(default_factory=list)
    # tasks paused by those decisions, as they are now (DESIGN 3.14), and tasks resumed on
    # their hosts, as they are now, in order
    suspended: list[Task] = field(default_factory=list)
    resumed: list[Task] = field(default_factory=list)
    # a new request refused at admission (DESIGN 3.13): why; nothing else was done for it
    admission: Refusal | None = None

    # Written by hand (init=False), as the generated one would be but for a default
    # factory's parameter, None here: compiled (see native.loader), the dataclass's own
    # __init__ stays interpreted and is several times slower (one outcome per event).
    # tests/unit/test_dataclass_inits.py checks it against the fields.
    def __init__(
        self, decisions: list[Decision] | None = None, applied: list[Decision] | None = None,
        killed: list[Task] | None = None, queued: list[PendingEntry] | None = None,
        refused: list[Decision] | None = None, waiting: list[Decision] | None = None,
        restored: list[TaskRestore] | None = None, suspended: list[Task] | None = None,
        resumed: list[Task] | None = None, admission: Refusal | None = None,
    ) -> None:
        self.decisions = [] if decisions is None else decisions
        self.applied = [] if applied is None else applied
        self.killed = [] if killed is None else killed
        self.queued = [] if queued is None else queued
        self.refused = [] if refused is None else refused
        self.waiting = [] if waiting is None else waiting
        self.restored = [] if restored is None else restored
        self.suspended = [] if suspended is None else suspended
        self.resumed = [] if resumed is None else resumed
        self.admission = admission

    def decision_for(self, request_id: str) -> Decision | None:
        for decision in (*self.applied, *self.refused, *self.waiting):
            if decision.request.id == request_id:
                return decision
        return None


class Scheduler:
    def __init__(
        self,
        store: ClusterStore,
        policy: Policy,
        *,
        retry_limit: int = DEFAULT_RETRY_LIMIT,
        skip_unchanged: bool = True,
        slo: SloTable | None = None,
        alpha_s: float = 0.0,
        admits_to_queue: bool = False,
        freshness: Freshness | None = None,
        recent: RecentPlacements | None = None,
        admission: AdmissionMode = AdmissionMode.NONE,
    ) -> None:
        self.store = store
        self.policy = policy
        self.retry_limit = retry_limit
        # The queue's order (DESIGN 3.10): each class's objective, and the allocation time a
        # request that ran before needs to run again.
        self.slo = slo or SloTable()
        self.alpha_s = alpha_s
        # A new request waits in the queue unless its client says otherwise (the QoS-driven
        # policy's admission, DESIGN 3.11).
        self.admits_to_queue = admits_to_queue
        # Admission control (DESIGN 3.13) for requests that would wait: the admitted requests
        # (running, suspended, queued) and their demand per class; None when it is off.
        self.admission = admission
        self.ledger: AdmissionLedger | None = (
            AdmissionLedger() if admission is AdmissionMode.SLO else None)
        # A policy that decides in rounds over the queue (DESIGN 3.11): it sees every waiting
        # request in Q order, and victims go back to the queue instead of a cascade.
        self._rounds: RoundPolicy | None = policy if isinstance(policy, RoundPolicy) else None
        # A policy that decides at a moment (the kill pass weighs the work victims would lose).
        self._timed: TimeAware | None = policy if isinstance(policy, TimeAware) else None
        # A load-aware policy sees each host's expected utilization (DESIGN 3.12): the tasks
        # placed since its last measurement are remembered for it.
        self.freshness = freshness or Freshness()
        self._predicts = isinstance(policy, LoadAware) and policy.predicts_recent
        self.recent = (recent if recent is not None
                       else RecentPlacements(self.freshness.stale_after_s))
        # With a store that logs its changes: where each waiting request last failed, so a
        # retry can tell "no changed host could take it" without deciding (see retry_pending).
        # (A round policy's decisions depend on time, not on the hosts' books alone: never.)
        self._log: ChangeLog | None = (
            store
            if skip_unchanged and self._rounds is None and isinstance(store, ChangeLog)
            else None
        )
        self._failed_at: dict[str, int] = {}
        # Every change made through this scheduler (or of what it decides on: closed hosts,
        # node facts) counts one; with the store's change mark, a preview's stamp.
        self._changes = 0
        self._marks: ChangeLog | None = store if isinstance(store, ChangeLog) else None
        # Hosts that keep their tasks but take no new placement (paused Swarm nodes, DESIGN 4):
        # every decision excludes them (set_closed_hosts).
        self.closed_hosts: frozenset[str] = frozenset()
        # What placement constraints can ask about each host (DESIGN 4; set_node_facts).
        self.node_facts: dict[str, NodeFacts] = {}
        # The power manager (DESIGN 3.15), when hosts are switched: a request that a host not
        # on yet will take waits for it rather than kill or be refused (``_held``).
        self.power: PowerGate | None = None

    def set_closed_hosts(self, host_ids: frozenset[str]) -> bool:
        """Hosts that take no new placement from now on; True when the set changed (a host
        that opens again may take what waits: the skips of retry_pending start afresh)."""
        if host_ids == self.closed_hosts:
            return False
        self._changes += 1
        self.closed_hosts = host_ids
        self._failed_at.clear()
        return True

    def set_node_facts(self, facts: Mapping[str, NodeFacts]) -> bool:
        """The nodes' descriptions (hostname, labels, platform) constraints are judged on;
        True when they changed (a label may have come: what waits may fit now)."""
        if facts == self.node_facts:
            return False
        self._changes += 1
        self.node_facts = dict(facts)
        self._failed_at.clear()
        return True

    # -- new requests ---------------------------------------------------------------------

    def submit(
        self, request: Request, now: float, *, queue: bool | None = None,
        preview: Preview | None = None, expected_s: float | None = None,
    ) -> Outcome:
        """Place a new request; refuse it, or queue it when ``queue`` and nothing takes it.
        ``queue`` None: the policy's habit (``admits_to_queue``). A round policy queues the
        request first, with Q = 0, then runs a round: the most urgent waiting request first.
        ``preview``: its ``preview``, applied while it stands (scheduler/preview.py).
        With admission control, a request that would wait is admitted first (DESIGN 3.13):
        refused, ``Outcome.admission`` says why and nothing else happens. ``expected_s``: how
        long it is expected to run, where known (the admission's Retry-After)."""
        if self.store.task(request.id) is not None or self.store.is_pending(request.id):
            raise ConflictError(f"request {request.id!r} is already known")
        wait = self.admits_to_queue if queue is None else queue
        outcome = Outcome()
        ledger = self.ledger
        if ledger is not None:
            outcome.admission = self.admission_refusal(request, queue=wait)
            if outcome.admission is not None:
                return outcome
            ledger.admit(request, None if expected_s is None else now + expected_s)
        if self.power is not None:
            self.power.arrived(request, now)
        if self._rounds is not None and wait:
            self._changes += 1
            self._enqueue(request, PendingReason.QUEUED, now, 0.0, 0.0, outcome)
            self._round(now, outcome, arrival=request.id)
            if not any(d.request.id == request.id for d in outcome.applied):
                tried = [d for d in outcome.decisions if d.request.id == request.id]
                outcome.waiting.append(
                    tried[-1] if tried else Decision.refused(
                        request, "waiting in the queue behind more urgent requests",
                        policy=self.policy.name))
            self._restore(outcome, (), now)
            return outcome
        decision = self._previewed(preview, request, now, outcome)
        if decision is None:
            decision = self._decide(request, outcome, now=now)
        self._changes += 1
        held = self._held(decision, now)
        if held is not None:  # waits for a host not on yet, even with queue: false
            outcome.waiting.append(held)
            self._enqueue(request, PendingReason.QUEUED, now, 0.0, 0.0, outcome)
        elif decision.placed:
            self._apply(decision, now, 0.0, 0.0, outcome)
        elif wait:
            outcome.waiting.append(decision)
            self._enqueue(request, PendingReason.QUEUED, now, 0.0, 0.0, outcome)
        else:
            outcome.refused.append(decision)
            if ledger is not None:
                ledger.release(request.id)  # refused at once: never admitted
        self._restore(outcome, (), now)
        return outcome

    # -- admission control (DESIGN 3.13) ----------------------------------------------------

    def admission_refusal(self, request: Request, *, queue: bool | None = None) -> Refusal | None:
        """Why ``submit`` would refuse ``request`` at admission now (None: it would admit it,
        or admission control does not apply to it), with nothing changed."""
        wait = self.admits_to_queue if queue is None else queue
        if self.ledger is None or not wait:
            return None
        if not self.ledger.has_room:
            self.ledger.hosts_changed(self.store.all_hosts())
        return self.ledger.check(request, self.slo)

    def hosts_changed(self) -> None:
        """Hosts joined or left: the room admission control books against is read again."""
        if self.ledger is not None:
            self.ledger.hosts_changed(self.store.all_hosts())

    def resync_admission(self, tasks: Iterable[Task]) -> None:
        """The admitted requests are exactly ``tasks`` (the store's: running or suspended) and
        the queue's, and the room is the hosts' as they are (a live manager, whose books other
        paths change too, calls this before it admits)."""
        if self.ledger is None:
            return
        requests = [task.as_request() for task in tasks]
        requests += [entry.request for entry in self.store.pending()]
        self.ledger.reset(requests)
        self.ledger.hosts_changed(self.store.all_hosts())

    def preview(self, request: Request, now: float) -> Preview:
        """The decision the policy takes for ``request`` now, applied nowhere (the store is
        unchanged): what ``submit`` would do with it, but for a round policy's queue (it
        decides the new request directly here). The federation asks it before it forwards a
        request (federation.offload); ``submit(..., preview=)`` applies it when it stays (a
        random policy's draw is then used once)."""
        decision = self._decide(request, Outcome(), now=now)
        return Preview(decision, now, self._stamp())

    def _stamp(self) -> Stamp:
        return self._changes, (None if self._marks is None else self._marks.change_mark())

    def _previewed(self, preview: Preview | None, request: Request, now: float,
                   outcome: Outcome) -> Decision | None:
        """``preview``'s decision, noted in ``outcome``, if it still stands; else None."""
        if preview is None or not preview.stands(request, now, self._stamp()):
            return None
        outcome.decisions.append(preview.decision)
        return preview.decision

    def decide_one(self, request: Request, now: float, *, explain: bool = False) -> Decision:
        """The decision for ``request`` as a new request at ``now``, applied nowhere (the store
        is unchanged; ``greenswarm decide``). A round policy decides it as its rounds decide a
        new waiting request (Q = 0, at ``now``, with this scheduler's objectives and allocation
        time); closed hosts, constraints and expected utilization count as in ``submit``."""
        return self._decide(request, Outcome(), q_s=0.0, now=now, explain=explain)

    # -- tasks that must move -------------------------------------------------------------

    def reschedule(self, tasks: list[Task], now: float, reason: PendingReason) -> Outcome:
        """Resubmit tasks removed from their hosts (killed, or their host left); under a round
        policy they join the queue and a round runs. The hosts they left (those still there)
        give cuts back."""
        self._changes += 1
        outcome = Outcome()
        if self._rounds is not None:
            for task in tasks:
                self._requeue(task, reason, now, outcome)
            self._round(now, outcome)
            self._restore(outcome, [task.host for task in tasks], now)
            return outcome
        self._cascade(deque((task, reason) for task in tasks), now, outcome)
        self._restore(outcome, [task.host for task in tasks], now)
        return outcome

    def host_lost(self, host_id: str, now: float, skip: Collection[str] = ()) -> Outcome:
        """The host leaves the registry; its tasks are rescheduled, but those of ``skip`` (the
        caller knows nothing could start them elsewhere)."""
        self._changes += 1
        tasks = self.store.remove_host(host_id)
        self.hosts_changed()
        return self.reschedule([t for t in tasks if t.id not in skip], now,
                               PendingReason.HOST_LOST)

    def task_ended(self, task_id: str, now: float) -> tuple[Task, Outcome]:
        """A task finished, failed, or was stopped: free its room, resume what is paused on
        its host, retry the queue, then give cuts back on its host."""
        self._changes += 1
        task = self.store.end_task(task_id)
        if self.ledger is not None:
            self.ledger.release(task_id)
        if self.power is not None:
            self.power.ended(task.original_cpu_shares, task.original_memory, now)
        return task, self.retry_pending(now, freed=(task.host,))

    def request_gone(self, request_id: str) -> None:
        """A request left otherwise (a queued one stopped by its client): no longer admitted."""
        if self.ledger is not None:
            self.ledger.release(request_id)

    # -- pending queue --------------------------------------------------------------------

    def retry_pending(self, now: float, freed: Iterable[str] = ()) -> Outcome:
        """Retry the queue (a round, under a round policy), then resume what is paused and
        give cuts back on the hosts of ``freed`` (room grew there: a task left) and those
        where a retry killed."""
        self._changes += 1
        outcome = Outcome()
        if self._rounds is not None:
            self._round(now, outcome)
        else:
            self._retry_in_order(now, outcome)
        self._restore(outcome, freed, now)
        return outcome

    def _round(self, now: float, outcome: Outcome, arrival: str | None = None) -> None:
        """One round of a round policy (DESIGN 3.11): every waiting request once, the lowest Q
        first (the queue's order); a placement's victims join the queue with their own Q and
        may be placed again in the same round, never on the host they just left. The round
        stops after ``retry_limit`` requests in a row found no host (the paper's own heuristic:
        the rest of the queue is no more urgent, and the next round comes soon), but the
        ``arrival`` that started it is always tried in it: a new request starts at Q = 0, and
        one of an objective of 1 that waits for the next round has missed it already."""
        assert self._rounds is not None
        tried: set[str] = set()
        left: dict[str, str] = {}  # victim -> the host it left in this round
        failures = 0
        while True:
            if failures < self.retry_limit:
                entry = _first_untried(self.store.pending(), tried)
            elif arrival is not None and arrival not in tried:
                entry = _first_untried(self.store.pending(), tried, only=arrival)
            else:
                return
            if entry is None:
                return
            request = entry.request
            tried.add(request.id)
            exclude = (left[request.id],) if request.id in left else ()
            decision = self._decide(request, outcome, exclude, q_s=entry.deadline - now,
                                    now=now)
            if not decision.placed or self._held(decision, now) is not None:
                failures += 1
                continue
            failures = 0
            self.store.remove_pending(request.id)
            outcome.queued = [e for e in outcome.queued if e.request.id != request.id]
            killed = self.store.apply(decision, now, entry.executed_s, entry.waited(now),
                                      entry.preemptions)
            self._placed(decision, now)
            outcome.applied.append(decision)
            outcome.killed += killed
            self._suspended(decision, outcome)
            for victim in killed:
                self._requeue(victim, PendingReason.VICTIM, now, outcome)
                left[victim.id] = victim.host

    def _requeue(self, task: Task, reason: PendingReason, now: float, outcome: Outcome) -> None:
        """A task taken off its host waits with its history and one preemption more (the run
        a kill threw away in p, DESIGN 3.10)."""
        executed, pending = times_after_kill(task, now)
        self._enqueue(task.as_request(), reason, now, executed, pending, outcome,
                      task.preemptions + 1)

    def _retry_in_order(self, now: float, outcome: Outcome) -> None:
        """Try waiting requests in time-to-violate order; the placed ones leave the queue.

        An entry is skipped when one at least as small, of the same class and type, already
        failed in this round (every pass is monotone in the request size); at most
        ``retry_limit`` entries are tried per round.

        With a store that logs its changes (``domain.store.ChangeLog``), an entry that failed
        before is decided again only if a host that changed since could take it
        (``Policy.may_place``): whether a host takes a request depends on that host's books
        alone, so the other hosts would refuse it again. Such an entry counts as tried and
        failed, exactly as if it had been decided: the outcome is the same either way.
        """
        # Per (class, whether a job), at index 2 x class + job: the sizes (cpu, memory) that
        # failed in this round, the least only (a size above one of them adds nothing: what
        # it would rule out, the smaller rules out already). A list by index, not a dict of
        # tuples: this is looked up for every entry of the queue.
        failed: list[list[tuple[int, int]] | None] = [None] * 10
        attempts = 0
        limit = self.retry_limit
        marks = self._failed_at
        entries = self.store.pending()
        job = TaskType.JOB  # (an enum member read from its class costs more than a local)
        for entry in entries:
            if attempts >= limit:
                break
            request = entry.request
            group = 2 * request.cls + (1 if request.type == job else 0)
            smaller = failed[group]
            if smaller is not None:
                cpu_shares, memory = request.cpu_shares, request.memory
                for cpu, mem in smaller:  # (a loop, not any(): this runs over the whole queue)
                    if cpu <= cpu_shares and mem <= memory:
                        break
                else:
                    smaller = None
                if smaller is not None:
                    continue  # not tried: the mark of its last failure still holds
            attempts += 1
            if self._may_place_now(request, marks.get(request.id), now):
                decision = self._decide(request, outcome, now=now)
                if decision.placed and self._held(decision, now) is None:
                    marks.pop(request.id, None)
                    self.store.remove_pending(request.id)
                    self._apply(decision, now, entry.executed_s, entry.waited(now), outcome,
                                entry.preemptions)
                    continue
            else:
                outcome.decisions.append(
                    Decision.refused(request, NOT_RETRIED, policy=self.policy.name)
                )
            _note_failed(failed, group, request.cpu_shares, request.memory)
            if self._log is not None:
                marks[request.id] = self._log.change_mark()
        if len(marks) > 2 * len(entries) + 64:  # forget requests that left the queue otherwise
            waiting = {entry.request.id for entry in entries}
            self._failed_at = {rid: mark for rid, mark in marks.items() if rid in waiting}

    # -- cuts given back, paused tasks resumed ----------------------------------------------

    def _restore(self, outcome: Outcome, freed: Iterable[str], now: float) -> None:
        """Resume paused tasks, then give cuts back, on every host of ``freed`` and every
        host a kill of ``outcome`` took a task from, by host id; a host that left meanwhile
        is skipped. Both come after every decision of the event: the queue's requests are
        decided first (a resume only ever takes the CPU room left on the task's own host),
        and an outcome lists its decisions, then its resumes, then its restorations, in the
        order they were made."""
        hosts = sorted({*freed, *(victim.host for victim in outcome.killed)})
        self._resume(hosts, now, outcome)
        for host_id in hosts:
            try:
                outcome.restored += self.store.restore_cuts(host_id)
            except NotFoundError:
                continue  # the host left (host_lost): nothing to give back there

    def _resume(self, hosts: Iterable[str], now: float, outcome: Outcome) -> None:
        """Paused tasks run again where their hosts' CPU room allows (DESIGN 3.14)."""
        for host_id in hosts:
            try:
                outcome.resumed += self.store.resume_suspended(host_id, now, self.slo)
            except NotFoundError:
                continue

    def _suspended(self, decision: Decision, outcome: Outcome) -> None:
        """The tasks ``decision`` paused, as the store holds them now."""
        for task_id in decision.suspends:
            task = self.store.task(task_id)
            if task is not None and task.suspended:
                outcome.suspended.append(task)

    def _may_place_now(self, request: Request, failed_at: int | None, now: float) -> bool:
        """False when ``request`` failed at mark ``failed_at`` and no host changed since
        could take it; True when it may fit, or when that cannot be told. (A load-aware
        policy judges the changed hosts as it sees them; a host's expected utilization changes
        with its books, its measurements, and with time only once it goes stale, which a store
        whose monitors report, as the simulator's do, never lets happen.)"""
        if self._log is None or failed_at is None:
            return True
        changed = self._log.changed_since(failed_at)
        if changed is None:
            return True
        if self._predicts:
            view = self._view(now)
            assert isinstance(view, LoadView)
            changed = [view.expected(host)[0] for host in changed]
        return self.policy.may_place(request, changed, self.store.classes)

    def _view(self, now: float) -> ClusterReader:
        """What the policy reads: the store, or for a load-aware policy the hosts' expected
        utilization at ``now``."""
        if not self._predicts:
            return self.store
        return LoadView(self.store, now, self.recent, self.freshness, self.store.task)

    def _placed(self, decision: Decision, now: float) -> None:
        if self._predicts and decision.host is not None:
            self.recent.placed(decision.host, decision.request.id, now)

    # -- internals ------------------------------------------------------------------------

    def _decide(
        self,
        request: Request,
        outcome: Outcome,
        exclude: tuple[str, ...] = (),
        *,
        q_s: float | None = None,
        now: float = 0.0,
        explain: bool = False,
    ) -> Decision:
        """The policy's decision, timed, and noted in ``outcome``; ``q_s``: a waiting
        request's QoS metric, for a round policy; ``explain``: with the policy's notes."""
        started = time.perf_counter_ns()
        excluded: Collection[str] = exclude
        if self.closed_hosts:
            excluded = merged(exclude, JUST_LEFT, dict.fromkeys(self.closed_hosts, PAUSED))
        constrained: dict[str, str] = {}
        if request.constraints:
            hosts = [host.id for host in self.store.all_hosts()]
            constrained = ruled_out(request, hosts, self.node_facts)
            excluded = merged(excluded, JUST_LEFT, constrained)
        view = self._view(now)
        if self._rounds is not None and q_s is not None:
            decision = self._rounds.decide_waiting(
                request, view, q_s=q_s, now=now, slo=self.slo, alpha_s=self.alpha_s,
                exclude=excluded, explain=explain)
        elif self._timed is not None:
            decision = self._timed.decide_at(request, view, now=now, exclude=excluded,
                                             explain=explain)
        else:
            decision = self.policy.decide(request, view, exclude=excluded, explain=explain)
        if constrained:
            decision = name_constraints(decision, constrained, len(hosts))
        decision = decision.timed((time.perf_counter_ns() - started) / 1e6)
        outcome.decisions.append(decision)
        return decision

    def _held(self, decision: Decision, now: float) -> Decision | None:
        """With the power manager: a decision that places nothing, or places only by a kill or
        a suspension (the preemption pass, DESIGN 3.15), while a host not on yet would take the
        request, becomes a wait for that host (the refusal returned: its reason names the
        host); None: the decision stands."""
        if self.power is None or (decision.placed and not decision.kills
                                  and not decision.suspends):
            return None
        host = self.power.hold(decision.request, now)
        if host is None:
            return None
        return Decision.refused(decision.request, f"waits for host {host}, which is not on "
                                "yet and will take it", policy=self.policy.name)

    def _apply(
        self,
        decision: Decision,
        now: float,
        executed_s: float,
        pending_s: float,
        outcome: Outcome,
        preemptions: int = 0,
    ) -> None:
        killed = self.store.apply(decision, now, executed_s, pending_s, preemptions)
        self._placed(decision, now)
        outcome.applied.append(decision)
        if decision.suspends:
            self._suspended(decision, outcome)
        if killed:
            outcome.killed += killed
            self._cascade(deque((task, PendingReason.VICTIM) for task in killed), now, outcome)

    def _cascade(
        self, victims: deque[tuple[Task, PendingReason]], now: float, outcome: Outcome
    ) -> None:
        steps = 0
        while victims:
            steps += 1
            if steps > MAX_CHAIN:
                raise RuntimeError("kill chain did not end: class invariant broken")
            victim, reason = victims.popleft()
            # the run a kill threw away moves to p (DESIGN 3.10)
            executed, pending = times_after_kill(victim, now)
            preemptions = victim.preemptions + 1  # taken off its host: a kill, or a lost host
            request = victim.as_request()
            decision = self._decide(request, outcome, exclude=(victim.host,), now=now)
            if not decision.placed or self._held(decision, now) is not None:
                self._enqueue(request, reason, now, executed, pending, outcome, preemptions)
                continue
            killed = self.store.apply(decision, now, executed, pending, preemptions)
            self._placed(decision, now)
            outcome.applied.append(decision)
            outcome.killed += killed
            if decision.suspends:
                self._suspended(decision, outcome)
            victims.extend((task, PendingReason.VICTIM) for task in killed)

    def _enqueue(
        self,
        request: Request,
        reason: PendingReason,
        now: float,
        executed_s: float,
        pending_s: float,
        outcome: Outcome,
        preemptions: int = 0,
    ) -> None:
        # a request that ran before needs another allocation to run again; a new one's first
        # is free (it starts at Q = 0)
        alpha = self.alpha_s if reason is not PendingReason.QUEUED else 0.0
        entry = PendingEntry(
            request=request,
            reason=reason,
            enqueued_at=now,
            deadline=violation_deadline(
                now, executed_s, pending_s, self.slo.objective(request.cls), alpha
            ),
            executed_s=executed_s,
            pending_s=pending_s,
            preemptions=preemptions,
        )
        self.store.push_pending(entry)
        outcome.queued.append(entry)


def _first_untried(
    entries: Iterable[PendingEntry], tried: Collection[str], only: str | None = None
) -> PendingEntry | None:
    """The first of ``entries`` whose request is not in ``tried`` (and is ``only``, if
    given). A loop: ``next`` over a generator expression would build the list of all of them
    first once compiled, since mypyc compiles generator expressions as lists; over a long
    queue, at every try of a round."""
    for entry in entries:
        request_id = entry.request.id
        if request_id not in tried and (only is None or request_id == only):
            return entry
    return None


def _note_failed(failed: list[list[tuple[int, int]] | None], group: int, cpu: int,
                 memory: int) -> None:
    """``failed[group]`` with the size (``cpu``, ``memory``), less the sizes it is at most
    (none of them is at most it: that request would have been skipped, not tried)."""
    kept = [size for size in failed[group] or () if not (cpu <= size[0] and memory <= size[1])]
    kept.append((cpu, memory))
    failed[group] = kept
