"""Deployments across live clusters (DESIGN 12): several requests with link constraints between
them, placed all or nothing. Pure: no I/O (the manager's creator does the calls).

From adverts to the placement's input (:func:`federation_for`): the clusters considered are this
one and every peer that is up, each described by its advert:

* its room for the deployment as a whole: its unallocated capacity (capacity minus allocation,
  in CPU and in memory, never below 0);
* which requests fit at all: the offloading rule (:meth:`Advert.fits`: a room of one host, busy
  or empty, holds the request); where a request fits no host its affinity is 0;
* its price: the mean marginal energy price (:func:`federation.offload.price`, watts per core of
  work) of the deployment's requests that fit there (0 when none does).

The links: this cluster to itself carries anything (0 ms, no bandwidth limit); this cluster to a
peer is what the peers file says of that peer. Two peers' link to each other is not known here,
so it is taken as the path through this cluster: latencies added, the lower bandwidth (peers
that are closer to each other than that are under-used, never over-trusted).

All or nothing (:func:`deploy`): the heuristic (federation/placement.py) pairs every request with
a cluster, or names the first constraint that failed, and nothing is created. Then each request
is created on its cluster in the deployment's order; when one fails (the cluster's own policy
refuses it after all, a peer is down), every request already created is removed, last first,
and the failure is the answer.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from domain.errors import GreenSwarmError, ValidationError
from domain.model import Request
from federation.offload import Advert, price
from federation.placement import (
    Cluster,
    ClusterLink,
    Deployment,
    Federation,
    Job,
    JobLink,
    Placement,
    Refusal,
    place,
)

MAX_MEMBERS = 100  # requests in one deployment
MAX_LINKS = 1000


@dataclass(frozen=True, slots=True)
class Member:
    """One request of a deployment: its name there, the request (its id
    ``<deployment>-<name>``) and its normalised spec (what POST /requests takes)."""

    name: str
    request: Request
    spec: Mapping[str, Any]


@dataclass(frozen=True)
class DeploymentSpec:
    name: str
    members: tuple[Member, ...]
    links: tuple[JobLink, ...] = ()  # between members, by their names

    def __post_init__(self) -> None:
        self.graph()  # unique names, links between two different members

    def graph(self) -> Deployment:
        """The deployment as the heuristic sees it: a job per member, by its name."""
        return Deployment(
            tuple(Job(m.name, m.request.cpu_shares, m.request.memory) for m in self.members),
            self.links,
        )

    def member(self, name: str) -> Member:
        for member in self.members:
            if member.name == name:
                return member
        raise ValidationError("requests", f"no request named {name!r}")


def request_id(deployment: str, name: str) -> str:
    """The id of a deployment's request: ``<deployment>-<name>``."""
    return f"{deployment}-{name}"


@dataclass(frozen=True, slots=True)
class Site:
    """A cluster a deployment may use: its advert and the link from this cluster to it."""

    advert: Advert
    link: ClusterLink


def federation_for(spec: DeploymentSpec, home: Advert, peers: Sequence[Site]) -> Federation:
    """The placement's input for ``spec``: this cluster (``home``) and the ``peers`` that are
    up (see the module docstring)."""
    sites = [Site(home, ClusterLink.local()), *peers]
    clusters: list[Cluster] = []
    unfit: set[tuple[str, str]] = set()
    for site in sites:
        advert = site.advert
        prices = []
        for member in spec.members:
            if not advert.fits(member.request):
                unfit.add((member.name, advert.cluster))
                continue
            cost = price(advert, member.request)
            if cost is not None:
                prices.append(cost)
        clusters.append(Cluster(
            advert.cluster,
            max(0, advert.cpu_capacity - advert.cpu_allocated),
            max(0, advert.memory_capacity - advert.memory_allocated),
            sum(prices) / len(prices) if prices else 0.0,
        ))
    links: dict[frozenset[str], ClusterLink] = {}
    for index, first in enumerate(sites):
        for second in sites[index + 1:]:
            links[frozenset((first.advert.cluster, second.advert.cluster))] = via_home(
                first.link, second.link)
    return Federation(tuple(clusters), links, frozenset(unfit))


def via_home(first: ClusterLink, second: ClusterLink) -> ClusterLink:
    """The link between two clusters through this one: latencies and prices added, the lower
    bandwidth (with this cluster's own link, the other link itself)."""
    return ClusterLink(first.latency_ms + second.latency_ms,
                       min(first.bandwidth_mbit, second.bandwidth_mbit),
                       first.price + second.price)


# -- creating it, all or nothing ----------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Creation:
    """What creating one request on its cluster gave: ``ok`` with its status and host, or why
    not; ``maybe_held``: it failed, but the cluster may hold it (a lost answer), so it is
    removed too."""

    ok: bool
    status: str | None = None
    host: str | None = None
    reason: str = ""
    maybe_held: bool = False


class Creator(Protocol):
    """The I/O of a deployment: create a request on a cluster, remove one again."""

    def create(self, member: Member, cluster: str) -> Creation: ...

    def remove(self, member: Member, cluster: str) -> str | None:
        """Stop it there; None when done, else why not."""
        ...


@dataclass(frozen=True, slots=True)
class Placed:
    name: str
    request_id: str
    cluster: str
    status: str | None
    host: str | None

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "id": self.request_id, "cluster": self.cluster,
                "status": self.status, "host": self.host}


@dataclass(frozen=True)
class Deployed:
    placement: Placement
    placed: tuple[Placed, ...]


@dataclass(frozen=True)
class Undone:
    """A creation failed: every request created before it was removed (``left``: those that
    could not be, with why)."""

    request: str
    cluster: str
    reason: str
    left: tuple[tuple[str, str], ...] = field(default=())


def create_all(spec: DeploymentSpec, assignment: Mapping[str, str],
               creator: Creator) -> Deployed | Undone:
    """Create each member on its cluster (``assignment``), in order; on the first failure,
    remove what was created, last first."""
    done: list[tuple[Member, str, Creation]] = []
    for member in spec.members:
        cluster = assignment[member.name]
        try:
            created = creator.create(member, cluster)
        except GreenSwarmError as exc:  # an error of ours (Redis, a peer): it may be held
            created = Creation(False, reason=str(exc), maybe_held=True)
        if created.ok:
            done.append((member, cluster, created))
            continue
        undo = [(m, c) for m, c, _ in done]
        if created.maybe_held:
            undo.append((member, cluster))
        left = []
        for m, c in reversed(undo):
            why = creator.remove(m, c)
            if why is not None:
                left.append((m.name, why))
        return Undone(member.name, cluster, created.reason, tuple(left))
    return Deployed(
        Placement(dict(assignment), 0.0),
        tuple(Placed(m.name, m.request.id, c, made.status, made.host) for m, c, made in done),
    )


def deploy(spec: DeploymentSpec, federation: Federation,
           creator: Creator) -> Deployed | Undone | Refusal:
    """Place ``spec`` on ``federation`` and create it, all or nothing: a Refusal (nothing was
    created), Undone (what was created is removed again) or Deployed."""
    placement = place(spec.graph(), federation)
    if isinstance(placement, Refusal):
        return placement
    result = create_all(spec, placement.assignment, creator)
    if isinstance(result, Deployed):
        return Deployed(placement, result.placed)
    return result
