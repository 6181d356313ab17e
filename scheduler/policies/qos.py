"""``qos``: the QoS-driven policy (DESIGN 3.11), after the QoS-driven scheduling paper, on top
of this design's overbooking.

Every request that fits some host is admitted into the pending queue with Q = 0 (a client that
asks ``queue: false`` keeps the thesis behaviour: refused unless a host takes it at once). The
scheduler then runs rounds over the queue (on every arrival, task end, host join or loss,
utilization drop, and at least every ``watchdog_s``), taking the lowest Q first. For each
request j:

1. hosts that take j without preemption: the energy policy's simple and cut passes, unchanged;
2. else preemption, on hosts of every region: on a host, running tasks k are considered by Q
   descending (ties: class descending, then utilization ascending); k is eligible when
   Q_j < Q_k and Q_k >= phi (the safety margin); or both are below phi and j's class is more
   important (a lower number); or both are below phi, of the same class, and Q_j < Q_k. A task
   of j's own class whose preemption overhead C_k exceeds 1 - sigma(c_k) is not eligible. Eligible
   tasks are taken until j fits (the host's class recomputed from what remains);
3. among the feasible hosts, the smallest cost S = (d1, d2, d3, d4, s+) wins (eq. 9): d_i sums
   phi - Q_k over the victims of class i below the margin (how deep into it the preemption pushes
   them), s+ is 1 / the sum of Q_k - phi over the other victims (0 with none, 1 / 1 ms when that
   sum is 0); ties by the kill pass's host order;
4. the victims go back to the queue with their own Q and original resources, never placed back
   on the host they left in the same round.

Q of a running task k: e_k / sigma - (e_k + p_k) - alpha, e_k counting its current run; its
overhead C_k = (its preemptions x alpha) / (e_k + that), alpha being the expected allocation
time (the scheduler's). Pure: the scheduler gives the moment, the SLO table and alpha.
"""

from __future__ import annotations

import bisect
from collections.abc import Collection, Iterable
from dataclasses import dataclass, field

from domain.classes import ClassTable
from domain.decision import Decision, Pass
from domain.model import HostView, Request, Task
from domain.preemption import restarts_from_scratch, suspendable, times_after_kill, times_now
from domain.regions import Region
from domain.slo import SloTable, preemption_overhead, qos_metric
from domain.store import ClusterReader
from scheduler.explain import Notes, why_excluded
from scheduler.plugin import PolicyPlugin
from scheduler.policies.energy import Passes
from scheduler.victims import helps, split

NO_SLACK_COST = 1 / 0.001  # s+ when the other victims' slack sums to 0 (1 / 1 ms)
Victims = tuple[tuple[str, ...], tuple[str, ...]]  # (killed, suspended) task ids


@dataclass(frozen=True)
class QosOptions:
    safety_margin_s: float = field(
        default=10.0,
        metadata={"help": "phi: a running task with Q below it is preempted only for a more "
                          "important class, or a more urgent request of its own class",
                  "metavar": "S"},
    )
    overhead_cap: bool = field(
        default=True,
        metadata={"help": "a task whose preemption overhead C exceeds 1 - its SLO is not "
                          "preempted for a request of its own class"},
    )
    watchdog_s: float = field(
        default=10.0,
        metadata={"help": "a round over the queue at least this often (the simulator's; live "
                          "it is GREENSWARM_RETRY_INTERVAL_S)", "metavar": "S"},
    )
    suspend: bool = field(
        default=True,
        metadata={"help": "pause a job victim (or a class-4 service) instead of killing it "
                          "where only CPU is missing (DESIGN 3.14)"},
    )


@dataclass
class QosPolicy:
    options: QosOptions = field(default_factory=QosOptions)
    name: str = "qos"
    # Running tasks' Q at one moment: a round decides many requests at the same ``now`` (a
    # task placed meanwhile carries the same e and p, so its Q is the same).
    _q_at: float = field(default=float("nan"), repr=False)
    _q: dict[tuple[str, bool], float] = field(default_factory=dict, repr=False)
    # Each host's tasks judged at that moment, by host: where victims may not be paused,
    # and where they may.
    _judged_hosts: tuple[dict[str, _Judged], dict[str, _Judged]] = field(
        default_factory=lambda: ({}, {}), repr=False)

    # -- the Policy protocol ------------------------------------------------------------

    def decide(
        self,
        request: Request,
        view: ClusterReader,
        *,
        exclude: Collection[str] = (),
        explain: bool = False,
    ) -> Decision:
        """Outside a round (``greenswarm decide``): the request as new (Q = 0), every task's Q
        at t = 0 of its own clock, default objectives, no allocation time."""
        return self.decide_waiting(request, view, q_s=0.0, now=0.0, slo=SloTable(),
                                   alpha_s=0.0, exclude=exclude, explain=explain)

    def may_place(
        self, request: Request, hosts: Iterable[HostView], classes: ClassTable
    ) -> bool:
        """Always True: whether a task may be preempted depends on time, not on the hosts'
        books alone, so a retry can never be skipped."""
        return True

    # -- rounds ------------------------------------------------------------------------------

    @property
    def watchdog_s(self) -> float:
        return self.options.watchdog_s

    def decide_waiting(
        self,
        request: Request,
        view: ClusterReader,
        *,
        q_s: float,
        now: float,
        slo: SloTable,
        alpha_s: float,
        exclude: Collection[str] = (),
        explain: bool = False,
    ) -> Decision:
        """The decision for a request of QoS metric ``q_s`` at ``now`` (a round's)."""
        notes = Notes(explain)
        passes = Passes(request, view, exclude, notes, False, policy=self.name, now=now,
                        suspend=self.options.suspend)
        decision = passes.simple() or passes.cut()
        if decision is not None:
            return decision
        ranked: list[tuple[tuple[float, ...], tuple[object, ...], HostView, Victims, int]] = []
        for host in view.all_hosts():
            if host.id in exclude:
                notes.host("preempt", host, why_excluded(exclude, host.id))
                continue
            found = self._victims(request, host, view, q_s, now, slo, alpha_s, notes)
            if found is None:
                continue
            victims, new_class, cost = found
            ranked.append((cost, _host_order(host, request.cls), host, victims, new_class))
        if not ranked:
            return Decision.refused(
                request,
                f"qos: no host takes {request.cpu_shares} CPU shares and {request.memory} bytes "
                f"of class {request.cls}, even by preempting what is eligible (Q = {q_s:.1f} s)",
                tuple(notes.lines),
                policy=self.name,
            )
        cost, _, host, victims, new_class = min(ranked, key=lambda item: (item[0], item[1]))
        kills, suspends = victims
        names = ", ".join([*kills, *(f"{v} (suspended)" for v in suspends)])
        count = len(kills) + len(suspends)
        reason = (f"preempt pass: {host.region.value} host {host.id} "
                  f"(class {host.host_class or 'empty'}, U={host.util:.2f}): fits once "
                  f"{names} {'is' if count == 1 else 'are'} preempted "
                  f"(Q = {q_s:.1f} s, cost {_format_cost(cost)})")
        notes.host("preempt", host, f"takes it: {reason}")
        return Decision(
            request=request,
            placed=True,
            host=host.id,
            pass_=Pass.PREEMPT,
            cpu_shares=request.cpu_shares,
            memory=request.memory,
            kills=kills,
            new_class=new_class,
            reason=reason,
            explain=tuple(notes.lines),
            policy=self.name,
            suspends=suspends,
        )

    def _victims(
        self,
        request: Request,
        host: HostView,
        view: ClusterReader,
        q_j: float,
        now: float,
        slo: SloTable,
        alpha_s: float,
        notes: Notes,
    ) -> tuple[Victims, int, tuple[float, ...]] | None:
        """The eligible tasks that make room for ``request`` on ``host`` as (killed,
        suspended) ids, the host's class after, and the cost of preempting them; None when
        the host is infeasible. Each candidate is judged by its Q right after the preemption
        (DESIGN 3.11): a job that restarts from scratch loses its run to p when killed; one
        that would be suspended (only CPU missing here, DESIGN 3.14) loses nothing."""
        cpu, memory = request.cpu_shares, request.memory
        if cpu > host.cpu_capacity or memory > host.memory_capacity:
            notes.host("preempt", host, "the request exceeds the machine")
            return None
        phi = self.options.safety_margin_s
        rc = request.cls
        strictest = min(rc, host.host_class or rc)
        # memory short even beside every task: victims must be killed to free it
        memory_short = host.memory_allocated + memory > host.memory_limits[strictest - 1]
        suspending = self.options.suspend and not memory_short
        judged = self._judged(host.id, view.tasks_on(host.id), suspending, now, slo, alpha_s)
        counts = list(judged.counts)
        chosen: list[Task] = []
        chosen_q: list[float] = []
        cpu_alloc, memory_alloc = host.cpu_allocated, host.memory_allocated
        cpu_limits, memory_limits = host.cpu_limits, host.memory_limits
        new_class = _strictest(counts, rc)
        # (with nothing chosen: a host the simple and cut passes do not walk, an EED one,
        # takes the request as it is). The fit test is written out here and below, not called:
        # a helper made the thesis hour of `qos` 4-11 % slower, compiled (docs/DESIGN.md, native
        # core, twelfth step).
        fits = (cpu_alloc + cpu <= cpu_limits[new_class - 1]
                and memory_alloc + memory <= memory_limits[new_class - 1])
        if not fits and q_j == q_j and _ascending(cpu_limits) and _ascending(memory_limits):
            # every eligible task preempted is the most a walk can free (3.3: a host's limits
            # only grow as its class does): where even that is short, no walk fits (a Q_j
            # that is not a number is walked: its comparisons follow no order)
            freed = judged.freeable(rc, phi)
            if freed is not None:
                free_cpu, free_memory, left = freed.after(q_j, phi, counts)
                most_class = _strictest(left, rc)
                if (cpu_alloc - free_cpu + cpu > cpu_limits[most_class - 1]
                        or memory_alloc - free_memory + memory > memory_limits[most_class - 1]):
                    notes.host("preempt", host, "does not fit even without every eligible task")
                    return None
        if not fits:
            for task, q_k, killed, capped, from_scratch in judged.order:
                cpu_short = cpu_alloc + cpu > cpu_limits[new_class - 1]
                mem_short = memory_alloc + memory > memory_limits[new_class - 1]
                if not helps(task, cpu_short, mem_short):
                    continue  # a paused task holds memory only: taken while memory is short
                if not _eligible(rc, q_j, task.cls, q_k, phi, capped=capped,
                                 destroys_work=killed and from_scratch):
                    continue
                chosen.append(task)
                chosen_q.append(q_k)
                counts[task.cls] -= 1
                cpu_alloc -= task.cpu_shares
                memory_alloc -= task.memory
                new_class = _strictest(counts, rc)
                if (cpu_alloc + cpu <= cpu_limits[new_class - 1]
                        and memory_alloc + memory <= memory_limits[new_class - 1]):
                    fits = True
                    break
        if not fits:
            notes.host("preempt", host, "does not fit even without every eligible task")
            return None
        short = host.memory_allocated + memory - memory_limits[new_class - 1]
        victims = split(chosen, short, self.options.suspend)
        return victims, new_class, _cost(chosen, chosen_q, phi)

    def _judged(
        self,
        host_id: str,
        tasks: list[Task],
        suspending: bool,
        now: float,
        slo: SloTable,
        alpha_s: float,
    ) -> _Judged:
        """A host's tasks as the preempt pass walks them at ``now``: in the order victims are
        considered, each with its Q after the preemption and what limits its eligibility.
        Kept per host until its tasks differ: a round decides every waiting request at one
        moment, and most of its decisions place nothing, so a host is judged again only
        when something changed on it."""
        if now != self._q_at:
            self._q_at, self._q, self._judged_hosts = now, {}, ({}, {})
        kept = self._judged_hosts[suspending]
        judged = kept.get(host_id)
        if (judged is not None and (judged.slo is slo or judged.slo == slo)
                and judged.alpha_s == alpha_s and judged.tasks == tasks):
            return judged
        known = self._q
        cap = self.options.overhead_cap
        rows: list[tuple[float, int, float, str, tuple[Task, float, bool, bool, bool]]] = []
        counts = [0, 0, 0, 0, 0]
        for t in tasks:
            paused = suspending and suspendable(t)
            q = known.get((t.id, paused))
            if q is None:
                q = known[(t.id, paused)] = task_q_after(t, now, slo, alpha_s, paused=paused)
            capped = cap and over_cap(t, now, slo, alpha_s)
            rows.append((-q, -t.cls, t.util, t.id,
                         (t, q, not paused, capped, restarts_from_scratch(t))))
            counts[t.cls] += 1
        rows.sort()  # (ids are unique: the items themselves are never compared)
        judged = _Judged(tasks, slo, alpha_s, [row[4] for row in rows], counts)
        kept[host_id] = judged
        return judged


class _Judged:
    """One host's tasks judged at one moment (QosPolicy._judged): ``order`` holds, per task in
    the order victims are considered (Q descending; class descending, utilization ascending,
    id), the task, its Q after the preemption, whether taking it kills it, whether its
    preemption overhead bars it for a request of its own class, and whether it restarts from
    scratch; ``counts`` the tasks per class (index 1-4)."""

    __slots__ = ("_freeable", "alpha_s", "counts", "order", "slo", "tasks")

    def __init__(
        self,
        tasks: list[Task],
        slo: SloTable,
        alpha_s: float,
        order: list[tuple[Task, float, bool, bool, bool]],
        counts: list[int],
    ) -> None:
        self.tasks = tasks
        self.slo = slo
        self.alpha_s = alpha_s
        self.order = order
        self.counts = counts
        self._freeable: list[_Freeable | None] = [None] * 5  # by request class, once asked

    def freeable(self, rc: int, phi: float) -> _Freeable | None:
        """What preempting every task eligible for a request of class ``rc`` frees (None
        when a Q is not a number: then nothing is told in advance)."""
        known = self._freeable[rc]
        if known is None:
            known = self._freeable[rc] = _Freeable.of(self.order, rc, phi)
        return None if known.unknown else known


_Freed = tuple[int, int, int, int, int, int]  # CPU shares, memory, tasks of class 1, 2, 3, 4
_NOTHING: _Freed = (0, 0, 0, 0, 0, 0)


def _plus(freed: _Freed, task: Task) -> _Freed:
    cpu, memory, c1, c2, c3, c4 = freed
    cls = task.cls
    return (cpu + task.cpu_shares, memory + task.memory, c1 + (cls == 1), c2 + (cls == 2),
            c3 + (cls == 3), c4 + (cls == 4))


class _Freeable:
    """One host's tasks judged at one moment, for requests of one class: what preempting every
    eligible task frees, as a function of the request's Q (the eligibility of DESIGN 3.11 with
    the Q of the tasks fixed). With slack (Q_k >= phi), a task is eligible when Q_j < Q_k: of
    those in Q order, a prefix. Inside the margin, only for Q_j < phi: those of less important
    classes all, those of the request's class when Q_j < Q_k (a prefix again). Tasks the
    overhead cap or a restart from scratch protects from this class never count."""

    __slots__ = ("lower", "same", "same_q", "slack", "slack_q", "unknown")

    def __init__(self) -> None:
        self.slack_q: list[float] = []  # -Q_k of the tasks with slack, ascending
        self.slack: list[_Freed] = [_NOTHING]  # freed by the first i of them
        self.same_q: list[float] = []  # the same for the request's class inside the margin
        self.same: list[_Freed] = [_NOTHING]
        self.lower: _Freed = _NOTHING  # the less important classes inside the margin
        self.unknown = False

    @staticmethod
    def of(order: list[tuple[Task, float, bool, bool, bool]], rc: int, phi: float) -> _Freeable:
        freeable = _Freeable()
        for task, q_k, killed, capped, from_scratch in order:  # Q descending
            if q_k != q_k:
                freeable.unknown = True  # NaN: no order to bisect
                return freeable
            cls = task.cls
            if (capped and cls == rc) or (killed and from_scratch and rc >= cls):
                continue
            if q_k >= phi:
                freeable.slack_q.append(-q_k)
                freeable.slack.append(_plus(freeable.slack[-1], task))
            elif cls == rc:
                freeable.same_q.append(-q_k)
                freeable.same.append(_plus(freeable.same[-1], task))
            elif cls > rc:
                freeable.lower = _plus(freeable.lower, task)
        return freeable

    def after(self, q_j: float, phi: float, counts: list[int]) -> tuple[int, int, list[int]]:
        """The CPU shares and memory every task eligible for a request of Q ``q_j`` frees, and
        the tasks per class (index 1-4) left of ``counts`` once they are gone."""
        cpu, memory, c1, c2, c3, c4 = self.slack[bisect.bisect_left(self.slack_q, -q_j)]
        if q_j < phi:
            s_cpu, s_memory, s1, s2, s3, s4 = self.same[bisect.bisect_left(self.same_q, -q_j)]
            l_cpu, l_memory, l1, l2, l3, l4 = self.lower
            cpu, memory = cpu + s_cpu + l_cpu, memory + s_memory + l_memory
            c1, c2, c3, c4 = c1 + s1 + l1, c2 + s2 + l2, c3 + s3 + l3, c4 + s4 + l4
        return cpu, memory, [0, counts[1] - c1, counts[2] - c2, counts[3] - c3, counts[4] - c4]


def _ascending(limits: tuple[int, ...]) -> bool:
    """Whether a host's limits never fall as its class grows (they never do when a class
    table made them)."""
    return all(limits[i - 1] <= limits[i] for i in range(1, len(limits)))


def _strictest(counts: list[int], request_class: int) -> int:
    """The host's class with the request and the tasks counted per class: the most important
    (lowest) of them."""
    for cls in range(1, request_class):
        if counts[cls]:
            return cls
    return request_class


def _eligible(
    rc: int, q_j: float, task_cls: int, q_k: float, phi: float, *, capped: bool,
    destroys_work: bool,
) -> bool:
    """Whether a running task of class ``task_cls`` and Q ``q_k`` may be preempted for a
    request of class ``rc`` and Q ``q_j`` (DESIGN 3.11): ``capped``, its preemption overhead
    exceeds 1 - its SLO; ``destroys_work``, it would be killed and restart from scratch."""
    if capped and task_cls == rc:
        return False
    if destroys_work and rc >= task_cls:
        # killing it only destroys work: never for a request of its own or a less
        # important class (DESIGN 3.11); a more important class may take its place
        return False
    if q_k >= phi:
        return q_j < q_k
    if q_j >= phi:
        return False
    if rc != task_cls:
        return rc < task_cls
    return q_j < q_k


def task_q(task: Task, now: float, slo: SloTable, alpha_s: float) -> float:
    """A running task's QoS metric at ``now``: what it ran before plus its current run (a
    paused task's pause is p)."""
    executed, pending = times_now(task, now)
    return qos_metric(executed, pending, slo.objective(task.cls), alpha_s)


def task_q_after(
    task: Task, now: float, slo: SloTable, alpha_s: float, *, paused: bool = False
) -> float:
    """A task's QoS metric right after it is preempted at ``now`` (DESIGN 3.11): killed, the
    run it throws away moves from e to p (3.10); ``paused``, it keeps everything."""
    executed, pending = times_now(task, now) if paused else times_after_kill(task, now)
    return qos_metric(executed, pending, slo.objective(task.cls), alpha_s)


def task_overhead(task: Task, now: float, alpha_s: float) -> float:
    """C_k: its allocation times (one per preemption, each alpha) over its run time and them."""
    executed, _ = times_now(task, now)
    return preemption_overhead(task.preemptions * alpha_s, executed)


def over_cap(task: Task, now: float, slo: SloTable, alpha_s: float) -> bool:
    """Whether ``task``'s preemption overhead C exceeds 1 - its SLO: with the overhead cap on,
    it is not preempted for a request of its own class."""
    return task_overhead(task, now, alpha_s) > 1 - slo.objective(task.cls)


def _cost(victims: list[Task], qs: list[float], phi: float) -> tuple[float, ...]:
    """S = (d1, d2, d3, d4, s+), compared lexicographically (DESIGN 3.11 step 3); ``qs`` the
    victims' Q, in their order."""
    deep = [0.0, 0.0, 0.0, 0.0]
    slack = 0.0
    others = 0
    for victim, q in zip(victims, qs, strict=True):
        if q < phi:
            deep[victim.cls - 1] += phi - q
        else:
            slack += q - phi
            others += 1
    if others == 0:
        s_plus = 0.0
    elif slack > 0:
        s_plus = 1 / slack
    else:
        s_plus = NO_SLACK_COST
    return (*deep, s_plus)


_REGION_RANK = {Region.EED: 0, Region.DEE: 1, Region.LEE: 2}


def _host_order(host: HostView, request_class: int) -> tuple[object, ...]:
    """The kill pass's host order (DESIGN 3.6), LEE hosts last: EED hosts by U ascending, the
    others by U descending; host classes rc, rc+1, ..., 4, then rc-1, ..., 1."""
    classes = [*range(request_class, 5), *range(request_class - 1, 0, -1)]
    cls = host.host_class
    class_rank = classes.index(cls) if cls is not None else len(classes)
    util = host.util if host.region is Region.EED else -host.util
    return (_REGION_RANK[host.region], class_rank, util, host.id)


def _format_cost(cost: tuple[float, ...]) -> str:
    return "(" + ", ".join(f"{c:.3g}" for c in cost) + ")"


PLUGIN = PolicyPlugin(
    name="qos",
    summary="the QoS-driven policy (DESIGN 3.11): every request admitted into the queue, rounds "
            "that serve the lowest Q first and preempt only what has slack",
    options=QosOptions,
    build=lambda options, seed: QosPolicy(options),
    passes=(Pass.SIMPLE, Pass.CUT, Pass.PREEMPT),
    admits_to_queue=True,
)
