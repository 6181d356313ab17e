"""The clusters of a simulation and where a new request goes (DESIGN 12). Pure: no I/O.

With ``SimConfig.clusters`` the trace's hosts form several clusters, in the order of the trace,
each with its own store and scheduler (its own policy instance: a random policy, its own seed).
A new request's home is the next cluster round-robin in arrival order; federated, it goes to a
peer when its home would not place it (or, by the setup, only by killing) and a peer advertises
room (federation.offload), to the cheapest such peer. Kill victims and waiting requests stay in
their cluster. Without ``clusters``: one cluster of every host, named ``c1``.
"""

from __future__ import annotations

import bisect
import itertools
import math
from collections.abc import Iterable

from domain.energy import PowerModel
from domain.errors import ValidationError
from domain.model import Request
from federation.offload import advertise, choose_peer, should_offload
from host_registry.memory import MemoryStore
from measure.results import HostSummary
from scheduler import registry
from scheduler.service import Scheduler
from sim.config import ClusterStats, FederationMode, SimConfig
from workloads.trace import TraceHeader


class Cluster:
    """One Swarm of the simulation: its own store and scheduler, its hosts, its pending
    requests, and its federation counters."""

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


class Clusters:
    """Every cluster of a run, which host is in which, and the routing of new requests."""

    __slots__ = ("_arrived", "_by_name", "_power", "all", "config", "federated", "of_host")

    def __init__(self, header: TraceHeader, config: SimConfig) -> None:
        setup = config.clusters
        sizes = setup.sizes if setup is not None else (len(header.hosts),)
        if sum(sizes) != len(header.hosts):
            raise ValidationError("clusters", f"the clusters take {sum(sizes)} hosts, the "
                                  f"trace has {len(header.hosts)}")
        self.config = config
        plugin = registry.plugin(config.policy, simulated=True)
        self.all: list[Cluster] = []
        for index, name in enumerate(setup.names if setup is not None else ("c1",)):
            store = MemoryStore(config.classes, config.bounds)
            scheduler = Scheduler(
                store, plugin.make(config.options.get(config.policy), config.seed + index),
                skip_unchanged=config.skip_unchanged_retries,
                admits_to_queue=plugin.admits_to_queue, freshness=config.freshness,
                slo=config.slo, alpha_s=config.allocation_s, admission=config.admission,
            )
            self.all.append(Cluster(name, store, scheduler))
        self._by_name = {cluster.name: cluster for cluster in self.all}
        self.federated = (setup is not None and len(self.all) > 1
                          and setup.federation is FederationMode.OFFLOAD)
        self._power = config.power_model or PowerModel.named()
        self._arrived = 0
        self.of_host: dict[str, Cluster] = {}
        bounds = list(itertools.accumulate(sizes))
        for index, spec in enumerate(header.hosts):
            cluster = self.all[bisect.bisect_right(bounds, index)]
            cluster.hosts.append(spec.id)
            self.of_host[spec.id] = cluster
        # What placement constraints see of a trace's host (DESIGN 4): its id, its labels.
        for cluster in self.all:
            cluster.scheduler.set_node_facts({spec.id: spec.facts() for spec in header.hosts
                                              if self.of_host[spec.id] is cluster})

    def submit_to(self, request: Request, t: float) -> tuple[Cluster, Cluster]:
        """The home of a new request, and the cluster it is submitted to."""
        home = self.all[0] if len(self.all) == 1 else self._home()
        return home, (self._route(home, request, t) if self.federated else home)

    def _home(self) -> Cluster:
        """The home cluster of the next arrival: round-robin in arrival order."""
        home = self.all[self._arrived % len(self.all)]
        self._arrived += 1
        home.arrivals += 1
        return home

    def _route(self, home: Cluster, request: Request, t: float) -> Cluster:
        """Where a new request of ``home`` is submitted, federated: at home, unless its home
        would not place it (or, by the setup, only by killing) and a peer advertises room;
        then at the cheapest such peer. Submitted exactly once."""
        setup = self.config.clusters
        assert setup is not None
        if not should_offload(home.scheduler.preview(request, t).decision, setup.offload_when):
            return home
        adverts = [advertise(c.name, c.store, self._power,
                             wake_counts_idle=setup.wake_counts_idle)
                   for c in self.all if c is not home]
        peer = choose_peer(request, adverts, home=home.name)
        if peer is None:
            home.no_peer += 1
            return home
        home.offloaded_out += 1
        self._by_name[peer].offloaded_in += 1
        return self._by_name[peer]

    def waiting(self) -> int:
        """Requests waiting in every cluster's queue."""
        return sum(len(c.pending) for c in self.all)

    def stats(self, hosts: Iterable[HostSummary]) -> tuple[ClusterStats, ...]:
        """Each cluster's counters and energy, when the run had several (else none)."""
        if not self.config.clusters:
            return ()
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
            for cluster in self.all
        )
