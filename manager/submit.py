"""A new request (POST /requests): read at the door, recorded, decided here or offered to a peer.

The steps, in order, each its own function:

1. ``_read``: the body against the spec (400 naming the field), as large as the largest host
   may take (or an up peer's room, when it may be offloaded); on the caller's thread.
2. On the scheduling loop (``_on_loop``): ``_check_new`` (409 for a known id), ``_admit``
   (admission control of a request that would wait, DESIGN 3.13: 503 with Retry-After, and no
   record), ``_record`` (its record), then the Swarm takes it (the 'swarm' policy), or
   ``_preview`` asks the scheduler what it would decide when offloading may take it (DESIGN
   12), and either the loop lets go of it (an ``Offer``) or ``place_here`` applies that same
   decision.
3. An offer is forwarded to the peers on the caller's thread (manager/offload.py); when none
   takes it, ``_not_offloaded`` notes why and decides it here after all.

``place_here`` applies the scheduler's decision to the registries and carries it out
(manager/effects.py); a deployment's request placed here takes it too (manager/deployments.py).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from domain.errors import AdmissionRefused, ConflictError, UnavailableError
from domain.events import NotOffloaded, RefusedAtAdmission
from domain.lifecycle import FINAL
from domain.model import Request, check_id
from federation.peers import OffloadMode, request_bounds, wants_offload
from host_registry.redis_store import RedisStore
from manager.effects import Effects
from manager.loop import SchedulingLoop
from manager.offload import NoPeerTook, Offer, Offloading, Submitted
from manager.peering import Peering
from manager.reconcile import SwarmSync
from manager.records import RequestRecords
from manager.settings import ManagerSettings
from manager.spec import parse_spec
from scheduler.preview import Preview
from scheduler.service import Outcome, Scheduler

Bounds = tuple[int, int]


class Submissions:
    def __init__(self, settings: ManagerSettings, store: RedisStore, records: RequestRecords,
                 scheduler: Scheduler, swarm: SwarmSync, effects: Effects, loop: SchedulingLoop,
                 peering: Peering, offloading: Offloading, clock: Callable[[], float],
                 *, by_swarm: bool,
                 refused_at_admission: Callable[[int, str], None] = lambda cls, resource: None,
                 ) -> None:
        self.settings = settings
        self.store = store
        self.records = records
        self.scheduler = scheduler
        self.swarm = swarm
        self.effects = effects
        self.loop = loop
        self.peering = peering
        self.offloading = offloading
        self.clock = clock
        self.by_swarm = by_swarm  # the 'swarm' policy: Swarm places, the scheduler only books
        self.refused_at_admission = refused_at_admission  # counted (class, resource)

    def submit(self, body: Any) -> Submitted:
        """Decide a new request here, or offload it to a peer (DESIGN 12): the peer HTTP calls
        run on the caller's thread, never on the scheduling loop."""
        request, spec, queue, forwarded_from = self._read(body)
        first = self.loop.call(lambda: self._on_loop(request, spec, queue, forwarded_from))
        if not isinstance(first, Offer):
            return first
        forwarded = self.offloading.forward(first)
        if isinstance(forwarded, NoPeerTook):
            return self.loop.call(lambda: self._not_offloaded(first, forwarded))
        return forwarded

    # -- the door -----------------------------------------------------------------------------

    def _read(self, body: Any) -> tuple[Request, dict[str, Any], bool | None, str | None]:
        """The request, its normalised spec, whether it asked to queue, and the peer that
        forwarded it (None: its client sent it here)."""
        forwarded_from = None
        if isinstance(body, dict) and "forwarded_from" in body:
            body = dict(body)
            forwarded_from = check_id(body.pop("forwarded_from"), "forwarded_from")
        max_cpu, max_memory = self.request_bounds(
            with_peers=self.settings.offload is not OffloadMode.OFF and forwarded_from is None)
        request, spec, queue = parse_spec(body, max_cpu_shares=max_cpu, max_memory=max_memory)
        return request, spec, queue, forwarded_from

    def door_bounds(self) -> tuple[Bounds | None, Bounds | None]:
        """The largest CPU shares and memory a new request may ask for now, and a deployment's
        request (the OpenAPI document states them); None while no host is known."""
        try:
            return (self.request_bounds(with_peers=self.settings.offload is not OffloadMode.OFF),
                    self.request_bounds(with_peers=True))
        except UnavailableError:
            return None, None

    def request_bounds(self, *, with_peers: bool) -> Bounds:
        """The largest CPU shares and memory a new request may ask for (with the peers' rooms
        when it may go to one); unavailable while no host is known."""
        hosts = [(h.cpu_capacity, h.memory_capacity) for h in self.store.all_hosts()]
        if not hosts:
            raise UnavailableError("no host is known yet: is any Swarm node Ready and Active?")
        return request_bounds(hosts, self.peering.views(), with_peers=with_peers)

    # -- on the scheduling loop ---------------------------------------------------------------

    def _on_loop(
        self, request: Request, spec: dict[str, Any], queue: bool | None,
        forwarded_from: str | None,
    ) -> Submitted | Offer:
        self._check_new(request)
        if not self.by_swarm:
            self._admit(request, queue)
        self._record(request, spec, forwarded_from)
        if self.by_swarm:
            self.swarm.hand_to_swarm(request, spec)
            return Submitted(self.records.get(request.id), None)
        started = time.perf_counter()
        preview = self._preview(request, queue, forwarded_from)
        if preview is not None and wants_offload(preview.decision, self.settings.offload,
                                                 forwarded_from=forwarded_from, waits=False):
            return Offer(request, spec, queue)
        return self.place_here(request, queue, preview=preview, started=started)

    def _check_new(self, request: Request) -> None:
        if self.records.exists(request.id):
            raise ConflictError(f"a request named {request.id!r} already exists")

    def _admit(self, request: Request, queue: bool | None) -> None:
        """Admission control (DESIGN 3.13) of a request that would wait, against the books as
        they are (other paths change them too: read again first). Refused: nothing is recorded
        but a typed event in the events stream, it is counted, and AdmissionRefused (503 with
        Retry-After) says why."""
        ledger = self.scheduler.ledger
        waits = self.scheduler.admits_to_queue if queue is None else queue
        if ledger is None or not waits:
            return
        self.scheduler.resync_admission(self.store.tasks())
        refusal = self.scheduler.admission_refusal(request, queue=queue)
        if refusal is None:
            return
        # no admitted request says when it ends: the queue's next retry is the next chance
        retry_after_s = ledger.retry_after_s(refusal.cls, self.clock(),
                                             self.settings.retry_interval_s)
        self.records.note(request.id, RefusedAtAdmission(
            refusal.reason, resource=refusal.resource.value, demand=refusal.demand,
            room=refusal.room, retry_after_s=retry_after_s))
        self.refused_at_admission(refusal.cls, refusal.resource.value)
        raise AdmissionRefused(refusal.reason, retry_after_s, request=request.id,
                               **refusal.to_dict())

    def _record(self, request: Request, spec: dict[str, Any],
                forwarded_from: str | None) -> None:
        self.records.create(request.id, spec, forwarded_from=forwarded_from)

    def _preview(self, request: Request, queue: bool | None,
                 forwarded_from: str | None) -> Preview | None:
        """What this cluster would decide for ``request`` now, when offloading may take it:
        it is on, the request was not forwarded here and does not wait in the queue (None
        otherwise: nothing is decided yet)."""
        waits = self.scheduler.admits_to_queue if queue is None else queue
        if self.settings.offload is OffloadMode.OFF or forwarded_from is not None or waits:
            return None
        return self.scheduler.preview(request, self.clock())

    def place_here(self, request: Request, queue: bool | None, *,
                   preview: Preview | None = None, started: float | None = None,
                   not_offloaded: str | None = None) -> Submitted:
        """On the loop: this cluster's own decision (``preview``'s, while it stands), applied
        and carried out; a refusal's reason also says why no peer took it
        (``not_offloaded``). The answer's ``decision_ms`` is the scheduler's time since
        ``started`` (before the preview), Docker work excluded."""
        started = time.perf_counter() if started is None else started
        now = self.clock() if preview is None else preview.now
        outcome = self.scheduler.submit(request, now, queue=queue, preview=preview)
        decision_ms = (time.perf_counter() - started) * 1000
        if not_offloaded is not None:
            _note_refusals(outcome, request.id, f"not offloaded: {not_offloaded}")
        self.effects.carry_out(outcome)
        decision = outcome.decision_for(request.id)
        return Submitted(self.records.get(request.id),
                         None if decision is None else
                         {**decision.to_dict(), "decision_ms": round(decision_ms, 3)})

    def _not_offloaded(self, offer: Offer, result: NoPeerTook) -> Submitted:
        """No peer took the request: its record says why, and it is decided here after all."""
        record = self.records.get(offer.request.id)
        if record.status in FINAL:  # stopped by the client meanwhile
            return Submitted(record, None)
        self.records.update(
            offer.request.id,
            NotOffloaded(f"not offloaded: {result.why}", peers_down=result.down),
        )
        return self.place_here(offer.request, offer.queue, not_offloaded=result.why)


def _note_refusals(outcome: Outcome, request_id: str, note: str) -> None:
    """Add ``note`` to the reason of the refusal of ``request_id`` in ``outcome``."""
    outcome.refused = [replace(d, reason=f"{d.reason}; {note}") if d.request.id == request_id
                       else d for d in outcome.refused]
