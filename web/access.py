"""Who may call a route (DESIGN 9): the operator's token, or a node's own credential.

Operators manage requests; nodes report measurements. Every route is the operator's unless its
view says otherwise with :func:`access`:

* ``Access.NODES_READ``: a node's credential reads it too (the agent reads a task's booking);
* ``Access.NODES_TOO``: a node writes it too, for its own host only (an agent reports the
  resources a cut really left a task of its node);
* ``Access.NODES_ONLY``: only a node writes it, for its own host: utilization, power, its
  host's registration, its tasks' utilization and ends. The operator's token is 403 there, so
  a holder of the token cannot make a host look busy or idle.

The edge (web/edge.py) asks :func:`node_caller` who a request comes from, and
:func:`admit_node` / :func:`admit_operator` whether the route takes that caller; a handler
that writes for a host calls :func:`require_own_host` with the host it writes (the path's, the
body's, or the host a task is booked on). Credentials are checked in constant time
(domain/credentials.py).
"""

from __future__ import annotations

from collections.abc import Callable
from enum import StrEnum
from typing import TypeVar

from flask import Flask, g, request

from domain.credentials import verified_node
from domain.errors import ForbiddenError

NODE_SECRET_KEY = "GREENSWARM_NODE_SECRET"
_NODE_KEY = "greenswarm_node"
_ACCESS_ATTRIBUTE = "greenswarm_access"
_READS = frozenset({"GET", "HEAD", "OPTIONS"})
View = TypeVar("View", bound=Callable[..., object])


class Access(StrEnum):
    OPERATOR = "operator"
    NODES_READ = "nodes-read"
    NODES_TOO = "nodes-too"
    NODES_ONLY = "nodes-only"


def access(kind: Access) -> Callable[[View], View]:
    """Mark a view with who may call it (the operator's, when unmarked)."""

    def mark(view: View) -> View:
        setattr(view, _ACCESS_ATTRIBUTE, kind)
        return view

    return mark


def route_access(app: Flask) -> Access:
    """Who may call the route of the current request (the operator, for an unknown one)."""
    rule = request.url_rule
    view = app.view_functions.get(rule.endpoint) if rule is not None else None
    found = getattr(view, _ACCESS_ATTRIBUTE, Access.OPERATOR)
    return found if isinstance(found, Access) else Access.OPERATOR


def node_caller(header: str | None, node_secret: str) -> str | None:
    """The node a ``Bearer`` header proves to be, else None."""
    if not node_secret or not header or not header.startswith("Bearer "):
        return None
    return verified_node(header[len("Bearer ") :], node_secret)


def admit_node(app: Flask, node_id: str) -> None:
    """Let a node's request through to a route that takes nodes (403 anywhere else); the
    handler then learns the node from :func:`calling_node`."""
    if request.url_rule is None:
        g.setdefault(_NODE_KEY, node_id)  # an unknown path or method: 404 or 405 follows
        return
    kind = route_access(app)
    if kind is Access.OPERATOR:
        raise ForbiddenError(f"node {node_id}'s credential reports its own host's measurements;"
                             " it manages no requests")
    if kind is Access.NODES_READ and request.method not in _READS:
        raise ForbiddenError(f"node {node_id}'s credential only reads this")
    g.setdefault(_NODE_KEY, node_id)


def admit_operator(app: Flask) -> None:
    """The operator's token is 403 where only nodes write (OPTIONS there still answers)."""
    if (request.url_rule is not None and request.method not in _READS
            and route_access(app) is Access.NODES_ONLY):
        raise ForbiddenError("only a node's agent and monitor report its measurements, with the "
                             "node's own credential; the operator's token manages requests")


def calling_node() -> str | None:
    """The node the current request comes from; None for the operator."""
    node: str | None = g.get(_NODE_KEY)
    return node


def require_own_host(host_id: str) -> None:
    """403 unless the caller is the operator or the node ``host_id``."""
    node = calling_node()
    if node is not None and node != host_id:
        raise ForbiddenError(f"node {node} may write only its own host's values, not "
                             f"{host_id}'s")
