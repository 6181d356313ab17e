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
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass, field

from domain.decision import Decision
from domain.errors import ConflictError, NotFoundError
from domain.model import Request, Task
from domain.pending import PendingEntry, PendingReason, violation_deadline
from domain.restore import TaskRestore
from domain.slo import SloTable
from domain.store import ChangeLog, ClusterStore
from scheduler.plugin import Policy

# Kill chains end by construction (victims are of strictly higher classes, or class-4 services
# for class-4 jobs); this bound only guards against a broken invariant.
MAX_CHAIN = 10_000
# How many pending entries one retry round decides at most (most urgent first); the rest wait
# for the next event that frees room. Keeps an event's cost bounded when the queue is long.
DEFAULT_RETRY_LIMIT = 32


# The reason of a retry that was not decided (see Scheduler.retry_pending).
NOT_RETRIED = "no host that changed since its last try could take it"


@dataclass
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
    ) -> None:
        self.store = store
        self.policy = policy
        self.retry_limit = retry_limit
        # The queue's order (DESIGN 3.10): each class's objective, and the allocation time a
        # request that ran before needs to run again.
        self.slo = slo or SloTable()
        self.alpha_s = alpha_s
        # With a store that logs its changes: where each waiting request last failed, so a
        # retry can tell "no changed host could take it" without deciding (see retry_pending).
        self._log: ChangeLog | None = (
            store if skip_unchanged and isinstance(store, ChangeLog) else None
        )
        self._failed_at: dict[str, int] = {}
        # Hosts that keep their tasks but take no new placement (paused Swarm nodes, DESIGN 4):
        # every decision excludes them (set_closed_hosts).
        self.closed_hosts: frozenset[str] = frozenset()

    def set_closed_hosts(self, host_ids: frozenset[str]) -> bool:
        """Hosts that take no new placement from now on; True when the set changed (a host
        that opens again may take what waits: the skips of retry_pending start afresh)."""
        if host_ids == self.closed_hosts:
            return False
        self.closed_hosts = host_ids
        self._failed_at.clear()
        return True

    # -- new requests ---------------------------------------------------------------------

    def submit(self, request: Request, now: float, *, queue: bool = False) -> Outcome:
        """Place a new request; refuse it, or queue it when ``queue`` and nothing takes it."""
        if self.store.task(request.id) is not None or self.store.is_pending(request.id):
            raise ConflictError(f"request {request.id!r} is already known")
        outcome = Outcome()
        decision = self._decide(request, outcome)
        if decision.placed:
            self._apply(decision, now, 0.0, 0.0, outcome)
        elif queue:
            outcome.waiting.append(decision)
            self._enqueue(request, PendingReason.QUEUED, now, 0.0, 0.0, outcome)
        else:
            outcome.refused.append(decision)
        self._restore(outcome)
        return outcome

    # -- tasks that must move -------------------------------------------------------------

    def reschedule(self, tasks: list[Task], now: float, reason: PendingReason) -> Outcome:
        """Resubmit tasks removed from their hosts (killed, or their host left); the hosts they
        left (those still there) give cuts back."""
        outcome = Outcome()
        self._cascade(deque((task, reason) for task in tasks), now, outcome)
        self._restore(outcome, (task.host for task in tasks))
        return outcome

    def host_lost(self, host_id: str, now: float) -> Outcome:
        tasks = self.store.remove_host(host_id)
        return self.reschedule(tasks, now, PendingReason.HOST_LOST)

    def task_ended(self, task_id: str, now: float) -> tuple[Task, Outcome]:
        """A task finished, failed, or was stopped: free its room, retry the queue, then give
        cuts back on its host."""
        task = self.store.end_task(task_id)
        return task, self.retry_pending(now, freed=(task.host,))

    # -- pending queue --------------------------------------------------------------------

    def retry_pending(self, now: float, freed: Iterable[str] = ()) -> Outcome:
        """Try waiting requests in time-to-violate order; the placed ones leave the queue.
        Then the hosts of ``freed`` (room grew there: a task left) and those where a retry
        killed give cuts back.

        An entry is skipped when one at least as small, of the same class and type, already
        failed in this round (every pass is monotone in the request size); at most
        ``retry_limit`` entries are tried per round.

        With a store that logs its changes (``domain.store.ChangeLog``), an entry that failed
        before is decided again only if a host that changed since could take it
        (``Policy.may_place``): whether a host takes a request depends on that host's books
        alone, so the other hosts would refuse it again. Such an entry counts as tried and
        failed, exactly as if it had been decided: the outcome is the same either way.
        """
        outcome = Outcome()
        # (class, type) -> sizes (cpu, memory) that failed in this round
        failed: dict[tuple[int, str], list[tuple[int, int]]] = {}
        attempts = 0
        marks = self._failed_at
        entries = self.store.pending()
        for entry in entries:
            if attempts >= self.retry_limit:
                break
            request = entry.request
            group = (request.cls, request.type)
            smaller = failed.get(group)
            if smaller is not None:
                cpu_shares, memory = request.cpu_shares, request.memory
                if any(cpu <= cpu_shares and mem <= memory for cpu, mem in smaller):
                    continue  # not tried: the mark of its last failure still holds
            attempts += 1
            if self._may_place_now(request, marks.get(request.id)):
                decision = self._decide(request, outcome)
                if decision.placed:
                    marks.pop(request.id, None)
                    self.store.remove_pending(request.id)
                    self._apply(decision, now, entry.executed_s, entry.waited(now), outcome,
                                entry.preemptions)
                    continue
            else:
                outcome.decisions.append(
                    Decision.refused(request, NOT_RETRIED, policy=self.policy.name)
                )
            failed.setdefault(group, []).append((request.cpu_shares, request.memory))
            if self._log is not None:
                marks[request.id] = self._log.change_mark()
        if len(marks) > 2 * len(entries) + 64:  # forget requests that left the queue otherwise
            waiting = {entry.request.id for entry in entries}
            self._failed_at = {rid: mark for rid, mark in marks.items() if rid in waiting}
        self._restore(outcome, freed)
        return outcome

    # -- cuts given back ------------------------------------------------------------------

    def _restore(self, outcome: Outcome, freed: Iterable[str] = ()) -> None:
        """Give cuts back on every host of ``freed`` and every host a kill of ``outcome``
        took a task from, by host id; a host that left meanwhile is skipped."""
        hosts = {*freed, *(victim.host for victim in outcome.killed)}
        for host_id in sorted(hosts):
            try:
                outcome.restored += self.store.restore_cuts(host_id)
            except NotFoundError:
                continue  # the host left (host_lost): nothing to give back there

    def _may_place_now(self, request: Request, failed_at: int | None) -> bool:
        """False when ``request`` failed at mark ``failed_at`` and no host changed since
        could take it; True when it may fit, or when that cannot be told."""
        if self._log is None or failed_at is None:
            return True
        changed = self._log.changed_since(failed_at)
        if changed is None:
            return True
        return self.policy.may_place(request, changed, self.store.classes)

    # -- internals ------------------------------------------------------------------------

    def _decide(
        self, request: Request, outcome: Outcome, exclude: tuple[str, ...] = ()
    ) -> Decision:
        """The policy's decision, timed, and noted in ``outcome``."""
        if self.closed_hosts:
            exclude = (*exclude, *self.closed_hosts)
        started = time.perf_counter_ns()
        decision = self.policy.decide(request, self.store, exclude=exclude)
        decision = decision.timed((time.perf_counter_ns() - started) / 1e6)
        outcome.decisions.append(decision)
        return decision

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
        outcome.applied.append(decision)
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
            executed = victim.executed_s + max(0.0, now - victim.started_at)
            preemptions = victim.preemptions + 1  # taken off its host: a kill, or a lost host
            request = victim.as_request()
            decision = self._decide(request, outcome, exclude=(victim.host,))
            if not decision.placed:
                self._enqueue(request, reason, now, executed, victim.pending_s, outcome,
                              preemptions)
                continue
            killed = self.store.apply(decision, now, executed, victim.pending_s, preemptions)
            outcome.applied.append(decision)
            outcome.killed += killed
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
