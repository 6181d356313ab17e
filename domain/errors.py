"""The one exception root of greenswarm, and its few families.

Edges translate foreign errors (docker.errors, redis exceptions, HTTP failures) into these, so
callers catch ``GreenSwarmError``. Each family has one HTTP status, kept here both ways: REST
handlers answer :func:`http_status` and :func:`error_body`, and the one HTTP client
(web/client.py) turns an error answer back into its family with :func:`error_from_answer`.
"""

from __future__ import annotations


class GreenSwarmError(Exception):
    """Root of every error greenswarm raises on purpose."""


class ValidationError(GreenSwarmError):
    """Bad input; ``field`` names the offending field (dotted path for nested input)."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field
        self.message = message

    def __reduce__(self) -> tuple[type[ValidationError], tuple[str, str]]:
        # pickled with its two arguments (args holds the joined text): it crosses processes
        # intact, e.g. from a simulation worker (sim/runner.py)
        return type(self), (self.field, self.message)

    def to_dict(self) -> dict[str, str]:
        return {"error": "invalid", "field": self.field, "message": self.message}


class NotFoundError(GreenSwarmError):
    """A host, task or request that the caller named does not exist."""


class ConflictError(GreenSwarmError):
    """The operation contradicts the current state (e.g. a host id registered twice)."""


class DeploymentRefused(ConflictError):
    """A deployment refused whole (DESIGN 12): which of its requests could not be placed or
    created, and why; nothing of it is left running."""

    def __init__(self, deployment: str, request: str, reason: str, **details: object) -> None:
        super().__init__(f"deployment {deployment!r} refused: {request}: {reason}")
        self.deployment = deployment
        self.request = request
        self.reason = reason
        self.details = details

    def to_dict(self) -> dict[str, object]:
        return {"error": "conflict", "message": str(self), "deployment": self.deployment,
                "request": self.request, "reason": self.reason, **self.details}


class UnavailableError(GreenSwarmError):
    """A backend (Redis, the Docker engine, a remote agent) cannot be reached or failed;
    ``retry_after_s``: when the server said to ask again (an answer's Retry-After), if it did."""

    retry_after_s: float | None = None


class FencedError(UnavailableError):
    """A registry write of a manager that no longer leads: its lease's fencing token is older
    than the newest one given (DESIGN 13), so the write was refused and nothing changed."""


class AdmissionRefused(UnavailableError):
    """A new request not admitted (DESIGN 3.13): the cluster cannot promise its class's SLO
    beside what it admitted. A 503 whose ``Retry-After`` is ``retry_after_s`` and whose body
    names the class, the resource and the demand against the room (``details``)."""

    def __init__(self, message: str, retry_after_s: float, **details: object) -> None:
        super().__init__(message)
        self.retry_after_s = retry_after_s
        self.details = details

    def to_dict(self) -> dict[str, object]:
        return {"error": "unavailable", "message": str(self), "admission": dict(self.details),
                "retry_after_s": self.retry_after_s}


class DamagedRecordError(GreenSwarmError):
    """A record in the registry that cannot be read (a field missing, or a value of no kind
    it may hold): the store's fault, not the caller's, so a 500 that names the record. The
    machinery skips such a record and goes on (DESIGN 9)."""


class AuthError(GreenSwarmError):
    """A call arrived without a valid bearer token."""


class ForbiddenError(AuthError):
    """A valid credential for something it may not do: a node's for another host, or the
    operator's token where only a node reports (DESIGN 9)."""


# -- HTTP: one status per family, both ways ----------------------------------------------------

# (family, status, the "error" word of the JSON body); anything else is a 500 "internal"
_FAMILIES: tuple[tuple[type[GreenSwarmError], int, str], ...] = (
    (ValidationError, 400, "invalid"),
    (ForbiddenError, 403, "forbidden"),
    (AuthError, 401, "unauthorized"),
    (NotFoundError, 404, "not-found"),
    (ConflictError, 409, "conflict"),
    (UnavailableError, 503, "unavailable"),
)


def http_status(exc: GreenSwarmError) -> int:
    """The status a REST handler answers for ``exc``: its family's, else 500."""
    for family, status, _ in _FAMILIES:
        if isinstance(exc, family):
            return status
    return 500


def error_body(exc: GreenSwarmError) -> dict[str, object]:
    """The JSON body that goes with :func:`http_status`; a ValidationError names its field, a
    refused deployment its request and why."""
    if isinstance(exc, DeploymentRefused | AdmissionRefused):
        return exc.to_dict()
    if isinstance(exc, ValidationError):
        return {**exc.to_dict()}
    for family, _, word in _FAMILIES:
        if isinstance(exc, family):
            return {"error": word, "message": str(exc)}
    return {"error": "internal", "message": str(exc)}


def error_from_answer(status: int, payload: object, context: str, *,
                      retry_after_s: float | None = None) -> GreenSwarmError:
    """The inverse of :func:`http_status`, for clients: an HTTP error answer as our family.

    ``payload`` is the answer's decoded JSON (the raw text when it was not JSON, None when there
    was none); ``context`` says what was called, e.g. "GET /requests/x". 400 gives a
    ValidationError with the server's field and message as they were sent (what was called is
    added as a note), and so does 413 (the body was too large); 401 gives an AuthError, 403 a
    ForbiddenError (an AuthError too), 404 NotFoundError, 409 ConflictError, 429 (too many
    requests) and any 5xx UnavailableError (the server or a proxy in front of it failed or is
    busy), keeping ``retry_after_s`` (the answer's Retry-After), anything else the root.
    """
    said = _server_said(payload)
    text = f"{context} -> HTTP {status}" + (f": {said}" if said else " with no JSON body")
    if status in (400, 413):
        message = payload.get("message") if isinstance(payload, dict) else None
        field = payload.get("field") if isinstance(payload, dict) else None
        error: GreenSwarmError = ValidationError(
            str(field) if field else "body", str(message) if message else text
        )
        if message:
            error.add_note(text)
        return error
    if status == 403:
        return ForbiddenError(text)
    if status == 401:
        return AuthError(text)
    if status == 404:
        return NotFoundError(text)
    if status == 409:
        return ConflictError(text)
    if status == 429 or status >= 500:
        unavailable = UnavailableError(text)
        unavailable.retry_after_s = retry_after_s
        return unavailable
    return GreenSwarmError(f"unexpected answer: {text}")


def _server_said(payload: object) -> str:
    """The server's "message", else the body itself, shortened ("" when there is none)."""
    if isinstance(payload, dict) and payload.get("message"):
        return str(payload["message"])
    if payload is None or isinstance(payload, str):
        return " ".join((payload or "").split())[:200]
    return repr(payload)[:200]
