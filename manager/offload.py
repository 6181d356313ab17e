"""Offloading (DESIGN 12): a new request this cluster would not place (or only by killing) goes
to the cheapest up peer that says it fits, and its record here says where it runs.

The peers' HTTP calls run on the submitting thread, never on the scheduling loop; what changes
a record runs on the loop. ``Offloading.forward`` tries the peers; when none takes the request
(``NoPeerTook``) the caller decides it here as usual (manager/submit.py). Stopping an
offloaded request goes through its peer first.
"""

from __future__ import annotations

import functools
import logging
import threading
from dataclasses import dataclass
from typing import Any

from domain.errors import GreenSwarmError, NotFoundError
from domain.events import Offloaded, Stopped
from domain.lifecycle import FINAL, RequestStatus
from domain.model import Request
from federation.peers import plan_offload
from manager.loop import SchedulingLoop
from manager.peering import Forward, Forwarded, Peering
from manager.records import RequestRecord, RequestRecords
from manager.settings import ManagerSettings

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Submitted:
    """What POST /requests answers: the record, and the decision as JSON (None under the
    'swarm' policy): this cluster's, with the scheduler's own time ``decision_ms`` (Docker work
    excluded), or the peer's that placed an offloaded request, with its ``cluster``."""

    record: RequestRecord
    decision: dict[str, Any] | None


@dataclass(frozen=True)
class Offer:
    """A new request recorded here and meant for a peer (the scheduling loop let go of it)."""

    request: Request
    spec: dict[str, Any]
    queue: bool | None


@dataclass(frozen=True)
class NoPeerTook:
    """No peer took the request: why (for its record and its refusal's reason), and the peers
    that were down."""

    why: str
    down: tuple[str, ...]


class Offloading:
    def __init__(self, settings: ManagerSettings, records: RequestRecords,
                 loop: SchedulingLoop, peering: Peering) -> None:
        self.settings = settings
        self.records = records
        self.loop = loop
        self.peering = peering

    def forward(self, offer: Offer) -> Submitted | NoPeerTook:
        """Forward the request to the cheapest up peer that says it fits (then the next, while
        they refuse it outright); NoPeerTook when none takes it."""
        name = self.settings.federation_name
        plan = plan_offload(offer.request, self.peering.views(fresh=True), home=name)
        body = {**offer.spec, "queue": False, "forwarded_from": name}
        notes: list[str] = []
        for peer in plan.peers:
            forwarded = self.peering.forward(peer, body)
            if forwarded.outcome is Forward.PLACED:
                return self.loop.call(functools.partial(self.offloaded, offer, peer, forwarded))
            notes.append(forwarded.reason)
            if forwarded.outcome is Forward.UNKNOWN:
                break  # it may run there: asking another peer could place it twice
        if notes:
            why = "; ".join([*notes, *(f"peer {p} is down: {e}" for p, e in plan.down)])
        else:
            why = plan.why_none()
        return NoPeerTook(why, tuple(p for p, _ in plan.down))

    def offloaded(self, offer: Offer, peer: str, forwarded: Forwarded) -> Submitted:
        """On the loop: ``peer`` placed the request; its record here says where it runs."""
        request_id = offer.request.id
        record = self.records.get(request_id)
        remote = forwarded.record or {}
        host = remote.get("host") if isinstance(remote.get("host"), str) else None
        if record.status in FINAL:  # stopped by the client while it was being forwarded
            self.loop.post(lambda: self._stop_late(peer, request_id))
            return Submitted(record, None)
        name = remote.get("host_name") if host and isinstance(remote.get("host_name"), str) \
            else None
        self.records.update(
            request_id,
            Offloaded(f"offloaded to cluster {peer}: {forwarded.status.value}"
                      + (f" on {name or host}" if host else ""), cluster=peer, host=host),
            status=forwarded.status, host=host, cluster=peer, host_name=name,
        )
        decision = forwarded.decision or {
            "placed": True, "host": host, "pass": None, "cuts": [], "kills": [],
            "reason": f"cluster {peer} holds it (forwarded before)",
        }
        return Submitted(self.records.get(request_id), {**decision, "cluster": peer})

    def _stop_late(self, peer: str, request_id: str) -> None:
        """Best effort, off the caller's way: the peer placed what the client stopped here."""
        threading.Thread(target=self._stop_remote_quietly, args=(peer, request_id),
                         name="peer-stop", daemon=True).start()

    def _stop_remote_quietly(self, peer: str, request_id: str) -> None:
        try:
            self.peering.stop_request(peer, request_id)
        except GreenSwarmError as exc:
            log.warning("could not stop %s at peer %s: %s", request_id, peer, exc)

    def stop_at_peer(self, peer: str, request_id: str) -> dict[str, Any]:
        """Stop an offloaded request at its peer: the peer's record afterwards, empty when it
        no longer knows the request (UnavailableError naming the peer when it does not
        answer)."""
        try:
            return self.peering.stop_request(peer, request_id)
        except NotFoundError:
            return {}

    def stop(self, record: RequestRecord) -> RequestRecord:
        """Stop an offloaded request at its peer, then here (a 503 naming the peer when it
        does not answer: nothing changes here then)."""
        peer = record.cluster or ""
        remote = self.stop_at_peer(peer, record.id)
        try:
            status = RequestStatus(str(remote.get("status")))
        except ValueError:
            status = RequestStatus.STOPPED
        if status not in FINAL:
            status = RequestStatus.STOPPED
        why = (f"stopped by the client, in cluster {peer}" if remote else
               f"stopped by the client; cluster {peer} no longer knew it")

        def note() -> RequestRecord:
            if self.records.status_of(record.id) not in FINAL:
                self.records.update(record.id, Stopped(why, cluster=peer),
                                    status=status)
            return self.records.get(record.id)

        return self.loop.call(note)
