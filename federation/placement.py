"""All-or-nothing placement of a deployment across federated clusters (DESIGN 12), with the
heuristic of the federation thesis (chapter 4: algorithms 1-7). Pure: no I/O.

A deployment is a graph: jobs (each with the resources it asks for) and links between some of
them ("a and b within 5 ms", "at least 100 Mbit/s"). The federation is the clusters this one
knows (itself and its peers), each with its room and its price per unit of work, and the links
between clusters (latency, bandwidth, and a one-off price to use one). A placement pairs every
job with a cluster so that each job fits the room left on its cluster and every link of the
deployment is carried by the link between the two clusters (the same cluster carries any link).

The heuristic, as the thesis builds it:

* SJ (alg. 1): jobs sorted by their own demand plus their neighbours', descending: the jobs with
  the most impacting constraints go first;
* CM (alg. 2): the cost of job i on cluster j, first its demand times j's price, then, each time
  a job is paired with a cluster m, its neighbours' costs on every cluster j grow by the price of
  the link between j and m;
* NAM (alg. 3): the affinity of job i with cluster j, 0 when i does not fit j's room, else
  Phi(y_i - r_j), y_i being i's demand plus its neighbours', r_j the room left, Phi(x) = 1 for
  x <= 0 and e^(-a x) above (the whole neighbourhood fits: perfect affinity), recomputed at every
  stage from the room left;
* PA (alg. 4): for the current job, every cluster with a non-zero affinity whose links carry
  the job's links to the jobs already placed (the connectivity check, alg. 5), by CM / NAM
  ascending;
* a recursive search (alg. 6, 7) that tries the clusters in PA order and backtracks on a dead
  end; the first complete placement is taken (the orders make it a good one).

Demand is two-dimensional here (CPU shares and memory bytes); the scalar the sorting and the
costs need is cores plus GiB. A search that could not place the deployment names the first
constraint that failed for the job that stopped it.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from domain.errors import ValidationError

SHARES_PER_CORE = 1024
GIB = 1024**3
DEFAULT_SLOPE = 1.0  # a, the slope of Phi
DEFAULT_MAX_STEPS = 10_000  # the search gives up after this many tries of a job on a cluster


@dataclass(frozen=True, slots=True)
class Job:
    id: str
    cpu_shares: int
    memory: int

    @property
    def weight(self) -> float:
        """The scalar demand of the sorting and the costs: cores plus GiB."""
        return self.cpu_shares / SHARES_PER_CORE + self.memory / GIB


@dataclass(frozen=True, slots=True)
class JobLink:
    """Two jobs that talk: the link between their clusters must carry it."""

    a: str
    b: str
    max_latency_ms: float | None = None
    min_bandwidth_mbit: float | None = None

    def carried_by(self, link: ClusterLink) -> bool:
        if self.max_latency_ms is not None and link.latency_ms > self.max_latency_ms:
            return False
        return not (self.min_bandwidth_mbit is not None
                    and link.bandwidth_mbit < self.min_bandwidth_mbit)

    def describe(self) -> str:
        needs = []
        if self.max_latency_ms is not None:
            needs.append(f"within {self.max_latency_ms:g} ms")
        if self.min_bandwidth_mbit is not None:
            needs.append(f"at least {self.min_bandwidth_mbit:g} Mbit/s")
        return f"{self.a} and {self.b} " + " and ".join(needs or ["linked"])


@dataclass(frozen=True, slots=True)
class Cluster:
    """A cluster as its advertisement describes it: the room it offers and its price per unit
    of work (the marginal energy price: watts per core-or-GiB at its current load)."""

    id: str
    cpu_shares: int
    memory: int
    price: float

    def fits(self, cpu_shares: int, memory: int) -> bool:
        return cpu_shares <= self.cpu_shares and memory <= self.memory


@dataclass(frozen=True, slots=True)
class ClusterLink:
    latency_ms: float
    bandwidth_mbit: float
    price: float = 0.0  # the one-off price of using the link

    @classmethod
    def local(cls) -> ClusterLink:
        """Two jobs in the same cluster: no latency to speak of, no limit, no price."""
        return cls(0.0, math.inf, 0.0)


@dataclass(frozen=True)
class Federation:
    clusters: tuple[Cluster, ...]
    links: Mapping[frozenset[str], ClusterLink] = field(default_factory=dict)
    # (job, cluster) pairs where the job fits no single host, whatever the cluster's room as a
    # whole (a live cluster's advert says so: federation/deploy.py); its affinity there is 0
    unfit: frozenset[tuple[str, str]] = frozenset()

    def link(self, a: str, b: str) -> ClusterLink | None:
        """The link between two clusters (the local one within a cluster), None if none."""
        if a == b:
            return ClusterLink.local()
        return self.links.get(frozenset((a, b)))


@dataclass(frozen=True)
class Deployment:
    jobs: tuple[Job, ...]
    links: tuple[JobLink, ...] = ()

    def __post_init__(self) -> None:
        ids = [job.id for job in self.jobs]
        if not ids:
            raise ValidationError("jobs", "a deployment needs at least one job")
        if len(set(ids)) != len(ids):
            raise ValidationError("jobs", "job ids must be unique")
        for index, link in enumerate(self.links):
            if link.a not in ids or link.b not in ids or link.a == link.b:
                raise ValidationError(f"links[{index}]", "must join two different jobs")

    def neighbours(self, job_id: str) -> list[str]:
        out = []
        for link in self.links:
            if link.a == job_id:
                out.append(link.b)
            elif link.b == job_id:
                out.append(link.a)
        return out


@dataclass(frozen=True)
class Placement:
    """A job -> cluster pairing for every job, and what it costs."""

    assignment: Mapping[str, str]
    cost: float


@dataclass(frozen=True)
class Refusal:
    """Why a deployment cannot be placed: the first constraint that failed."""

    job: str
    reason: str


# -- the data structures ----------------------------------------------------------------------


def sorted_jobs(deployment: Deployment) -> list[Job]:
    """SJ (alg. 1): by own demand plus the neighbours', descending (ties: the given order)."""
    weights = {job.id: job.weight for job in deployment.jobs}
    y = {job.id: weights[job.id] + sum(weights[n] for n in deployment.neighbours(job.id))
         for job in deployment.jobs}
    order = {job.id: index for index, job in enumerate(deployment.jobs)}
    return sorted(deployment.jobs, key=lambda job: (-y[job.id], order[job.id]))


def initial_costs(jobs: Sequence[Job], clusters: Sequence[Cluster]) -> list[list[float]]:
    """CM at the start: each job's demand times each cluster's price per unit."""
    return [[job.weight * cluster.price for cluster in clusters] for job in jobs]


def phi(x: float, slope: float = DEFAULT_SLOPE) -> float:
    """Phi: 1 for x <= 0, e^(-a x) above."""
    return 1.0 if x <= 0 else math.exp(-slope * x)


def affinity(
    job: Job, neighbourhood: Sequence[Job], room: tuple[int, int], slope: float = DEFAULT_SLOPE
) -> float:
    """NAM[i][j] (alg. 3): 0 when the job does not fit the room; else Phi of how far its
    neighbourhood's demand (its own included) exceeds the room, in cores or GiB (the worse)."""
    cpu, memory = room
    if job.cpu_shares > cpu or job.memory > memory:
        return 0.0
    y_cpu = job.cpu_shares + sum(n.cpu_shares for n in neighbourhood)
    y_memory = job.memory + sum(n.memory for n in neighbourhood)
    x = max((y_cpu - cpu) / SHARES_PER_CORE, (y_memory - memory) / GIB)
    return phi(x, slope)


# -- the search ---------------------------------------------------------------------------------


@dataclass
class _Search:
    deployment: Deployment
    federation: Federation
    slope: float
    max_steps: int
    jobs: list[Job] = field(default_factory=list)
    steps: int = 0
    refusal: Refusal | None = None

    def run(self) -> Placement | Refusal:
        self.jobs = sorted_jobs(self.deployment)
        clusters = self.federation.clusters
        room = {c.id: (c.cpu_shares, c.memory) for c in clusters}
        costs = initial_costs(self.jobs, clusters)
        placed = self._schedule(0, costs, room, {})
        if placed is not None:
            return Placement(placed, self._cost(placed))
        return self.refusal or Refusal(self.jobs[0].id, "no cluster takes it")

    def _schedule(
        self,
        index: int,
        costs: list[list[float]],
        room: dict[str, tuple[int, int]],
        solution: dict[str, str],
    ) -> dict[str, str] | None:
        if index == len(self.jobs):
            return dict(solution)
        job = self.jobs[index]
        clusters = self.federation.clusters
        by_id = {j.id: j for j in self.jobs}
        neighbourhood = [by_id[n] for n in self.deployment.neighbours(job.id)]
        candidates: list[tuple[float, int]] = []  # PA: (priority, cluster index)
        reasons: list[str] = []
        for c_index, cluster in enumerate(clusters):
            if (job.id, cluster.id) in self.federation.unfit:
                reasons.append(f"{job.id} ({job.cpu_shares} shares, {job.memory} bytes) fits "
                               f"no host of {cluster.id}")
                continue
            nam = affinity(job, neighbourhood, room[cluster.id], self.slope)
            if nam == 0.0:
                reasons.append(f"{job.id} ({job.cpu_shares} shares, {job.memory} bytes) does "
                               f"not fit the room left on {cluster.id}")
                continue
            broken = self._broken_link(job, cluster.id, solution)
            if broken is not None:
                reasons.append(broken)
                continue
            candidates.append((costs[index][c_index] / nam, c_index))
        if not candidates:
            self._refuse(job, "; ".join(reasons) or "no cluster")
            return None
        candidates.sort()
        for _, c_index in candidates:
            self.steps += 1
            if self.steps > self.max_steps:
                self._refuse(job, f"the search gave up after {self.max_steps} tries")
                return None
            cluster = clusters[c_index]
            solution[job.id] = cluster.id
            cpu, memory = room[cluster.id]
            room[cluster.id] = (cpu - job.cpu_shares, memory - job.memory)
            placed = self._schedule(index + 1, self._update(costs, job, cluster.id), room,
                                    solution)
            room[cluster.id] = (cpu, memory)
            del solution[job.id]
            if placed is not None:
                return placed
        return None

    def _update(self, costs: list[list[float]], job: Job, cluster_id: str) -> list[list[float]]:
        """CM update (alg. 2): the job's neighbours now pay the link to ``cluster_id``."""
        updated = [row[:] for row in costs]
        neighbours = set(self.deployment.neighbours(job.id))
        for i, other in enumerate(self.jobs):
            if other.id not in neighbours:
                continue
            for j, cluster in enumerate(self.federation.clusters):
                link = self.federation.link(cluster.id, cluster_id)
                updated[i][j] += link.price if link is not None else math.inf
        return updated

    def _broken_link(self, job: Job, cluster_id: str, solution: Mapping[str, str]) -> str | None:
        """The connectivity check (alg. 5): the first link of ``job`` to a placed job that the
        link between the two clusters cannot carry, described; None when all are carried."""
        for link in self.deployment.links:
            if job.id not in (link.a, link.b):
                continue
            other = link.b if link.a == job.id else link.a
            where = solution.get(other)
            if where is None:
                continue
            between = self.federation.link(cluster_id, where)
            if between is None:
                return f"{link.describe()}: no link between {cluster_id} and {where}"
            if not link.carried_by(between):
                return (f"{link.describe()}: {cluster_id}-{where} has {between.latency_ms:g} ms "
                        f"and {between.bandwidth_mbit:g} Mbit/s")
        return None

    def _refuse(self, job: Job, reason: str) -> None:
        if self.refusal is None:
            self.refusal = Refusal(job.id, reason)

    def _cost(self, assignment: Mapping[str, str]) -> float:
        prices = {c.id: c.price for c in self.federation.clusters}
        total = sum(job.weight * prices[assignment[job.id]] for job in self.deployment.jobs)
        for link in self.deployment.links:
            between = self.federation.link(assignment[link.a], assignment[link.b])
            total += between.price if between is not None else 0.0
        return total


def place(
    deployment: Deployment,
    federation: Federation,
    *,
    slope: float = DEFAULT_SLOPE,
    max_steps: int = DEFAULT_MAX_STEPS,
) -> Placement | Refusal:
    """Every job of ``deployment`` on a cluster of ``federation``, all or nothing."""
    return _Search(deployment, federation, slope, max_steps).run()
