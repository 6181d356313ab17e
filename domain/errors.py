"""The one exception root of greenswarm, and its few families.

Edges translate foreign errors (docker.errors, redis exceptions, HTTP failures) into these, so
callers catch ``GreenSwarmError`` and REST handlers map each family to one status code.
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
        # intact, e.g. from a simulation worker (benchmarks/sim/runner.py)
        return type(self), (self.field, self.message)

    def to_dict(self) -> dict[str, str]:
        return {"error": "invalid", "field": self.field, "message": self.message}


class NotFoundError(GreenSwarmError):
    """A host, task or request that the caller named does not exist."""


class ConflictError(GreenSwarmError):
    """The operation contradicts the current state (e.g. a host id registered twice)."""


class UnavailableError(GreenSwarmError):
    """A backend (Redis, the Docker engine, a remote agent) cannot be reached or failed."""


class AuthError(GreenSwarmError):
    """A mutating call arrived without a valid bearer token."""
