"""Offloading a request its own cluster does not place (DESIGN 12). Pure: no I/O.

A cluster advertises to its peers what its store knows of itself (:class:`Advert`): capacity,
allocation, hosts per region and per class, its measured load, the room it has for a request
of each class, and its power model. A request its home cluster does not place (or, if so
configured, places only by killing: :func:`should_offload`) goes to the peer
:func:`choose_peer` names: among the peers whose advert says the request fits, the one where it
costs the least marginal energy, ties by name. The peer's own policy then places it (or not:
an advert is a summary, and the peer decides); a request is forwarded once, so it is never
placed twice.

What "fits" means here: what the simple and cut passes could do (DESIGN 3.4, 3.5), which never
use a host in EED. For a request of class c, a host of class h >= c offers its room of the cut
pass for class c (``domain.rooms``: what the limits of class c leave, plus what cutting its
tasks of classes above c would free); a host of a stricter class h < c cuts no task for it but
the request itself, by t(c) - t(h), so it offers its room under its own class scaled up by
1 / (1 - that cut), floored; an empty host offers its capacity. The advert keeps, per class,
only the rooms no other room of the cluster covers in both dimensions (a Pareto front): a
request fits when one of them holds it in CPU and in memory. Kills are not offered: a peer is
asked to take work it has room for, not to preempt its own. A policy that does not overbook
(spread, binpack) may refuse what the class limits would let in; it then refuses the request.

The marginal price (:func:`marginal_watts`, :func:`price`). The extra watts the cluster's power
model predicts for the request's work at its current load, per core of work:

* on a busy host (a host with a task, not in EED, with room): the table from the busy hosts'
  mean measured CPU load u to u + d, d the request's cores over a busy host's mean cores;
* else on an empty host, which is powered on for it: the table from 0 to d (its idle watts
  included when ``wake_counts_idle``: an empty host counts as switched off), d its cores over
  that host's cores;

plus the memory term of the model for the request's memory. Divided by the request's cores,
this is watts per core of work: the same request compared across peers, the lowest wins.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from domain.classes import ClassTable
from domain.decision import Decision
from domain.energy import GIB, PowerModel
from domain.errors import ValidationError
from domain.model import HostView, Request, check_id
from domain.regions import REGIONS, Region
from domain.rooms import CUT_INDEX, SIMPLE_INDEX
from domain.store import ClusterReader

SHARES_PER_CORE = 1024
CLASSES: tuple[int, ...] = (1, 2, 3, 4)

# A host's room for one request: (CPU shares, memory bytes).
Room = tuple[int, int]


class OffloadWhen(StrEnum):
    """When the home cluster's decision sends a new request to a peer."""

    UNPLACED = "unplaced"  # the home cluster does not place it
    KILLS = "kills"  # ... or places it only by killing tasks


@dataclass(frozen=True, slots=True)
class Advert:
    """What a cluster tells its peers about itself, at one moment (see the module docstring).

    ``rooms[c - 1]``: the Pareto front of the rooms of the busy hosts not in EED for a request
    of class c; ``empty_rooms``: the front of the empty hosts' capacities. ``busy_cpu_load``:
    the mean measured CPU utilization of the busy hosts, weighted by capacity (0 without one);
    ``busy_host_cpu``: their mean capacity in shares (0 without one)."""

    cluster: str
    hosts: int
    cpu_capacity: int
    memory_capacity: int
    cpu_allocated: int
    memory_allocated: int
    cpu_util: float  # measured, mean over every host weighted by capacity
    memory_util: float
    hosts_by_region: tuple[tuple[Region, int], ...]
    hosts_by_class: tuple[tuple[int, int], ...]  # (host class, hosts); empty hosts not listed
    empty_hosts: int
    rooms: tuple[tuple[Room, ...], ...]
    empty_rooms: tuple[Room, ...]
    busy_cpu_load: float
    busy_host_cpu: int
    power: PowerModel
    wake_counts_idle: bool = True

    def __post_init__(self) -> None:
        if len(self.rooms) != len(CLASSES):
            raise ValidationError("rooms", f"need one front per class, got {len(self.rooms)}")
        if self.busy_cpu_load < 0.0:
            raise ValidationError("busy_cpu_load", "must be >= 0")

    def to_json(self) -> dict[str, Any]:
        """The advert as a peer reads it (GET /federation/advert): the power model by its
        table's name (every greenswarm knows the same tables) and its memory term."""
        return {
            "cluster": self.cluster,
            "hosts": self.hosts,
            "cpu_capacity": self.cpu_capacity,
            "memory_capacity": self.memory_capacity,
            "cpu_allocated": self.cpu_allocated,
            "memory_allocated": self.memory_allocated,
            "cpu_util": self.cpu_util,
            "memory_util": self.memory_util,
            "hosts_by_region": {region.value: count for region, count in self.hosts_by_region},
            "hosts_by_class": {str(cls): count for cls, count in self.hosts_by_class},
            "empty_hosts": self.empty_hosts,
            "rooms": [[list(room) for room in front] for front in self.rooms],
            "empty_rooms": [list(room) for room in self.empty_rooms],
            "busy_cpu_load": self.busy_cpu_load,
            "busy_host_cpu": self.busy_host_cpu,
            "power_table": self.power.table.name,
            "memory_w_per_gib": self.power.memory_w_per_gib,
            "wake_counts_idle": self.wake_counts_idle,
        }

    @classmethod
    def from_json(cls, obj: object) -> Advert:
        """An advert a peer sent, checked field by field: anything malformed (a missing or
        mistyped field, a negative size, an unknown power table or region) is a
        ValidationError naming the field, never a crash later."""
        if not isinstance(obj, Mapping):
            raise ValidationError("advert", "must be a JSON object")
        by_region = _mapping(obj, "hosts_by_region")
        by_class = _mapping(obj, "hosts_by_class")
        rooms = obj.get("rooms")
        if not isinstance(rooms, list) or len(rooms) != len(CLASSES):
            raise ValidationError("advert.rooms", f"must be a list of {len(CLASSES)} lists")
        table, memory_w = _text(obj, "power_table"), _number(obj, "memory_w_per_gib")
        try:
            power = PowerModel.named(table, memory_w)
        except ValidationError as exc:
            raise ValidationError("advert.power_table", exc.message) from None
        regions = []
        for name, count in by_region.items():
            try:
                region = Region(name)
            except ValueError:
                raise ValidationError(f"advert.hosts_by_region.{name}",
                                      "is no region (LEE, DEE, EED)") from None
            regions.append((region, _count(count, f"hosts_by_region.{name}")))
        classes = []
        for name, count in by_class.items():
            if name not in {str(c) for c in CLASSES}:
                raise ValidationError(f"advert.hosts_by_class.{name}", "is no class (1 to 4)")
            classes.append((int(name), _count(count, f"hosts_by_class.{name}")))
        wake = obj.get("wake_counts_idle", True)
        if not isinstance(wake, bool):
            raise ValidationError("advert.wake_counts_idle", "must be true or false")
        return cls(
            cluster=check_id(obj.get("cluster"), "advert.cluster"),
            hosts=_count(obj.get("hosts"), "hosts"),
            cpu_capacity=_count(obj.get("cpu_capacity"), "cpu_capacity"),
            memory_capacity=_count(obj.get("memory_capacity"), "memory_capacity"),
            cpu_allocated=_count(obj.get("cpu_allocated"), "cpu_allocated"),
            memory_allocated=_count(obj.get("memory_allocated"), "memory_allocated"),
            cpu_util=_number(obj, "cpu_util"),
            memory_util=_number(obj, "memory_util"),
            hosts_by_region=tuple(sorted(regions, key=lambda pair: REGIONS.index(pair[0]))),
            hosts_by_class=tuple(sorted(classes)),
            empty_hosts=_count(obj.get("empty_hosts"), "empty_hosts"),
            rooms=tuple(_rooms(front, f"rooms[{index}]") for index, front in enumerate(rooms)),
            empty_rooms=_rooms(obj.get("empty_rooms"), "empty_rooms"),
            busy_cpu_load=_number(obj, "busy_cpu_load"),
            busy_host_cpu=_count(obj.get("busy_host_cpu"), "busy_host_cpu"),
            power=power,
            wake_counts_idle=wake,
        )

    def summary(self) -> dict[str, Any]:
        """What GET /federation/peers shows of a peer's advert."""
        return {
            "hosts": self.hosts,
            "empty_hosts": self.empty_hosts,
            "cpu_capacity": self.cpu_capacity,
            "cpu_allocated": self.cpu_allocated,
            "memory_capacity": self.memory_capacity,
            "memory_allocated": self.memory_allocated,
            "cpu_util": self.cpu_util,
            "busy_cpu_load": self.busy_cpu_load,
            "power_table": self.power.table.name,
        }

    def fits(self, request: Request) -> bool:
        """Whether some busy or empty host of the advert has room for ``request``."""
        return self.busy_room(request) is not None or self.empty_room(request) is not None

    def busy_room(self, request: Request) -> Room | None:
        """The first room on a busy host that holds ``request`` (None: none does)."""
        return _first_holding(self.rooms[request.cls - 1], request)

    def empty_room(self, request: Request) -> Room | None:
        """The smallest empty host (in CPU, then memory) that holds ``request``."""
        return _first_holding(sorted(self.empty_rooms), request)


MAX_ROOMS = 10_000  # a front longer than this in an advert is refused (a peer's hostile input)


def _mapping(obj: Mapping[str, Any], name: str) -> Mapping[str, Any]:
    value = obj.get(name)
    if not isinstance(value, Mapping):
        raise ValidationError(f"advert.{name}", "must be an object")
    return value


def _text(obj: Mapping[str, Any], name: str) -> str:
    value = obj.get(name)
    if not isinstance(value, str) or not value:
        raise ValidationError(f"advert.{name}", "must be a non-empty string")
    return value


def _number(obj: Mapping[str, Any], name: str) -> float:
    value = obj.get(name)
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value) \
            or value < 0:
        raise ValidationError(f"advert.{name}", "must be a finite number >= 0")
    return float(value)


def _count(value: object, name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValidationError(f"advert.{name}", "must be an integer >= 0")
    return value


def _rooms(value: object, name: str) -> tuple[Room, ...]:
    if not isinstance(value, list) or len(value) > MAX_ROOMS:
        raise ValidationError(f"advert.{name}", f"must be a list of at most {MAX_ROOMS} rooms")
    rooms = []
    for index, room in enumerate(value):
        if not isinstance(room, list) or len(room) != 2:
            raise ValidationError(f"advert.{name}[{index}]", "must be [cpu_shares, memory]")
        rooms.append((_count(room[0], f"{name}[{index}][0]"),
                      _count(room[1], f"{name}[{index}][1]")))
    return tuple(rooms)


def _first_holding(rooms: Iterable[Room], request: Request) -> Room | None:
    for cpu, memory in rooms:
        if request.cpu_shares <= cpu and request.memory <= memory:
            return (cpu, memory)
    return None


def pareto_front(rooms: Iterable[Room]) -> tuple[Room, ...]:
    """The rooms no other room covers in both dimensions, by CPU descending (memory then
    ascending); duplicates once. A request fits one of ``rooms`` exactly when it fits one of
    these."""
    front: list[Room] = []
    best_memory = -1
    for cpu, memory in sorted(set(rooms), key=lambda r: (-r[0], -r[1])):
        if memory > best_memory:
            front.append((cpu, memory))
            best_memory = memory
    return tuple(front)


def advertise(
    cluster: str,
    reader: ClusterReader,
    power: PowerModel,
    *,
    wake_counts_idle: bool = True,
) -> Advert:
    """The advert of ``cluster`` from what its store holds now (measured utilization, books)."""
    hosts = list(reader.all_hosts())
    if not hosts:
        raise ValidationError("hosts", f"cluster {cluster!r} has no host to advertise")
    cpu_capacity = sum(h.cpu_capacity for h in hosts)
    memory_capacity = sum(h.memory_capacity for h in hosts)
    by_region = dict.fromkeys(REGIONS, 0)
    by_class: dict[int, int] = {}
    busy: list[HostView] = []
    empty: list[HostView] = []
    for host in hosts:
        by_region[host.region] += 1
        host_class = host.host_class
        if host_class is None:
            empty.append(host)
        else:
            by_class[host_class] = by_class.get(host_class, 0) + 1
            busy.append(host)
    open_busy = [h for h in busy if h.region is not Region.EED]
    rooms = tuple(
        pareto_front(host_room(h, cls, reader.classes) for h in open_busy) for cls in CLASSES
    )
    busy_cpu = sum(h.cpu_capacity for h in busy)
    return Advert(
        cluster=cluster,
        hosts=len(hosts),
        cpu_capacity=cpu_capacity,
        memory_capacity=memory_capacity,
        cpu_allocated=sum(h.cpu_allocated for h in hosts),
        memory_allocated=sum(h.memory_allocated for h in hosts),
        cpu_util=sum(h.cpu_util * h.cpu_capacity for h in hosts) / cpu_capacity,
        memory_util=sum(h.memory_util * h.memory_capacity for h in hosts) / memory_capacity,
        hosts_by_region=tuple(by_region.items()),
        hosts_by_class=tuple(sorted(by_class.items())),
        empty_hosts=len(empty),
        rooms=rooms,
        empty_rooms=pareto_front((h.cpu_capacity, h.memory_capacity) for h in empty),
        busy_cpu_load=(sum(h.cpu_util * h.cpu_capacity for h in busy) / busy_cpu
                       if busy else 0.0),
        busy_host_cpu=busy_cpu // len(busy) if busy else 0,
        power=power,
        wake_counts_idle=wake_counts_idle,
    )


def host_room(host: HostView, cls: int, classes: ClassTable) -> Room:
    """The largest request of class ``cls`` the simple or cut pass could place on ``host``
    whatever its region (see the module docstring); never below 0, even on a host booked
    beyond its capacity (a peer refuses an advert with a negative room)."""
    host_class = host.host_class
    if host_class is None:
        return (host.cpu_capacity, host.memory_capacity)
    if host_class >= cls:
        cpu, memory = host.rooms[CUT_INDEX[cls]]
        return (max(0, cpu), max(0, memory))  # an overbooked host has none, not less
    cpu, memory = host.rooms[SIMPLE_INDEX]
    kept = 1 - classes.request_cut(cls, host_class)  # what the request keeps of itself
    return (max(0, min(host.cpu_capacity, math.floor(cpu / kept))),
            max(0, min(host.memory_capacity, math.floor(memory / kept))))


def marginal_watts(advert: Advert, request: Request) -> float | None:
    """The extra watts ``advert``'s cluster would draw running ``request`` (see the module
    docstring); None when the advert says it does not fit."""
    table = advert.power.table
    memory_w = advert.power.memory_w_per_gib * request.memory / GIB
    if advert.busy_room(request) is not None and advert.busy_host_cpu > 0:
        load = min(1.0, advert.busy_cpu_load)
        step = request.cpu_shares / advert.busy_host_cpu
        return table.cpu_power_w(min(1.0, load + step)) - table.cpu_power_w(load) + memory_w
    room = advert.empty_room(request)
    if room is None:
        return None
    step = request.cpu_shares / room[0]
    idle = 0.0 if advert.wake_counts_idle else table.idle_w
    return table.cpu_power_w(min(1.0, step)) - idle + memory_w


def price(advert: Advert, request: Request) -> float | None:
    """Marginal watts per core of the request's work; None when it does not fit."""
    watts = marginal_watts(advert, request)
    if watts is None:
        return None
    return watts / (request.cpu_shares / SHARES_PER_CORE)


def ranked_peers(
    request: Request, adverts: Sequence[Advert], *, home: str | None = None
) -> list[tuple[float, str]]:
    """(price, cluster) of every advert (``home``'s own left out) that says ``request`` fits,
    cheapest first, ties by cluster name."""
    ranked = []
    for advert in adverts:
        if advert.cluster == home:
            continue
        cost = price(advert, request)
        if cost is not None:
            ranked.append((cost, advert.cluster))
    return sorted(ranked)


def choose_peer(
    request: Request, adverts: Sequence[Advert], *, home: str | None = None
) -> str | None:
    """The peer to forward ``request`` to: among the adverts (``home``'s own left out) that
    say it fits, the lowest price, ties by cluster name; None when none fits."""
    ranked = ranked_peers(request, adverts, home=home)
    return ranked[0][1] if ranked else None


def should_offload(decision: Decision, when: OffloadWhen) -> bool:
    """Whether the home cluster's decision for a new request sends it to a peer."""
    if not decision.placed:
        return True
    # placed only by taking a task off its CPU: killed, or paused (DESIGN 3.14)
    return when is OffloadWhen.KILLS and bool(decision.victims)
