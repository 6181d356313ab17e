"""Peering between live clusters (DESIGN 12): who the peers are, what this cluster knows of
each, and which of them a request goes to. Pure: no I/O (the manager's ``manager/peering.py``
reads the peers file, asks the peers and keeps their state).

A cluster's peers come from a JSON file (GREENSWARM_PEERS_FILE): a list of ``{"name", "url",
"token", "latency_ms", "bandwidth_mbit"}``, the token being the bearer token of that peer's
manager (so it lives in a file, never in the environment). Each peer is ``unknown`` until its
advert was first asked for, ``up`` while its last answer was a valid advert, ``down`` (with the
error) after a failure, until a later refresh succeeds.

Offloading a new request (:func:`wants_offload`, :func:`plan_offload`): when the home cluster's
own decision does not place it (or, with GREENSWARM_OFFLOAD=kills, places it only by killing),
the request did not ask to queue, and it was not itself forwarded by a peer (a forwarded request
is never forwarded again: no loops), the up peers whose advert says it fits are tried cheapest
first, by :func:`federation.offload.choose_peer`'s marginal energy price.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass, replace
from enum import StrEnum
from typing import Any
from urllib.parse import urlsplit

from domain.decision import Decision
from domain.errors import ValidationError
from domain.model import Request, check_id
from federation.offload import Advert, OffloadWhen, ranked_peers, should_offload

MAX_PEERS = 64
PEER_FIELDS = {"name", "url", "token", "latency_ms", "bandwidth_mbit"}


class OffloadMode(StrEnum):
    """GREENSWARM_OFFLOAD: when a new request goes to a peer."""

    OFF = "off"  # never (a single cluster: nothing changes)
    UNPLACED = "unplaced"  # when the home cluster does not place it
    KILLS = "kills"  # ... or places it only by killing tasks

    @property
    def when(self) -> OffloadWhen | None:
        return None if self is OffloadMode.OFF else OffloadWhen(self.value)


@dataclass(frozen=True, slots=True)
class Peer:
    """A peer cluster as configured: its manager's URL and token, the link to it."""

    name: str
    url: str
    token: str
    latency_ms: float
    bandwidth_mbit: float

    def to_json(self) -> dict[str, Any]:
        """Its configuration as shown to clients: never the token."""
        return {"name": self.name, "url": self.url, "latency_ms": self.latency_ms,
                "bandwidth_mbit": self.bandwidth_mbit}


def parse_peers(text: str, where: str, *, home: str) -> tuple[Peer, ...]:
    """The peers file's text as peers; a ValidationError naming ``where`` (the setting) and
    the entry for anything wrong: not JSON, not a list, an unknown or missing field, a name
    twice or this cluster's own name, a URL that is not http(s), an empty token, a negative
    latency or a bandwidth that is not positive."""
    try:
        raw = json.loads(text)
    except ValueError as exc:
        raise ValidationError(where, f"is not JSON: {exc}") from None
    if not isinstance(raw, list) or len(raw) > MAX_PEERS:
        raise ValidationError(where, f"must be a JSON list of at most {MAX_PEERS} peers")
    peers: list[Peer] = []
    for index, item in enumerate(raw):
        at = f"{where}[{index}]"
        if not isinstance(item, dict):
            raise ValidationError(at, "must be an object {name, url, token, latency_ms, "
                                  "bandwidth_mbit}")
        unknown = sorted(set(item) - PEER_FIELDS)
        if unknown:
            raise ValidationError(f"{at}.{unknown[0]}", "unknown field")
        missing = sorted(PEER_FIELDS - set(item))
        if missing:
            raise ValidationError(f"{at}.{missing[0]}", "is required")
        name = check_id(item["name"], f"{at}.name")
        if name == home:
            raise ValidationError(f"{at}.name", f"is this cluster's own name ({home})")
        if any(peer.name == name for peer in peers):
            raise ValidationError(f"{at}.name", f"names {name!r} twice")
        url = item["url"]
        parts = urlsplit(url) if isinstance(url, str) else None
        if parts is None or parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValidationError(f"{at}.url", "must be an http:// or https:// URL")
        token = item["token"]
        if not isinstance(token, str) or not token.strip():
            raise ValidationError(f"{at}.token", "must be the peer's bearer token")
        latency = _number(item["latency_ms"], f"{at}.latency_ms", positive=False)
        bandwidth = _number(item["bandwidth_mbit"], f"{at}.bandwidth_mbit", positive=True)
        peers.append(Peer(name, url.rstrip("/"), token.strip(), latency, bandwidth))
    return tuple(peers)


def _number(value: object, where: str, *, positive: bool) -> float:
    ok = not isinstance(value, bool) and isinstance(value, int | float) and math.isfinite(value)
    if not ok or value < 0 or (positive and value == 0):  # type: ignore[operator]
        raise ValidationError(where, "must be a number > 0" if positive else
                              "must be a number >= 0")
    return float(value)  # type: ignore[arg-type]


class PeerState(StrEnum):
    UNKNOWN = "unknown"  # not asked yet
    UP = "up"  # its last answer was a valid advert
    DOWN = "down"  # its last refresh failed (``error`` says how); skipped until one succeeds


@dataclass(frozen=True, slots=True)
class PeerView:
    """What this cluster knows of one peer now."""

    peer: Peer
    state: PeerState = PeerState.UNKNOWN
    advert: Advert | None = None  # the last valid advert (kept while down, never used then)
    refreshed_at: float | None = None  # when the last valid advert came
    checked_at: float | None = None  # when it was last asked
    error: str | None = None  # why the last refresh failed

    def refreshed(self, advert: Advert, now: float) -> PeerView:
        return replace(self, state=PeerState.UP, advert=advert, refreshed_at=now,
                       checked_at=now, error=None)

    def failed(self, error: str, now: float) -> PeerView:
        return replace(self, state=PeerState.DOWN, checked_at=now, error=error)

    def stale(self, now: float, period_s: float) -> bool:
        """Whether it was last asked a refresh period ago or more (or never)."""
        return self.checked_at is None or now - self.checked_at >= period_s

    def to_json(self) -> dict[str, Any]:
        return {
            **self.peer.to_json(),
            "state": self.state.value,
            "refreshed_at": self.refreshed_at,
            "checked_at": self.checked_at,
            "error": self.error,
            "advert": self.advert.summary() if self.advert is not None else None,
        }


def wants_offload(
    decision: Decision, mode: OffloadMode, *, forwarded_from: str | None, waits: bool
) -> bool:
    """Whether a new request goes to the peers, given the home cluster's decision for it: never
    when offloading is off, when the request waits in the queue rather than be refused, or when
    a peer forwarded it here (it is never forwarded again)."""
    when = mode.when
    if when is None or forwarded_from is not None or waits:
        return False
    return should_offload(decision, when)


@dataclass(frozen=True, slots=True)
class OffloadPlan:
    """The peers to try for a request, cheapest first, and the peers that are not up."""

    peers: tuple[str, ...]
    down: tuple[tuple[str, str], ...]  # (peer, why it is not up)
    peer_count: int  # every peer configured

    def why_none(self) -> str:
        """Why no peer can take the request (for people: ``peers`` is empty)."""
        downs = "; ".join(f"peer {name} is down: {error}" for name, error in self.down)
        if not self.down:
            return "no peer has room for it"
        if len(self.down) == self.peer_count:
            return downs
        return f"no peer that is up has room for it; {downs}"


def plan_offload(request: Request, views: Sequence[PeerView], *, home: str) -> OffloadPlan:
    """The up peers whose advert says ``request`` fits, by marginal energy price, ties by name
    (the order :func:`federation.offload.choose_peer` takes the first of), and the peers that
    are down or not asked yet, with why."""
    adverts = [v.advert for v in views if v.state is PeerState.UP and v.advert is not None]
    down = tuple((v.peer.name, v.error or "not asked yet") for v in views
                 if v.state is not PeerState.UP)
    return OffloadPlan(tuple(name for _, name in ranked_peers(request, adverts, home=home)),
                       down, len(views))


def request_bounds(
    local: Sequence[tuple[int, int]], peers: Sequence[PeerView], *, with_peers: bool
) -> tuple[int, int]:
    """The largest CPU shares and memory a new request may ask for here: this cluster's largest
    host, or when it may go to a peer (offloading on, or a deployment), also the largest room
    an up peer advertises (a request no local host can ever take may still run at a peer:
    DESIGN 12). Each dimension on its own, so a request within both bounds may still fit
    nowhere: it is then refused, not a 400."""
    rooms = list(local)
    if with_peers:
        for view in peers:
            if view.state is PeerState.UP and view.advert is not None:
                rooms += view.advert.empty_rooms
                rooms += [room for front in view.advert.rooms for room in front]
    if not rooms:
        raise ValidationError("hosts", "no host to bound a request by")
    return max(cpu for cpu, _ in rooms), max(memory for _, memory in rooms)
