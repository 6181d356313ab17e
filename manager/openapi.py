"""The OpenAPI 3 document of the manager process: its API and the registries it serves.

Generated, never written by hand: every body and query string is stated by the field spec its
handler reads with (manager/spec.py, host_registry/bodies.py, task_registry/bodies.py), every
answer by the spec of its shape (manager/answers.py, web/forms.py), so a bound or a pattern has
one source. Named specs become ``components`` referred to with ``$ref``. The document says
what the server does (tests/integration/test_fuzz_api.py holds them to it with schemathesis):
every status an operation can answer, with the Error schema for each error; 401 and 403 on
every operation but /healthz; 400 and 413 on every method that may carry a body (the shared
edge reads and bounds any body, web/edge.py).

Adding an endpoint's schema is one entry in OPERATIONS (DESIGN 10).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from domain.fields import NO_QUERY, Components, Fields, Items, Named, Query, Spec, Text
from domain.model import ID, TASK_ID
from host_registry.bodies import HOST_LIST, HOST_REGISTRATION, HOST_UTILIZATION, PLACEMENT
from manager import answers as a
from manager.spec import (
    DEPLOYMENT_LIST,
    EVENT_LIST,
    HISTORY_LIST,
    REQUEST_LIST,
    deployment_body,
    request_body,
)
from task_registry.bodies import TASK_END, TASK_RESOURCES, TASK_UTILIZATION
from web.forms import HOST_FORM, TASK_FORM, WATCHER_FORM

ERROR = Named("Error", Fields({"error": Text(), "field": Text(), "message": Text()},
                              ("error", "message"), closed=False))
ERRORS = {
    "400": "invalid input: the field is named ('body' for the body as a whole)",
    "401": "missing or wrong bearer token",
    "403": "a valid credential for something it may not do: a node's credential anywhere but "
           "its own host's measurements and the reads it needs, the operator's token on the "
           "measurements only nodes report (DESIGN 9)",
    "404": "no such request, deployment, host or task",
    "405": "no such method here: 'utilization' is no task id (see /registry/tasks/utilization), "
           "and an id with '#' or '?' ends the path early, naming another resource",
    "409": "conflicts with the current state",
    "413": "the body is larger than MAX_BODY_BYTES (JSON); one over four times that is refused "
           "by the HTTP server itself, before the application reads it (text/plain)",
    "503": "Redis, the Docker engine, an agent or a peer cluster cannot be reached; or (POST "
           "/requests) the request is not admitted (DESIGN 3.13): a Retry-After header, and "
           "'admission' in the body (class, resource, demand against the room)",
}
BODY_METHODS = ("post", "put", "delete")  # the edge reads a body sent with any of these
# The spec of each path parameter, by its name in the path.
PATH_PARAMETERS: dict[str, Spec] = {"request_id": ID, "name": ID, "host_id": ID,
                                    "task_id": TASK_ID}


@dataclass(frozen=True)
class Bounds:
    """What the manager takes now (the largest host's, or a peer's when a request may go to
    one): the bounds of cpu_shares and memory in request bodies; None while no host is known."""

    request_cpu_shares: int | None = None
    request_memory: int | None = None
    deployment_cpu_shares: int | None = None
    deployment_memory: int | None = None


def _request(bounds: Bounds) -> Spec:
    return Named("NewRequest", request_body(bounds.request_cpu_shares, bounds.request_memory))


def _deployment(bounds: Bounds) -> Spec:
    return Named("NewDeployment",
                 deployment_body(bounds.deployment_cpu_shares, bounds.deployment_memory))


@dataclass(frozen=True)
class Operation:
    """One method of one path: what it answers (``ok`` and ``also_ok`` with ``answer``, then
    each of ``errors``), and what it reads (``body``, or a function of the bounds for a body
    bounded by the hosts; ``query``). Path parameters come from PATH_PARAMETERS."""

    method: str
    path: str
    summary: str
    answer: Spec | None = None
    ok: str = "200"
    also_ok: tuple[str, ...] = ()
    errors: tuple[str, ...] = ()
    body: Spec | Callable[[Bounds], Spec] | None = None
    query: Query = NO_QUERY
    public: bool = False


def _answer(*required: str) -> Spec:
    return Fields({name: Text() for name in required}, required, closed=False)


U = ("503",)
OPERATIONS: tuple[Operation, ...] = (
    Operation("post", "/requests", "submit a request (201 with the request and its decision)",
              a.SUBMITTED, ok="201", errors=("409", *U), body=_request),
    Operation("get", "/requests", "list requests (without their spec and history)",
              Items(a.REQUEST_SUMMARY), errors=("400", *U), query=REQUEST_LIST),
    Operation("get", "/requests/{request_id}", "a request: status, host, resources, history "
              "(an offloaded one as its peer has it: 503 naming the peer when it does not "
              "answer)", a.REQUEST, errors=("400", "404", *U)),
    Operation("delete", "/requests/{request_id}", "stop a request and free its resources (an "
              "offloaded one at its peer: 503 naming the peer when it does not answer); a "
              "record that cannot be read is removed, the answer saying why in `removed`",
              a.REQUEST, errors=("404", *U)),
    Operation("post", "/deployments", "several requests with link constraints, placed all or "
              "nothing across this cluster and its peers (DESIGN 12): 201 with where each "
              "runs; 409 naming the request and the constraint or creation that failed, with "
              "nothing of it left running", a.DEPLOYMENT, ok="201", errors=("409", *U),
              body=_deployment),
    Operation("get", "/deployments", "list deployments", a.DEPLOYMENTS, errors=("400", *U),
              query=DEPLOYMENT_LIST),
    Operation("get", "/deployments/{name}", "a deployment: each request's cluster, status and "
              "host", a.DEPLOYMENT, errors=("400", "404", *U)),
    Operation("delete", "/deployments/{name}", "stop every request of a deployment, here and "
              "at the peers (503 naming those whose peer does not answer), then forget it: "
              "the answer is its last state, its requests keep their records (one that "
              "cannot be read is removed, named with its `error`); a deployment record that "
              "cannot be read is removed, the answer saying why in `removed`",
              a.DEPLOYMENT, errors=("404", *U)),
    Operation("get", "/federation/advert", "this cluster's advert to its peers now (DESIGN "
              "12): capacity, allocation, room per class, power table; 503 while no host is "
              "known", a.ADVERT, errors=("400", *U)),
    Operation("get", "/federation/peers", "this cluster's peers: up, down (with the error) or "
              "not asked yet, and their adverts' summary (never their tokens)", a.PEERS,
              errors=("400", *U)),
    Operation("get", "/hosts", "hosts with region, class, utilization, allocation, tasks",
              a.HOSTS, errors=U),
    Operation("get", "/healthz", "health of Redis and the Docker engine (503 when one does "
              "not answer: the checks say which), the reconciliation and the nodes down as "
              "counts; the failing records, the nodes down by name and the errors only with "
              "the token or a dashboard session", a.HEALTH, public=True),
    Operation("get", "/events", "every request's typed events as written, oldest first, "
              "after a cursor (each with a host also naming it, a host that left included)",
              a.EVENTS, errors=("400", *U), query=EVENT_LIST),
    Operation("get", "/slo", "per class, its requests by SLO state now (met, missed, meeting, "
              "missing) and the share that met or meet their objective", a.SLO_CLASSES,
              errors=("400", *U)),
    Operation("get", "/history", "the manager's samples of the cluster, oldest first, after a "
              "cursor (one every GREENSWARM_HISTORY_INTERVAL_S)", a.HISTORY,
              errors=("400", *U), query=HISTORY_LIST),
    Operation("get", "/metrics", "Prometheus exposition (DESIGN 11); takes "
              "GREENSWARM_METRICS_TOKEN too"),
    Operation("get", "/power", "each host's power, estimated and measured (RAPL), and the "
              "cluster's energy since the manager started", a.POWER, errors=("400", *U)),
    Operation("get", "/openapi.json", "this document", a.ANY_OBJECT),
    Operation("get", "/registry/hosts", "message 1: hosts, or one (region, class) list in "
              "order (class or order without region: that list in each region)",
              Items(HOST_FORM), errors=("400", *U), query=HOST_LIST),
    Operation("post", "/registry/hosts", "message 11: a monitor registers its host (201; 200 "
              "when it was known; 409 for an id that is no Ready node of the Swarm)",
              HOST_FORM, ok="201", also_ok=("200",), errors=("409", *U),
              body=HOST_REGISTRATION),
    Operation("get", "/registry/hosts/{host_id}", "one host", HOST_FORM,
              errors=("400", "404", *U)),
    Operation("delete", "/registry/hosts/{host_id}", "a host leaves; its tasks are "
              "rescheduled", _answer("removed"), ok="202", errors=("404", *U)),
    Operation("put", "/registry/hosts/{host_id}/utilization", "message 12: host utilization "
              "(cpu_util, memory_util or both), when it was measured and the load windows; "
              "measured_at alone is a heartbeat", HOST_FORM, errors=("404", "405", *U),
              body=HOST_UTILIZATION),
    Operation("get", "/registry/watcher", "the load watcher (Trimaran KEP): every host's "
              "utilization, its age and its 5/10/15-minute windows", WATCHER_FORM,
              errors=("400", *U)),
    Operation("get", "/registry/watcher/{host_id}", "one host's load watcher entry (404 before "
              "its first measurement)", WATCHER_FORM, errors=("400", "404", *U)),
    Operation("get", "/registry/hosts/{host_id}/tasks", "message 2: a host's tasks, class "
              "descending, utilization ascending", Items(TASK_FORM),
              errors=("400", "404", *U)),
    Operation("post", "/registry/placements", "messages 3-5: apply a placement decision",
              Fields({"placed": Text(), "killed": Items(Text())}, ("placed",), closed=False),
              ok="201", errors=("404", "409", *U), body=PLACEMENT),
    Operation("get", "/registry/tasks/{task_id}", "one task", TASK_FORM,
              errors=("400", "404", "405", *U)),
    Operation("delete", "/registry/tasks/{task_id}", "message 9: a task terminated (404: no "
              "such task is booked)", _answer("ended"), ok="202",
              errors=("404", "405", *U)),
    Operation("put", "/registry/tasks/{task_id}/resources", "message 6: the resources a cut "
              "task really has", TASK_FORM, errors=("404", "405", *U), body=TASK_RESOURCES),
    Operation("post", "/registry/tasks/{task_id}/kill", "messages 7-8: kill a task and "
              "reschedule it", _answer("killed"), ok="202", errors=("404", "405", *U)),
    Operation("post", "/registry/tasks/{task_id}/end", "message 10: an agent saw the task's "
              "container exit (ended: false when the report is stale or the task unknown)",
              Fields({"task": Text(), "ended": a.BOOL}, ("ended",), closed=False),
              errors=("404", "405", *U), body=TASK_END),
    Operation("put", "/registry/tasks/utilization", "message 13: a batch of task utilization "
              "updates", Fields({"updated": Items(Text()), "unknown": Items(Text())},
                                ("updated", "unknown"), closed=False),
              errors=U, body=TASK_UTILIZATION),
)


def _responses(operation: Operation, refs: Components) -> dict[str, Any]:
    """``ok`` (and ``also_ok``) with the answer, then each error the operation can answer:
    401 and 403 unless public, 400 and 413 on a method that may carry a body."""
    answer = {} if operation.answer is None else operation.answer.schema(refs)
    success = {"description": "success", "content": {"application/json": {"schema": answer}}}
    responses: dict[str, Any] = {code: success for code in (operation.ok, *operation.also_ok)}
    codes = set(operation.errors)
    if operation.method in BODY_METHODS:
        codes |= {"400", "413"}
    if not operation.public:
        codes |= {"401", "403"}
    error = ERROR.schema(refs)
    for code in sorted(codes):
        responses[code] = {"description": ERRORS[code],
                           "content": {"application/json": {"schema": error}}}
    if "413" in responses:  # past SERVER_BODY_FACTOR x the limit, the server itself refuses
        responses["413"]["content"]["text/plain"] = {"schema": {"type": "string"}}
    if not operation.public:
        responses["401"]["headers"] = {
            "WWW-Authenticate": {"required": True, "schema": {"type": "string", "enum": ["Bearer"]}}
        }
    return responses


def _operation(operation: Operation, bounds: Bounds, refs: Components) -> dict[str, Any]:
    found: dict[str, Any] = {
        "summary": operation.summary,
        "responses": _responses(operation, refs),
        "security": [] if operation.public else [{"bearer": []}],
    }
    body = operation.body
    if body is not None:
        spec = body if isinstance(body, Spec) else body(bounds)
        found["requestBody"] = {"required": True,
                                "content": {"application/json": {"schema": spec.schema(refs)}}}
    names = [part[1:-1] for part in operation.path.split("/") if part.startswith("{")]
    parameters = [{"name": name, "in": "path", "required": True,
                   "schema": PATH_PARAMETERS[name].schema(refs)} for name in names]
    parameters += operation.query.parameters()
    if parameters:
        found["parameters"] = parameters
    return found


def _special(paths: dict[str, Any]) -> None:
    """The answers that are not a JSON object of success: /healthz's 503 (its checks say
    which backend failed) and /metrics's text exposition; and POST /requests' 503 carries
    Retry-After when the request is not admitted (DESIGN 3.13: whole seconds)."""
    health = paths["/healthz"]["get"]["responses"]
    health["503"] = {"description": "Redis or the Docker engine does not answer (the checks "
                                    "say which)", "content": health["200"]["content"]}
    paths["/metrics"]["get"]["responses"]["200"] = {
        "description": "the text exposition format 0.0.4",
        "content": {"text/plain": {"schema": {"type": "string"}}}}
    submit = paths["/requests"]["post"]["responses"]
    submit["503"] = {**submit["503"], "headers": {
        "Retry-After": {"required": False, "schema": {"type": "string", "pattern": "^[0-9]+$"}}}}


def document(bounds: Bounds | None = None) -> dict[str, Any]:
    """The document, with request bodies bounded by ``bounds`` (none when not given)."""
    bounds = bounds or Bounds()
    refs = Components()
    paths: dict[str, Any] = {}
    for operation in OPERATIONS:
        paths.setdefault(operation.path, {})[operation.method] = _operation(
            operation, bounds, refs)
    _special(paths)
    return {
        "openapi": "3.0.3",
        "info": {
            "title": "greenswarm manager",
            "version": "0.1.0",
            "description": "Energy-aware placement for Docker Swarm. Every call but GET /healthz "
            "needs 'Authorization: Bearer <token>': the operator's token, or on the measurements "
            "of a host (registration, utilization, power, its tasks' utilization and ends) only "
            "that host's node credential (gsn1.<node id>.<mac>, derived from the node secret). "
            "A body larger than MAX_BODY_BYTES is 413; "
            "one nested deeper than MAX_JSON_DEPTH, or with a string longer than "
            "MAX_JSON_STRING_CHARS, is 400.",
        },
        "security": [{"bearer": []}],
        "components": {
            "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}},
            "schemas": dict(sorted(refs.schemas.items())),
        },
        "paths": paths,
    }
