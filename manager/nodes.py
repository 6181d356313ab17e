"""Nodes that are Down, gone or back under a new id (DESIGN 4, 9), and the names of hosts that
left.

A host's life after its node stops being Ready (:class:`NodeWatch`, pure: the reconciliation
feeds it what the Swarm lists and carries out what it answers):

1. *down*: the node is Down, or missing from the Swarm's list. It is listed as down (the health
   check, the dashboard) from the first pass that saw it so.
2. *lost*, after ``grace_s`` (the manager's ``NODE_GRACE_S``, so that a node that blinks keeps
   its tasks): its tasks are rescheduled like kill victims and it leaves the registry. A node
   drained by its operator is lost at once, and is not down.
3. *retired*, once its tasks moved and the node is gone: removed from the Swarm, Down past
   ``gone_s`` (``GREENSWARM_NODE_GONE_S``), or back under a new Swarm id with the same hostname
   (the old host is lost at once then). It is no longer listed as down. A node that comes back
   under its own id before that simply becomes a host again.

Hostnames outlive all this (:class:`NodeNames`, Redis): events and pages name a host that left.

=====================================  ========================================================
 key                                    holds
=====================================  ========================================================
 ``{p}:hostnames``                      hash: node id -> hostname, of every node that was a host
 ``{p}:nodes:retired``                  hash: node id -> when it was retired (epoch s)
=====================================  ========================================================
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import redis

from domain.errors import GreenSwarmError
from host_registry.redis_store import redis_errors


@dataclass(frozen=True)
class NodeSeen:
    """One node of the Swarm's list, as a pass saw it."""

    id: str
    hostname: str
    ready: bool
    drained: bool = False

    @property
    def present(self) -> bool:
        """Ready and taking part: a host."""
        return self.ready and not self.drained


@dataclass(frozen=True)
class DownNode:
    id: str
    name: str
    since: float  # when a pass first saw it Down or missing (epoch s)

    def to_json(self) -> dict[str, Any]:
        return {"id": self.id, "name": self.name, "since": self.since}


@dataclass
class NodeWatch:
    grace_s: float
    gone_s: float
    retired: set[str] = field(default_factory=set)  # loaded from NodeNames at start
    absent_since: dict[str, float] = field(default_factory=dict)
    down_now: tuple[DownNode, ...] = ()  # as of the last pass (read by other threads)

    def lost(self, now: float, listed: Sequence[NodeSeen], hosts: Collection[str],
             names: Mapping[str, str]) -> list[tuple[str, str]]:
        """Hosts to be lost now, each with why; notes which nodes are down."""
        by_id = {node.id: node for node in listed}
        present = {node.id for node in listed if node.present}
        for node_id in present:
            self.absent_since.pop(node_id, None)
            self.retired.discard(node_id)
        for node in listed:  # a node once a host, Down now (also after a manager restart)
            if not node.ready and node.id in names and node.id not in self.retired:
                self.absent_since.setdefault(node.id, now)
        out: list[tuple[str, str]] = []
        for host_id in sorted(set(hosts) - present):
            seen = by_id.get(host_id)
            if seen is not None and seen.ready:  # drained by its operator: not down
                out.append((host_id, "drained"))
                continue
            since = self.absent_since.setdefault(host_id, now)
            successor = self._successor(host_id, listed, names)
            if successor is not None:
                out.append((host_id, f"rejoined the Swarm as {successor}"))
            elif now - since >= self.grace_s:
                out.append((host_id, "left the Swarm" if seen is None else "is Down"))
        return out

    def retire(self, now: float, listed: Sequence[NodeSeen], hosts: Collection[str],
               names: Mapping[str, str]) -> list[tuple[str, str]]:
        """Nodes to retire now (their tasks moved: not hosts any more), each with why; then
        what is down after this pass (``down_now``)."""
        by_id = {node.id: node for node in listed}
        out: list[tuple[str, str]] = []
        for node_id, since in sorted(self.absent_since.items()):
            if node_id in hosts:
                continue  # its tasks have not moved yet
            successor = self._successor(node_id, listed, names)
            if node_id not in by_id:
                out.append((node_id, "it was removed from the Swarm"))
            elif successor is not None:
                out.append((node_id, f"it rejoined the Swarm as {successor}"))
            elif now - since >= self.gone_s:
                out.append((node_id, f"it has been Down for more than {self.gone_s:g} s"))
        for node_id, _ in out:
            del self.absent_since[node_id]
            self.retired.add(node_id)
        self.down_now = tuple(DownNode(i, names.get(i, i), since)
                              for i, since in sorted(self.absent_since.items(),
                                                     key=lambda item: (item[1], item[0])))
        return out

    @staticmethod
    def _successor(node_id: str, listed: Sequence[NodeSeen],
                   names: Mapping[str, str]) -> str | None:
        """Another Ready node with this node's hostname: the same machine, joined anew."""
        name = names.get(node_id)
        if not name:
            return None
        return next((n.id for n in listed if n.present and n.id != node_id
                     and n.hostname == name), None)


class NodeNames:
    """Every host's hostname, kept for good, and which nodes were retired (Redis)."""

    def __init__(self, client: redis.Redis, prefix: str) -> None:
        self._redis: Any = client  # decode_responses=True
        self._names_key = f"{prefix}:hostnames"
        self._retired_key = f"{prefix}:nodes:retired"
        self._names: dict[str, str] | None = None  # a copy of the hash, once read

    def all(self) -> dict[str, str]:
        if self._names is None:
            with redis_errors():
                self._names = dict(self._redis.hgetall(self._names_key))
        return dict(self._names)

    def get(self, node_id: str) -> str | None:
        """Its hostname; one not in the copy is asked for (another manager may have kept it)."""
        name = self.all().get(node_id)
        if name is None:
            with redis_errors():
                name = self._redis.hget(self._names_key, node_id)
            if name:
                self._names = {**(self._names or {}), node_id: name}
        return name or None

    def name_of(self, node_id: str, current: str | None = None) -> str:
        """A host's name: ``current`` (the Swarm's, while the node is in it), else the one
        kept, else its id (also when Redis does not answer: a name is never worth an error)."""
        if current:
            return current
        try:
            return self.get(node_id) or node_id
        except GreenSwarmError:
            return node_id

    def remember(self, names: Mapping[str, str]) -> None:
        """Keep these nodes' hostnames (written only when one is new or changed)."""
        known = self.all()
        changed = {i: n for i, n in names.items() if n and known.get(i) != n}
        if changed:
            with redis_errors():
                self._redis.hset(self._names_key, mapping=changed)
            self._names = {**known, **changed}

    def retired(self) -> set[str]:
        with redis_errors():
            return set(self._redis.hkeys(self._retired_key))

    def set_retired(self, node_id: str, when: float) -> None:
        with redis_errors():
            self._redis.hset(self._retired_key, node_id, repr(when))

    def unretire(self, node_ids: Collection[str]) -> None:
        if node_ids:
            with redis_errors():
                self._redis.hdel(self._retired_key, *node_ids)
