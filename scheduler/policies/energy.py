"""The energy-aware policy: simple, cut and kill passes, exactly as DESIGN 3.4-3.6.

Every pass walks candidate hosts in (region, host class, U) order and stops at the first host
that takes the request. Hosts are read through ``ClusterReader.hosts`` with a room key, so a
store can skip lists that cannot hold the request; each host is still checked here in full.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Iterator
from dataclasses import dataclass, field
from enum import StrEnum
from fractions import Fraction

from domain.books import cut_target
from domain.capacity import fits
from domain.classes import CLASSES, MEMORY_FLOOR, ClassTable, after_cut, after_cut_ratio
from domain.decision import Decision, Pass, TaskCut
from domain.model import HostView, Request, Task, TaskType
from domain.regions import Region
from domain.rooms import CUT_INDEX, KILL_INDEX, ROOM_KEYS, SIMPLE_INDEX, SIMPLE_ROOM
from domain.segments import Segment
from domain.store import ClusterReader
from scheduler.explain import Notes, why_excluded
from scheduler.plugin import PolicyPlugin
from scheduler.victims import VictimOrder, helps, in_kill_order, split


class EmptyHosts(StrEnum):
    """Where empty hosts stand in the simple pass."""

    LAST = "last"  # after every non-empty LEE and DEE host: idle machines stay idle
    LEE = "lee"  # as in the thesis: with the LEE hosts, before any DEE host


@dataclass(frozen=True)
class EnergyOptions:
    empty_hosts: EmptyHosts = field(
        default=EmptyHosts.LAST,
        metadata={"help": "empty hosts after every LEE and DEE host (last) or among the LEE "
                          "hosts as in the thesis (lee)"},
    )
    predict_recent: bool = field(
        default=False,
        metadata={"help": "add to each host's utilization the predicted use of tasks placed "
                          "since it was measured, and judge hosts measured too long ago by "
                          "allocation (DESIGN 3.12)"},
    )
    victims: VictimOrder = field(
        default=VictimOrder.LOSS,
        metadata={"help": "the kill pass's victims within a class: loss, the work their kill "
                          "would lose ascending, then utilization (DESIGN 3.6); thesis, "
                          "utilization ascending"},
    )
    suspend: bool = field(
        default=True,
        metadata={"help": "pause a job victim (or a class-4 service) instead of killing it "
                          "where only CPU is missing (DESIGN 3.14)"},
    )


@dataclass(frozen=True)
class EnergyPolicy:
    empty_hosts: EmptyHosts = EmptyHosts.LAST
    name: str = "energy"
    predict_recent: bool = False
    victims: VictimOrder = VictimOrder.LOSS
    suspend: bool = True

    @property
    def predicts_recent(self) -> bool:
        return self.predict_recent

    def decide(
        self,
        request: Request,
        view: ClusterReader,
        *,
        exclude: Collection[str] = (),
        explain: bool = False,
    ) -> Decision:
        """The decision at moment 0 of the tasks' clocks (their work lost: since then)."""
        return self.decide_at(request, view, now=0.0, exclude=exclude, explain=explain)

    def decide_at(
        self,
        request: Request,
        view: ClusterReader,
        *,
        now: float,
        exclude: Collection[str] = (),
        explain: bool = False,
    ) -> Decision:
        """The decision at ``now``: the kill pass weighs the work each victim would lose."""
        run = Passes(request, view, exclude, Notes(explain), self.empty_hosts is EmptyHosts.LEE,
                     now=now, victims=self.victims, suspend=self.suspend)
        decision = run.simple() or run.cut() or run.kill()
        if decision is not None:
            return decision
        return Decision.refused(
            request,
            f"no host can take {request.cpu_shares} CPU shares and {request.memory} bytes "
            f"of class {request.cls}, even with cuts and kills",
            tuple(run.notes.lines),
            policy=self.name,
        )

    def may_place(
        self, request: Request, hosts: Iterable[HostView], classes: ClassTable
    ) -> bool:
        """Whether one of the passes would take ``request`` on one of ``hosts``, each judged
        as the passes below judge a host: by its region, class and rooms (which are exact)."""
        rc = request.cls
        cpu, memory = request.cpu_shares, request.memory
        # The request as cut on a stricter host of class hc (3.5 step 2), for hc < rc: worked
        # out for the classes met only (most calls judge a few hosts).
        cut_needs: dict[int, tuple[int, int]] = {}
        cut_index = CUT_INDEX[rc]
        kill_index = KILL_INDEX[rc, request.type is TaskType.JOB]
        eed, lee = Region.EED, Region.LEE
        for host in hosts:
            hc, region, rooms = host.host_class, host.region, host.rooms
            if hc is None:  # an empty host: the simple pass, outside EED
                if region is not eed:
                    room = rooms[SIMPLE_INDEX]
                    if cpu <= room[0] and memory <= room[1]:
                        return True
                continue
            if region is not eed:  # the simple and cut passes
                if hc < rc:  # the cut request covers the simple pass
                    cut_need = cut_needs.get(hc)
                    if cut_need is None:
                        n, d = classes.request_cut_ratio(rc, hc)
                        cut_need = cut_needs[hc] = (after_cut_ratio(cpu, n, d),
                                                    after_cut_ratio(memory, n, d, MEMORY_FLOOR))
                    room = rooms[SIMPLE_INDEX]
                    if cut_need[0] <= room[0] and cut_need[1] <= room[1]:
                        return True
                else:  # covers the simple pass when hc == rc
                    room = rooms[cut_index]
                    if cpu <= room[0] and memory <= room[1]:
                        return True
            if region is not lee:  # the kill pass
                room = rooms[kill_index]
                if cpu <= room[0] and memory <= room[1]:
                    return True
        return False


class Passes:
    """One decision's passes: the request, the store, and the notes of the passes. The
    QoS-driven policy runs the simple and cut passes as they are (DESIGN 3.11 step 1), under
    its own name."""

    def __init__(
        self,
        request: Request,
        view: ClusterReader,
        exclude: Collection[str],
        notes: Notes,
        empties_in_lee: bool,
        policy: str = "energy",
        *,
        now: float = 0.0,
        victims: VictimOrder = VictimOrder.LOSS,
        suspend: bool = True,
    ) -> None:
        self.request = request
        self.policy = policy
        self.now = now
        self.victim_order = victims
        self.suspend = suspend
        self.empties_in_lee = empties_in_lee
        self.view = view
        self.exclude = exclude
        self.notes = notes
        self.classes = view.classes
        self.need = (request.cpu_shares, request.memory)

    # -- candidates -------------------------------------------------------------------------

    def _walk(self, pass_name: str, segments: list[Segment]) -> Iterator[HostView]:
        """The hosts of the pass's lists in order, less the excluded ones."""
        if self.notes.enabled:  # read every host so each one gets its line
            segments = [segment.every_host() for segment in segments]
        for _, host in self.view.candidates(segments):
            if host.id in self.exclude:
                self.notes.host(pass_name, host, why_excluded(
                    self.exclude, host.id, "excluded (the task was just removed from it)"))
                continue
            yield host

    def _placed(
        self,
        host: HostView,
        pass_: Pass,
        new_class: int,
        reason: str,
        *,
        cut: Fraction = Fraction(0),
        cuts: tuple[TaskCut, ...] = (),
        kills: tuple[str, ...] = (),
        suspends: tuple[str, ...] = (),
    ) -> Decision:
        request = self.request
        # (str() and the f-string give the value: an enum's .value is interpreted code)
        self.notes.host(str(pass_), host, f"takes it: {reason}")
        return Decision(
            request=request,
            placed=True,
            host=host.id,
            pass_=pass_,
            cpu_shares=after_cut(request.cpu_shares, cut),
            memory=after_cut(request.memory, cut, MEMORY_FLOOR),
            cut_received=cut,
            cuts=cuts,
            kills=kills,
            new_class=new_class,
            reason=f"{pass_} pass: {host.region} host {host.id} "
            f"(class {host.host_class or 'empty'}, U={host.util:.2f}): {reason}",
            explain=tuple(self.notes.lines),
            policy=self.policy,
            suspends=suspends,
        )

    # -- simple pass (3.4) ------------------------------------------------------------------

    def simple(self) -> Decision | None:
        rc = self.request.cls
        cpu, memory = self.need
        empty_regions = (Region.DEE,) if self.empties_in_lee else (Region.LEE, Region.DEE)
        segments: list[Segment] = []
        for region in (Region.LEE, Region.DEE):
            segments += [
                Segment(region, hc, False, SIMPLE_ROOM, self.need) for hc in range(1, rc + 1)
            ]
            if region is Region.LEE and self.empties_in_lee:
                segments.append(Segment(Region.LEE, None, False, SIMPLE_ROOM, self.need))
        segments += [Segment(r, None, False, SIMPLE_ROOM, self.need) for r in empty_regions]
        for host in self._walk("simple", segments):
            hc = host.host_class
            if hc is None:
                if fits(host, cpu, memory, rc):
                    return self._placed(host, Pass.SIMPLE, rc, "empty host, fits")
                self.notes.host("simple", host, "empty, but the request exceeds its capacity")
            elif hc <= rc:
                if fits(host, cpu, memory, hc):
                    return self._placed(host, Pass.SIMPLE, hc, "fits unchanged")
                self.notes.host("simple", host, "does not fit")
        return None

    # -- cut pass (3.5) ---------------------------------------------------------------------

    def cut(self) -> Decision | None:
        rc = self.request.cls
        cut_needs = {hc: self._cut_need(hc) for hc in range(1, rc)}
        segments = [
            Segment(region, hc, False, SIMPLE_ROOM, cut_needs[hc])
            if hc < rc
            else Segment(region, hc, False, ROOM_KEYS[CUT_INDEX[rc]], self.need)
            for region in (Region.LEE, Region.DEE)
            for hc in CLASSES
        ]
        for host in self._walk("cut", segments):
            hc = host.host_class
            if hc is None:
                continue
            # Step 2 on a stricter host; steps 1 and 3 otherwise.
            decision = self._cut_request(host, hc) if hc < rc else self._cut_tasks(host)
            if decision is not None:
                return decision
        return None

    def _cut_need(self, hc: int) -> tuple[int, int]:
        n, d = self.classes.request_cut_ratio(self.request.cls, hc)
        return (after_cut_ratio(self.need[0], n, d),
                after_cut_ratio(self.need[1], n, d, MEMORY_FLOOR))

    def _cut_request(self, host: HostView, hc: int) -> Decision | None:
        """Step 2: a stricter host; the request itself gives up t(rc) - t(hc)."""
        cpu, memory = self.need
        if fits(host, cpu, memory, hc):
            return self._placed(host, Pass.CUT, hc, "fits unchanged")
        cut = self.classes.request_cut(self.request.cls, hc)
        cut_cpu, cut_memory = self._cut_need(hc)
        if fits(host, cut_cpu, cut_memory, hc):
            reason = f"fits once the request is cut by {cut}"
            return self._placed(host, Pass.CUT, hc, reason, cut=cut)
        self.notes.host("cut", host, f"does not fit even with the request cut by {cut}")
        return None

    def _cut_tasks(self, host: HostView) -> Decision | None:
        """Steps 1 and 3: the host class becomes rc; its higher-class tasks give way."""
        rc = self.request.cls
        cpu, memory = self.need
        if fits(host, cpu, memory, rc):
            return self._placed(host, Pass.CUT, rc, "fits unchanged")
        cuts = self._select_cuts(host)
        if cuts is not None:
            names = ", ".join(f"{c.task} to {c.cut_received}" for c in cuts)
            return self._placed(host, Pass.CUT, rc, f"fits after cutting {names}", cuts=cuts)
        self.notes.host("cut", host, "does not fit even after every allowed cut")
        return None

    def _select_cuts(self, host: HostView) -> tuple[TaskCut, ...] | None:
        nc = self.request.cls
        cpu, memory = self.need
        if cpu > host.cpu_capacity or memory > host.memory_capacity:
            return None
        free_cpu = host.cpu_limits[nc - 1] - host.cpu_allocated
        free_memory = host.memory_limits[nc - 1] - host.memory_allocated
        chosen: list[TaskCut] = []
        for task in self.view.tasks_on(host.id):
            if task.cls <= nc:
                break  # ordered by class descending: nothing below may be cut
            target = cut_target(task, nc, self.classes)
            if target is None:
                continue
            total, new_cpu, new_memory = target
            freed_cpu, freed_memory = task.cpu_shares - new_cpu, task.memory - new_memory
            chosen.append(
                TaskCut(task.id, host.id, new_cpu, new_memory, total, freed_cpu, freed_memory)
            )
            free_cpu += freed_cpu
            free_memory += freed_memory
            if free_cpu >= cpu and free_memory >= memory:
                return tuple(chosen)
        return None

    # -- kill pass (3.6) --------------------------------------------------------------------

    def kill(self) -> Decision | None:
        rc = self.request.cls
        key = ROOM_KEYS[KILL_INDEX[rc, self.request.type is TaskType.JOB]]
        class_order = [*range(rc, 5), *range(rc - 1, 0, -1)]
        segments = [Segment(Region.EED, hc, True, key, self.need) for hc in class_order]
        segments += [Segment(Region.DEE, hc, False, key, self.need) for hc in class_order]
        for host in self._walk("kill", segments):
            if host.host_class is None:
                continue
            nc = min(host.host_class, rc)
            selected = self._select_victims(host, nc)
            if selected is None:
                self.notes.host("kill", host, "does not fit even without every victim")
                continue
            kills, suspends = selected
            return self._placed(host, Pass.KILL, nc, _victims_reason(kills, suspends),
                                kills=kills, suspends=suspends)
        return None

    def _is_victim(self, task: Task) -> bool:
        rc = self.request.cls
        if rc < 4:
            return task.cls > rc
        return self.request.type is TaskType.JOB and task.cls == 4 and task.type is TaskType.SERVICE

    def _select_victims(
        self, host: HostView, nc: int
    ) -> tuple[tuple[str, ...], tuple[str, ...]] | None:
        """The victims that make room on ``host`` (DESIGN 3.6), as (killed, suspended) ids;
        None when even all of them are not enough."""
        cpu, memory = self.need
        if cpu > host.cpu_capacity or memory > host.memory_capacity:
            return None
        free_cpu = host.cpu_limits[nc - 1] - host.cpu_allocated
        free_memory = host.memory_limits[nc - 1] - host.memory_allocated
        if free_cpu >= cpu and free_memory >= memory:
            return (), ()
        memory_short = memory - free_memory  # what victims must free of memory (if > 0)
        chosen: list[Task] = []
        candidates = [task for task in self.view.tasks_on(host.id) if self._is_victim(task)]
        for task in in_kill_order(candidates, self.victim_order, self.now):
            if not helps(task, free_cpu < cpu, free_memory < memory):
                continue  # a paused task holds memory only: taken while memory is short
            chosen.append(task)
            free_cpu += task.cpu_shares
            free_memory += task.memory
            if free_cpu >= cpu and free_memory >= memory:
                return split(chosen, memory_short, self.suspend)
        return None


def _victims_reason(kills: tuple[str, ...], suspends: tuple[str, ...]) -> str:
    parts = []
    for names, verb in ((kills, "killed"), (suspends, "suspended")):
        if names:
            parts.append(f"{', '.join(names)} {'is' if len(names) == 1 else 'are'} {verb}")
    return f"fits once {' and '.join(parts)}" if parts else "fits without killing anything"


PLUGIN = PolicyPlugin(
    name="energy",
    summary="the energy-aware policy (DESIGN 3.4-3.6): simple, cut and kill passes over LEE, "
            "DEE and EED hosts",
    options=EnergyOptions,
    build=lambda options, seed: EnergyPolicy(empty_hosts=options.empty_hosts,
                                             predict_recent=options.predict_recent,
                                             victims=options.victims, suspend=options.suspend),
    passes=(Pass.SIMPLE, Pass.CUT, Pass.KILL),
)
