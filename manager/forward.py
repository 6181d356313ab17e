"""A standby manager forwards every mutating call to the leader (DESIGN 13).

Reads are served by any manager from the shared registries; a write (a submission, a stop, a
node's report) must reach the one manager that schedules. A standby relays the caller's own
request, its credential and body as they came, to the leader the lease names, and relays the
answer back; while no manager leads (the lease expired and nobody took it yet) it answers 503
with ``Retry-After`` and, when it knows one, the last leader's URL. A request that was already
forwarded once is never forwarded again (leadership moved meanwhile: 503, the caller retries).

This is a relay of somebody else's call, byte for byte, not a call of ours: it uses a
``requests`` session directly rather than web.client.HttpClient, which encodes its own JSON
bodies and maps answers to errors.
"""

from __future__ import annotations

import logging
import socket
from concurrent.futures import ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from urllib.parse import urlsplit

import requests
from flask import Flask, Response, jsonify, request

from manager.leadership import Leadership, Role
from web.edge import MUTATING_METHODS

log = logging.getLogger(__name__)

FORWARDED_HEADER = "X-Greenswarm-Forwarded"
# what the caller said that the leader needs: its credential, the body's type, a session
_PASSED_IN = ("Authorization", "Content-Type", "Cookie", "Accept", "Forwarded",
              "X-Forwarded-Proto")
_PASSED_OUT = ("Content-Type", "Set-Cookie", "Retry-After", "Location", "WWW-Authenticate",
               "Allow")
CONNECT_TIMEOUT_S = 2.0
# The leader's name must resolve within this (a connect timeout does not cover it): a leader
# whose task died leaves a name Swarm's DNS takes about 10 s to give up on, and relays stuck on
# it held every worker thread of a standby past the new leader's election.
RESOLVE_TIMEOUT_S = 1.0
READ_TIMEOUT_S = 75.0  # longer than the scheduling loop's own limit on a call (60 s)


class LeaderForward:
    def __init__(self, leadership: Leadership) -> None:
        self.leadership = leadership
        self._session = requests.Session()
        # resolutions run here, so a stuck one holds a resolver, not a worker thread
        self._resolvers = ThreadPoolExecutor(max_workers=2, thread_name_prefix="leader-dns")

    def install(self, app: Flask) -> None:
        """After web.install's hooks: the caller's credential and body bounds are checked here
        first, so a standby relays nothing a leader would refuse at its door."""
        app.before_request(self._maybe_forward)

    def _maybe_forward(self) -> Response | None:
        if request.method not in MUTATING_METHODS or not self.leadership.elected:
            return None
        view = self.leadership.view
        if view.role is Role.LEADER:
            return None
        # a lease of our own URL is this manager's former life (restarted before its lease
        # expired): nobody leads until it does
        if (view.leader_url in (None, self.leadership.lease.url)
                or request.headers.get(FORWARDED_HEADER)):
            return self._no_leader(view.leader_url)
        return self._relay(view.leader_url)

    def _relay(self, leader_url: str) -> Response:
        headers = {name: request.headers[name] for name in _PASSED_IN if name in request.headers}
        headers[FORWARDED_HEADER] = "1"
        path = request.full_path if request.query_string else request.path
        if not self._resolves(leader_url):
            log.warning("forwarding %s %s: the leader %s does not resolve within %g s",
                        request.method, request.path, leader_url, RESOLVE_TIMEOUT_S)
            return self._no_leader(leader_url, f"the leader {leader_url} does not answer (its "
                                   f"name does not resolve within {RESOLVE_TIMEOUT_S:g} s)")
        try:
            answer = self._session.request(
                request.method, leader_url + path, data=request.get_data(), headers=headers,
                timeout=(CONNECT_TIMEOUT_S, READ_TIMEOUT_S), allow_redirects=False)
        except requests.RequestException as exc:
            log.warning("forwarding %s %s to the leader %s failed: %s", request.method,
                        request.path, leader_url, exc)
            return self._no_leader(leader_url, f"the leader {leader_url} does not answer")
        response = Response(answer.content, status=answer.status_code)
        for name in _PASSED_OUT:
            for value in answer.raw.headers.getlist(name) if answer.raw else ():
                response.headers.add(name, value)
        return response

    def _resolves(self, url: str) -> bool:
        parts = urlsplit(url)
        if parts.hostname is None:
            return False
        found = self._resolvers.submit(socket.getaddrinfo, parts.hostname, parts.port or 80)
        try:
            found.result(timeout=RESOLVE_TIMEOUT_S)
        except (FutureTimeout, OSError):
            return False
        return True

    @staticmethod
    def _no_leader(leader_url: str | None, why: str = "") -> Response:
        message = why or ("no manager leads right now (a new leader is chosen within the "
                          "lease time); try again shortly")
        response = jsonify({"error": "unavailable", "message": message, "leader": leader_url})
        response.status_code = 503
        response.headers["Retry-After"] = "1"
        return response
