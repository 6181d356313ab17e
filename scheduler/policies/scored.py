"""What the Swarm-style baselines share (DESIGN 3.9): classic Swarm's qualification and
score, and the scored policy that spread and binpack are. None of them overbooks, cuts or kills.

Scores are classic Swarm's: cpu = (allocated + request) x 100 / capacity, the same for memory;
a node qualifies only when both are <= 100. Spread takes the lowest sum, binpack the highest;
ties go to the node with fewest containers, then to the smallest id. A baseline has no passes:
its decisions carry the policy's name and no pass.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Iterator
from dataclasses import dataclass

from domain.classes import ClassTable
from domain.decision import Decision
from domain.model import HostView, Request
from domain.store import ClusterReader
from scheduler.explain import Notes, why_excluded
from scheduler.load import basis_note


def unreserved(
    request: Request, view: ClusterReader, exclude: Collection[str], notes: Notes, name: str
) -> Iterator[HostView]:
    """The hosts with the request's CPU and memory unreserved (3.3 with M = 1: no overbooking,
    cuts or kills), by id; the others are noted with the reason."""
    cpu, memory = request.cpu_shares, request.memory
    for host in view.all_hosts():
        if host.id in exclude:
            notes.host(name, host, why_excluded(exclude, host.id))
            continue
        if host.cpu_allocated + cpu > host.cpu_capacity:
            notes.host(name, host, "CPU score over 100")
            continue
        if host.memory_allocated + memory > host.memory_capacity:
            notes.host(name, host, "memory score over 100")
            continue
        yield host


def qualifying(
    request: Request, view: ClusterReader, exclude: Collection[str], notes: Notes, name: str
) -> Iterator[tuple[float, HostView]]:
    cpu, memory = request.cpu_shares, request.memory
    for host in unreserved(request, view, exclude, notes, name):
        score = (host.cpu_allocated + cpu) * 100 / host.cpu_capacity + (
            host.memory_allocated + memory
        ) * 100 / host.memory_capacity
        if notes.enabled:  # (formatting a score costs more than computing it)
            notes.host(name, host, f"qualifies, score {score:.1f}")
        yield score, host


def unreserved_fit(request: Request, hosts: Iterable[HostView], classes: ClassTable) -> bool:
    """A baseline's ``may_place``: exactly its own test, without overbooking."""
    cpu, memory = request.cpu_shares, request.memory
    return any(
        host.cpu_allocated + cpu <= host.cpu_capacity
        and host.memory_allocated + memory <= host.memory_capacity
        for host in hosts
    )


def place(request: Request, host: HostView, name: str, why: str, notes: Notes) -> Decision:
    host_class = host.host_class
    new_class = request.cls if host_class is None else min(host_class, request.cls)
    return Decision(
        request=request,
        placed=True,
        host=host.id,
        policy=name,
        cpu_shares=request.cpu_shares,
        memory=request.memory,
        new_class=new_class,
        reason=f"{name}: host {host.id} {why}",
        explain=tuple(notes.lines),
    )


def refuse(request: Request, name: str, notes: Notes) -> Decision:
    return Decision.refused(
        request,
        f"{name}: no node has {request.cpu_shares} CPU shares and "
        f"{request.memory} bytes unreserved",
        tuple(notes.lines),
        policy=name,
    )


@dataclass(frozen=True)
class ScoredPolicy:
    """Spread (lowest score) or binpack (highest score)."""

    name: str
    highest: bool

    def decide(
        self,
        request: Request,
        view: ClusterReader,
        *,
        exclude: Collection[str] = (),
        explain: bool = False,
    ) -> Decision:
        notes = Notes(explain)
        name, highest = self.name, self.highest
        cpu, memory = request.cpu_shares, request.memory
        best_host: HostView | None = None
        best_score = 0.0
        best_tasks = 0
        # ``qualifying``'s tests, notes and score written out in one loop: a decision reads
        # every host, and two generators per host made a decision 1.7-3x slower (measured)
        for host in view.all_hosts():
            if host.id in exclude:
                notes.host(name, host, why_excluded(exclude, host.id))
                continue
            cpu_total = host.cpu_allocated + cpu
            if cpu_total > host.cpu_capacity:
                notes.host(name, host, "CPU score over 100")
                continue
            memory_total = host.memory_allocated + memory
            if memory_total > host.memory_capacity:
                notes.host(name, host, "memory score over 100")
                continue
            score = cpu_total * 100 / host.cpu_capacity + memory_total * 100 / host.memory_capacity
            if notes.enabled:
                notes.host(name, host, f"qualifies, score {score:.1f}")
            if best_host is not None:
                # (score, tasks, id) against the best's, as Swarm ranks them, without a key
                # tuple per host; scores are finite, so ``not a < b and a != b`` is ``a > b``
                if score != best_score:
                    if (score < best_score) is highest:
                        continue
                else:
                    tasks = host.task_count
                    if tasks > best_tasks or (tasks == best_tasks and host.id > best_host.id):
                        continue
            best_host, best_score, best_tasks = host, score, host.task_count
        if best_host is None:
            return refuse(request, name, notes)
        return place(request, best_host, name, f"scores {best_score:.1f}", notes)

    may_place = staticmethod(unreserved_fit)




def highest_score(
    request: Request, view: ClusterReader, exclude: Collection[str], notes: Notes, name: str,
    score: Callable[[HostView], float], describe: Callable[[HostView, float], str],
) -> Decision:
    """The unreserved host with the highest ``score`` (ties: fewest tasks, then smallest id).
    ``describe`` gives a host's score as text: for each host's note, with how its utilization
    was read, when notes are kept, and for the chosen host's reason (without notes only that
    one: formatting every host's figures cost more than scoring them)."""
    best: tuple[float, int, str] | None = None
    best_host: HostView | None = None
    best_value = 0.0
    for host in unreserved(request, view, exclude, notes, name):
        value = score(host)
        if notes.enabled:
            notes.host(name, host, describe(host, value) + basis_note(view, host.id))
        key = (-value, host.task_count, host.id)
        if best is None or key < best:
            best, best_host, best_value = key, host, value
    if best_host is None:
        return refuse(request, name, notes)
    return place(request, view.host(best_host.id), name, describe(best_host, best_value), notes)
