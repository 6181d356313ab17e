"""The one HTTP client of greenswarm (DESIGN 10, docker-py's model: one client, one error root).

Every call of ours to an HTTP service of ours goes through :class:`HttpClient`: the CLI, the
replay and the peers to a manager (client/manager.py, manager/peering.py), the monitor to the
registries (monitor/client.py), an agent to the manager's registries (task_registry/agent.py),
the manager to the agents (manager/agents.py) and to the lab's power endpoint
(manager/power_backends.py). It owns, once for all of them:

* one ``requests`` session per target (one base URL), with the target's bearer credential
  attached to every call: the operator's token, a node's credential, or the manager's word to
  one node's agent (domain/credentials.py; who may call what: web/access.py);
* bounded calls: a connect timeout and a read timeout (:class:`HttpSettings`);
* retries with back-off, for the calls where asking again cannot do a thing twice (below);
* every failure as a family of domain.errors: an error answer as :func:`error_from_answer` maps
  it (400 and 413 ValidationError naming the field the body names, 401 AuthError, 403
  ForbiddenError, 404 NotFoundError, 409 ConflictError, 429 and 5xx UnavailableError keeping
  the answer's ``Retry-After`` as ``retry_after_s``), and no answer at all (refused, timed out,
  dropped) as an UnavailableError naming the target and the call. Bodies are sent as strict
  JSON: a NaN or an infinity is a ValidationError before anything is sent.

Which calls are retried, and why (:meth:`HttpSettings.may_retry`), up to ``tries`` attempts,
pausing ``backoff_s``, doubled after each, at most ``backoff_max_s``:

* a connection never made (refused, connect timeout, a name not resolved): any method, POST
  too, since nothing reached the server (a manager or an agent restarting);
* a connection dropped before the answer came (reset, closed): idempotent methods only (GET,
  HEAD, OPTIONS, PUT, DELETE: each PUT of ours sets absolute values, a DELETE of what is gone
  is a 404). A POST may have been acted on, so it is never sent again here: its caller decides
  (the peering re-sends a forward by the request's id and adopts it on 409; the agent reports
  an exit again at its next reconciliation);
* an answer 429 or 503 with a ``Retry-After`` of at most ``retry_after_max_s``: idempotent
  methods only, after that pause (the server said when to come back, and soon);
* never: a read timeout (the server is slow, not gone: asking again doubles the wait and its
  load), and any other answer (a 5xx without Retry-After is the server failing: the caller's
  own loop, e.g. the monitor's back-off, knows better when to try again).

A client whose caller already retries in a loop of its own (the monitor's back-off, the
manager's booked cuts that the agents' reconciliation applies) is given ``tries=1``.
"""

from __future__ import annotations

import email.utils
import json
import logging
import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from enum import StrEnum
from typing import Any

import requests
from urllib3.exceptions import NewConnectionError

from domain.errors import (
    GreenSwarmError,
    UnavailableError,
    ValidationError,
    error_from_answer,
)

log = logging.getLogger(__name__)

IDEMPOTENT_METHODS = frozenset({"GET", "HEAD", "OPTIONS", "PUT", "DELETE"})
RETRY_AFTER_STATUSES = frozenset({429, 503})
_MAX_TIMEOUT_S = 3600.0
_MAX_TRIES = 10


@dataclass(frozen=True)
class HttpSettings:
    """How one client calls its target: timeouts and retries (the module's docstring says
    which calls are retried). Each client's settings say its own (their defaults here)."""

    connect_timeout_s: float = 3.0
    read_timeout_s: float = 30.0
    tries: int = 3  # attempts in all, the first included (1: never retried)
    backoff_s: float = 0.2  # the pause before the second attempt, doubled before each next
    backoff_max_s: float = 2.0
    retry_after_max_s: float = 5.0  # a longer Retry-After is the caller's to wait, not ours

    def __post_init__(self) -> None:
        for name, zero_ok in (("connect_timeout_s", False), ("read_timeout_s", False),
                              ("backoff_s", True), ("backoff_max_s", True),
                              ("retry_after_max_s", True)):
            value = getattr(self, name)
            low_ok = _number(value) and (value > 0 or (zero_ok and value == 0))
            if not (low_ok and value <= _MAX_TIMEOUT_S):
                low = "[0" if zero_ok else "(0"
                raise ValidationError(name, f"must be a number of seconds in {low}, "
                                      f"{_MAX_TIMEOUT_S:g}], got {value!r}")
        if isinstance(self.tries, bool) or not isinstance(self.tries, int) or not (
                1 <= self.tries <= _MAX_TRIES):
            raise ValidationError("tries", f"must be a whole number in [1, {_MAX_TRIES}], "
                                  f"got {self.tries!r}")

    def but(self, **changes: Any) -> HttpSettings:
        """These settings with ``changes`` (checked again)."""
        return replace(self, **changes)

    def pause_s(self, attempt: int) -> float:
        """The pause after failed attempt number ``attempt`` (1 for the first)."""
        return float(min(self.backoff_max_s, self.backoff_s * 2 ** (attempt - 1)))

    def may_retry(self, method: str, failure: Failure, retry_after_s: float | None) -> bool:
        """Whether a call of ``method`` that failed so is asked again (attempts aside)."""
        if failure is Failure.NOT_CONNECTED:
            return True
        if method not in IDEMPOTENT_METHODS:
            return False
        if failure is Failure.DROPPED:
            return True
        return (failure is Failure.BUSY and retry_after_s is not None
                and retry_after_s <= self.retry_after_max_s)


def _number(value: object) -> bool:
    return (not isinstance(value, bool) and isinstance(value, int | float)
            and math.isfinite(value))


class Failure(StrEnum):
    """How an attempt failed, for the retry rule."""

    NOT_CONNECTED = "not-connected"  # nothing reached the server
    DROPPED = "dropped"  # the connection broke before the answer came
    TIMED_OUT = "timed-out"  # no answer within the read timeout
    BUSY = "busy"  # answered 429 or 503


@dataclass(frozen=True)
class Answer:
    """An HTTP answer: its status, its body decoded (the JSON value; the text when it is not
    JSON; None when it is empty), its Retry-After in seconds, and what was called."""

    status: int
    body: object
    is_json: bool
    context: str  # e.g. "GET /requests/r1", for messages
    retry_after_s: float | None = None

    @property
    def ok(self) -> bool:
        return 200 <= self.status < 300

    def error(self) -> GreenSwarmError:
        """This answer as its family of the exception root."""
        return error_from_answer(self.status, self.body, self.context,
                                 retry_after_s=self.retry_after_s)

    def raise_for_error(self) -> Answer:
        """This answer when it is a success; an error answer raised as its family."""
        if not self.ok:
            raise self.error()
        return self

    def json(self) -> Any:
        """A successful answer's JSON (None for 204 No Content); an error answer raised as its
        family; a body that is not JSON an UnavailableError."""
        if not self.ok:
            raise self.error()
        if self.status == 204 and self.body is None:
            return None
        if not self.is_json:
            raise UnavailableError(f"{self.context}: the answer is not JSON")
        return self.body

    def json_object(self) -> dict[str, Any]:
        """:meth:`json`, which must be an object."""
        body = self.raise_for_error().body
        if not self.is_json or not isinstance(body, dict):
            raise UnavailableError(f"{self.context}: the answer is not an object")
        return body


@dataclass
class HttpClient:
    """Calls to one target (``base_url``) with one session and its credential.

    ``target`` names it in messages ("registry", "agent of node n1"); ``context`` prefixes what
    was called in an error answer's message ("" for the operator's CLI: "GET /requests/r1 ->
    HTTP 404: ..."); ``auth_hint`` is added to a refused credential's message (where the
    credential comes from). ``sleep`` is the pause between attempts."""

    base_url: str
    target: str
    bearer: str = field(default="", repr=False)
    settings: HttpSettings = field(default_factory=HttpSettings)
    context: str = ""
    auth_hint: str = ""
    sleep: Callable[[float], None] = time.sleep
    session: requests.Session = field(default_factory=requests.Session, repr=False)

    def __post_init__(self) -> None:
        self.base_url = self.base_url.rstrip("/")
        self.session.headers["Accept"] = "application/json"
        if self.bearer:
            self.session.headers["Authorization"] = f"Bearer {self.bearer}"

    def close(self) -> None:
        self.session.close()

    # -- calls ------------------------------------------------------------------------------

    def call(self, method: str, path: str, body: object = None, *,
             read_timeout_s: float | None = None, settings: HttpSettings | None = None) -> Any:
        """A successful answer's JSON; anything else raised as its family."""
        return self.answer(method, path, body, read_timeout_s=read_timeout_s,
                           settings=settings).json()

    def call_object(self, method: str, path: str, body: object = None, *,
                    read_timeout_s: float | None = None) -> dict[str, Any]:
        """:meth:`call`, whose answer must be a JSON object."""
        return self.answer(method, path, body, read_timeout_s=read_timeout_s).json_object()

    def answer(self, method: str, path: str, body: object = None, *,
               read_timeout_s: float | None = None,
               settings: HttpSettings | None = None) -> Answer:
        """The answer whatever its status (after the retries the rule allows), except a
        refused credential, raised as AuthError or ForbiddenError: asking again never helps.
        No answer at all is an UnavailableError naming the target and the call."""
        rules = settings or self.settings
        data = None if body is None else _encode(body)
        timeout = (rules.connect_timeout_s,
                   rules.read_timeout_s if read_timeout_s is None else read_timeout_s)
        attempt = 1
        while True:
            failure, outcome = self._attempt(method, path, data, timeout)
            retry_after_s = outcome.retry_after_s if isinstance(outcome, Answer) else None
            if (failure is None or attempt >= rules.tries
                    or not rules.may_retry(method, failure, retry_after_s)):
                break
            pause_s = rules.pause_s(attempt) if retry_after_s is None else retry_after_s
            log.debug("%s %s %s failed (%s); attempt %d in %.2f s", self.target, method, path,
                      failure, attempt + 1, pause_s)
            self.sleep(pause_s)
            attempt += 1
        if isinstance(outcome, GreenSwarmError):
            raise outcome
        if outcome.status in (401, 403):
            error = outcome.error()
            if self.auth_hint:
                raise type(error)(f"{error}; {self.auth_hint}")
            raise error
        return outcome

    def _attempt(self, method: str, path: str, data: bytes | None,
                 timeout: tuple[float, float]) -> tuple[Failure | None, Answer | GreenSwarmError]:
        """One attempt: how it failed (None: an answer that is no failure) and the answer or
        the error it gives."""
        url = self.base_url + path
        headers = {"Content-Type": "application/json"} if data is not None else None
        try:
            response = self.session.request(method, url, data=data, headers=headers,
                                            timeout=timeout)
            content = response.content
        except requests.RequestException as exc:
            failure = _failure(exc)
            return failure, UnavailableError(self._no_answer(failure, method, url, timeout, exc))
        answer = _decoded(response.status_code, content, response.encoding,
                          response.headers.get("Retry-After"),
                          f"{self.context} {method} {path}".lstrip())
        busy = answer.status in RETRY_AFTER_STATUSES
        return (Failure.BUSY if busy else None), answer

    def _no_answer(self, failure: Failure, method: str, url: str,
                   timeout: tuple[float, float], exc: Exception) -> str:
        call = f"{method} {url}"
        if failure is Failure.TIMED_OUT:
            return f"{self.target} did not answer within {timeout[1]:g} s ({call})"
        if failure is Failure.DROPPED:
            return f"{self.target} dropped the connection ({call}): {_reason(exc)}"
        return f"{self.target} unreachable ({call}): {_reason(exc)}"


def _encode(body: object) -> bytes:
    try:
        return json.dumps(body, allow_nan=False).encode()
    except (TypeError, ValueError) as exc:  # NaN, infinity, or no JSON: a bug upstream
        raise ValidationError("body", f"cannot be sent as JSON: {exc}") from None


def _decoded(status: int, content: bytes, encoding: str | None, retry_after: str | None,
             context: str) -> Answer:
    """The body as JSON (json reads UTF-8, -16 and -32 from the bytes themselves), else as
    text in the answer's charset; empty: None."""
    waited_s = retry_after_seconds(retry_after)
    if not content.strip():
        return Answer(status, None, False, context, waited_s)
    try:
        return Answer(status, json.loads(content), True, context, waited_s)
    except ValueError:
        text = content.decode(encoding or "utf-8", errors="replace")
        return Answer(status, text, False, context, waited_s)


def retry_after_seconds(value: str | None, now: float | None = None) -> float | None:
    """A ``Retry-After`` header in seconds from ``now``: delay-seconds or an HTTP date (RFC
    9110); None when absent or unreadable; never below 0."""
    if value is None or not value.strip():
        return None
    text = value.strip()
    if text.isdigit():
        return float(text)
    try:
        when = email.utils.parsedate_to_datetime(text)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - (time.time() if now is None else now))


def _failure(exc: requests.RequestException) -> Failure:
    if isinstance(exc, requests.ConnectTimeout):
        return Failure.NOT_CONNECTED
    if isinstance(exc, requests.Timeout):
        return Failure.TIMED_OUT
    reason = exc.args[0] if exc.args else None
    reason = getattr(reason, "reason", reason)  # urllib3's MaxRetryError wraps the cause
    if isinstance(reason, NewConnectionError):  # refused, or a name not resolved
        return Failure.NOT_CONNECTED
    return Failure.DROPPED


def _reason(exc: BaseException) -> str:
    """The innermost OS error's words (e.g. "Connection refused"), else the error's text."""
    seen: BaseException | None = exc
    for _ in range(8):  # bounded: the chain is short
        if seen is None:
            break
        if isinstance(seen, OSError) and seen.strerror:
            return str(seen.strerror)
        inner = seen.args[0] if seen.args and isinstance(seen.args[0], BaseException) else None
        seen = inner or getattr(seen, "reason", None) or seen.__cause__ or seen.__context__
    return " ".join(str(exc).split())[:300]

