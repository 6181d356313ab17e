"""The manager's link to its peer clusters (DESIGN 12): their adverts, kept fresh, and the
calls that forward a request, read it and stop it there. The I/O edge of federation/peers.py.

A thread asks every peer for its advert (GET /federation/advert) each GREENSWARM_PEER_REFRESH_S;
an offload asks again first for the peers last asked a period ago or more. A peer whose answer
fails (no connection, a timeout, an error status, a token refused, an advert that is not valid
or names another cluster) is marked down with the error, and skipped until a refresh succeeds.
Every call is bounded (GREENSWARM_PEER_TIMEOUT_S; forwarding, which waits for the peer's
decision and its Swarm, FORWARD_TIMEOUT_S), and none runs on the scheduling loop.

Forwarding is idempotent with the request's id: the body carries ``forwarded_from`` (this
cluster), so the peer places it by its own policy and never forwards it again. A forward whose
answer was lost (no connection, a timeout, a dropped connection, a 5xx) is sent once more,
here rather than by the HTTP client (which never sends a POST twice): a peer that already has
the request answers 409, and the request is adopted when the peer's record says this cluster
forwarded it. Should that fail too, no other peer is asked: the first may hold it, and a
request is never placed twice. The other calls (adverts, reading and stopping a request) are
retried as web/client.py says.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from enum import StrEnum
from typing import Any

from client.manager import ManagerClient
from domain.errors import AuthError, GreenSwarmError, NotFoundError, UnavailableError
from domain.lifecycle import RequestStatus
from federation.offload import Advert
from federation.peers import Peer, PeerView

log = logging.getLogger(__name__)
FORWARD_TIMEOUT_S = 30.0  # a forwarded request: the peer decides and creates its service
FORWARD_TRIES = 2
RETRY_PAUSE_S = 0.5


class Forward(StrEnum):
    PLACED = "placed"  # the peer holds it (its status says how it runs)
    REFUSED = "refused"  # the peer does not hold it: another peer may be asked
    UNKNOWN = "unknown"  # the peer may hold it: no other peer may be asked


@dataclass(frozen=True, slots=True)
class Forwarded:
    outcome: Forward
    reason: str = ""  # why it was refused or is unknown (for people)
    record: dict[str, Any] | None = None  # the peer's record (PLACED)
    decision: dict[str, Any] | None = None  # the peer's decision, when it answered 201

    @property
    def status(self) -> RequestStatus:
        return RequestStatus(str((self.record or {}).get("status")))


class Peering:
    def __init__(
        self,
        home: str,
        peers: Iterable[Peer],
        *,
        refresh_s: float,
        timeout_s: float,
        clock: Callable[[], float],
    ) -> None:
        self.home = home
        self.refresh_s = refresh_s
        self.timeout_s = timeout_s
        self.clock = clock
        self._views = {peer.name: PeerView(peer) for peer in peers}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="peering", daemon=True)
        self.active = True  # only the leading manager asks the peers (DESIGN 13)

    # -- life cycle -------------------------------------------------------------------------

    def start(self) -> None:
        if self._views and not self._thread.is_alive() and not self._stop.is_set():
            self._thread.start()

    def stop(self) -> None:
        self._stop.set()

    def _run(self) -> None:
        while True:
            try:
                if self.active:
                    self.refresh(self.names())
            except Exception:
                log.exception("refreshing the peers' adverts failed")
            if self._stop.wait(self.refresh_s):
                return

    # -- state --------------------------------------------------------------------------------

    def names(self) -> list[str]:
        return sorted(self._views)

    def views(self, *, fresh: bool = False) -> list[PeerView]:
        """Every peer's view, by name; ``fresh``: first refresh those last asked a refresh
        period ago or more (in parallel, each bounded by the timeout)."""
        if fresh:
            now = self.clock()
            with self._lock:
                stale = [name for name, view in self._views.items()
                         if view.stale(now, self.refresh_s)]
            self.refresh(stale)
        with self._lock:
            return [self._views[name] for name in sorted(self._views)]

    def view(self, name: str) -> PeerView:
        with self._lock:
            try:
                return self._views[name]
            except KeyError:
                raise UnavailableError(f"peer {name} is not configured here (any more)") from None

    def _set(self, name: str, change: Callable[[PeerView], PeerView]) -> None:
        with self._lock:
            before = self._views[name]
            self._views[name] = after = change(before)
        if before.state is not after.state:
            log.warning("peer %s is %s%s", name, after.state.value,
                        f": {after.error}" if after.error else "")

    def mark_down(self, name: str, error: str) -> None:
        self._set(name, lambda view: view.failed(error, self.clock()))

    # -- adverts ------------------------------------------------------------------------------

    def refresh(self, names: Iterable[str]) -> None:
        todo = list(names)
        if len(todo) == 1:
            self.refresh_one(todo[0])
        elif todo:
            with ThreadPoolExecutor(max_workers=min(8, len(todo)),
                                    thread_name_prefix="peer-refresh") as pool:
                list(pool.map(self.refresh_one, todo))

    def refresh_one(self, name: str) -> PeerView:
        """Ask ``name`` for its advert now: up with it, or down with why."""
        peer = self.view(name).peer
        try:
            answer = self._client(peer, self.timeout_s).call("GET", "/federation/advert")
            advert = Advert.from_json(answer)
            if advert.cluster != name:
                raise UnavailableError(f"it calls itself {advert.cluster!r}, not {name!r}: "
                                       "check the peers file")
        except AuthError:
            self.mark_down(name, self._token_refused(peer))
        except GreenSwarmError as exc:
            self.mark_down(name, str(exc))
        else:
            self._set(name, lambda view: view.refreshed(advert, self.clock()))
        return self.view(name)

    # -- requests at a peer -------------------------------------------------------------------

    def forward(self, name: str, body: dict[str, Any]) -> Forwarded:
        """POST ``body`` (a request with its ``name`` and ``forwarded_from``) to the peer."""
        peer = self.view(name).peer
        client = self._client(peer, FORWARD_TIMEOUT_S, tries=1)  # the loop below retries
        request_id = str(body["name"])
        lost = ""
        for attempt in range(FORWARD_TRIES):
            if attempt:
                self._stop.wait(RETRY_PAUSE_S)
            try:
                response = client.answer("POST", "/requests", body)
            except AuthError:
                self.mark_down(name, self._token_refused(peer))
                return Forwarded(Forward.REFUSED, self._token_refused(peer))
            except UnavailableError as exc:
                lost = str(exc)
                continue
            if response.status == 201:
                try:
                    payload = response.json_object()
                    return self._held(name, payload["request"], payload.get("decision"))
                except (UnavailableError, KeyError, TypeError):
                    lost = "its answer to POST /requests is not a request record"
                    continue
            if response.status == 409:
                return self._adopt(name, request_id)
            error = response.error()
            if response.status >= 500:
                lost = str(error)
                continue
            return Forwarded(Forward.REFUSED, f"peer {name} refused it: {error}")
        self.mark_down(name, lost)
        return Forwarded(Forward.UNKNOWN, f"peer {name} did not answer ({lost}); it may hold "
                         "the request, so no other peer was asked")

    def _adopt(self, name: str, request_id: str) -> Forwarded:
        """The peer has a request of this id: ours when its record says we forwarded it."""
        try:
            record = self.request(name, request_id)
        except GreenSwarmError as exc:
            return Forwarded(Forward.UNKNOWN, f"peer {name} has a request {request_id!r} "
                             f"that could not be read: {exc}")
        if record.get("forwarded_from") != self.home:
            return Forwarded(Forward.REFUSED, f"peer {name} already has a request named "
                             f"{request_id!r} that this cluster did not send")
        try:
            return self._held(name, record, None)
        except TypeError:
            return Forwarded(Forward.UNKNOWN, f"peer {name}: its record of {request_id!r} "
                             "is malformed")

    def _held(self, name: str, record: object, decision: object) -> Forwarded:
        if not isinstance(record, dict) or not isinstance(record.get("id"), str):
            raise TypeError("not a record")
        try:
            status = RequestStatus(str(record.get("status")))
        except ValueError:
            return Forwarded(Forward.UNKNOWN, f"peer {name} answered an unknown status "
                             f"{record.get('status')!r}")
        said = decision if isinstance(decision, dict) else None
        if status is RequestStatus.REJECTED:
            reason = str((said or {}).get("reason") or "its policy found no room")
            return Forwarded(Forward.REFUSED, f"peer {name} did not place it: {reason}")
        # its room changed: the next offload asks for its advert first
        self._set(name, lambda view: replace(view, checked_at=None))
        return Forwarded(Forward.PLACED, record=record, decision=said)

    def request(self, name: str, request_id: str) -> dict[str, Any]:
        """The peer's record of ``request_id``; UnavailableError naming the peer when it does
        not answer (it is then marked down), NotFoundError when it does not know the id."""
        return self._ask(name, "GET", f"/requests/{request_id}", self.timeout_s)

    def stop_request(self, name: str, request_id: str) -> dict[str, Any]:
        """DELETE the request at the peer: its record afterwards (errors as :meth:`request`)."""
        return self._ask(name, "DELETE", f"/requests/{request_id}", FORWARD_TIMEOUT_S)

    def _ask(self, name: str, method: str, path: str, timeout_s: float) -> dict[str, Any]:
        view = self.view(name)
        try:
            answer = self._client(view.peer, timeout_s).call(method, path)
        except NotFoundError:
            raise NotFoundError(f"peer {name} has no such request ({method} {path})") from None
        except AuthError:
            self.mark_down(name, self._token_refused(view.peer))
            raise UnavailableError(self._token_refused(view.peer)) from None
        except GreenSwarmError as exc:
            self.mark_down(name, str(exc))
            raise UnavailableError(f"peer {name} is down: {exc}") from None
        if not isinstance(answer, dict):
            raise UnavailableError(f"peer {name}: {method} {path} answered no record")
        return answer

    # -- helpers ------------------------------------------------------------------------------

    @staticmethod
    def _client(peer: Peer, timeout_s: float, tries: int = 3) -> ManagerClient:
        # one per call: requests' sessions are not meant to be shared between threads
        return ManagerClient(peer.url, peer.token, timeout_s=timeout_s,
                             target=f"peer {peer.name}", tries=tries)

    @staticmethod
    def _token_refused(peer: Peer) -> str:
        return f"peer {peer.name} refused our token (its token in the peers file)"
