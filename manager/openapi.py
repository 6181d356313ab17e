"""The OpenAPI 3 document of the manager process: its API and the registries it serves.

It says what the server does (tests/integration/test_fuzz_api.py holds them to it with
schemathesis): every status an operation can answer, with the Error schema for each error;
401 on every operation but /healthz; 400 and 413 on every method that may carry a body (the
shared edge reads and bounds any body, web/edge.py); request bodies as strict as the
handlers (unknown fields refused, the same bounds and patterns), and the answers' shapes.
"""

from __future__ import annotations

from typing import Any

from domain.constraints import MAX_CONSTRAINT_CHARS, MAX_CONSTRAINTS
from domain.lifecycle import RequestStatus
from domain.model import RESERVED_TASK_IDS
from federation.deploy import MAX_LINKS, MAX_MEMBERS
from manager.deployments import DeploymentStatus
from manager.spec import MAX_COMMAND_ITEMS, MAX_ENV, MAX_ENV_VALUE_CHARS, MAX_PORTS, MAX_VOLUMES

ID = {"type": "string", "pattern": "^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$"}
TASK_ID = {"allOf": [ID, {"not": {"enum": sorted(RESERVED_TASK_IDS)}}]}
UTIL = {"type": "number", "minimum": 0, "maximum": 1}
INT = {"type": "integer"}
NUMBER = {"type": "number"}
STRING = {"type": "string"}
ERROR_REF = {"$ref": "#/components/schemas/Error"}
ERROR = {
    "type": "object",
    "properties": {
        "error": {"type": "string"},
        "field": {"type": "string"},
        "message": {"type": "string"},
    },
    "required": ["error", "message"],
}
ERRORS = {
    "400": "invalid input: the field is named ('body' for the body as a whole)",
    "401": "missing or wrong bearer token",
    "404": "no such request, host or task",
    "405": "no such method here: 'utilization' is no task id (see /registry/tasks/utilization), "
           "and an id with '#' or '?' ends the path early, naming another resource",
    "409": "conflicts with the current state",
    "413": "the body is larger than MAX_BODY_BYTES (JSON); one over four times that is refused "
           "by the HTTP server itself, before the application reads it (text/plain)",
    "503": "Redis, the Docker engine, an agent or a peer cluster cannot be reached; or (POST "
           "/requests) the request is not admitted (DESIGN 3.13): a Retry-After header, and "
           "'admission' in the body (class, resource, demand against the room)",
}
MEMORY_TEXT = r"^\s*(\d+(\.\d+)?)\s*([kmgtKMGT]?)([iI]?[bB])?\s*$"
_PLAIN = "[A-Za-z0-9_.:/@+-]+"
CONSTRAINT_PATTERN = (
    r"^ *(node\.(id|hostname|role|platform\.os|platform\.arch)|(node|engine)\.labels\."
    + _PLAIN + ") *(==|!=) *" + _PLAIN + " *$"
)
REQUEST_BODY = {
    "type": "object",
    "additionalProperties": False,
    "required": ["image", "cpu_shares", "memory", "type", "class"],
    "properties": {
        "image": {
            "type": "string",
            "pattern": "^[A-Za-z0-9][A-Za-z0-9._/:@-]{0,254}$",
            "example": "greenswarm/busybox:latest",
        },
        "command": {
            "oneOf": [
                {"type": "string"},
                {
                    "type": "array",
                    "maxItems": MAX_COMMAND_ITEMS,
                    "items": {"type": "string", "maxLength": 4096},
                },
            ]
        },
        "env": {
            "type": "object",
            "maxProperties": MAX_ENV,
            "description": "names match ^[A-Za-z_][A-Za-z0-9_]{0,127}$",
            "additionalProperties": {
                "oneOf": [{"type": "string", "maxLength": MAX_ENV_VALUE_CHARS}, NUMBER]
            },
        },
        "ports": {
            "type": "array",
            "maxItems": MAX_PORTS,
            "items": {
                "oneOf": [
                    {
                        "type": "string",
                        "pattern": "^[0-9]+:[0-9]+(/(tcp|udp))?$",
                        "example": "8080:80/tcp",
                    },
                    {
                        "type": "object",
                        "additionalProperties": False,
                        "required": ["published", "target"],
                        "properties": {
                            "published": {"type": "integer", "minimum": 1, "maximum": 65535},
                            "target": {"type": "integer", "minimum": 1, "maximum": 65535},
                            "protocol": {"enum": ["tcp", "udp"]},
                        },
                    },
                ]
            },
        },
        "volumes": {
            "type": "array",
            "maxItems": MAX_VOLUMES,
            "items": {"type": "string", "pattern": "^/", "maxLength": 1024},
            "description": "container paths; not '/', no '..', none twice",
        },
        "name": TASK_ID,
        "cpu_shares": {"type": "integer", "minimum": 2, "description": "1024 = one core"},
        "memory": {
            "oneOf": [
                {"type": "integer", "minimum": 4194304},
                {"type": "string", "pattern": MEMORY_TEXT, "example": "512m"},
            ]
        },
        "type": {"enum": ["job", "service"]},
        "class": {"type": "integer", "minimum": 1, "maximum": 4},
        "queue": {"type": "boolean", "description": "wait in the pending queue if nothing fits"},
        "checkpoint": {"type": "boolean", "description": "a job that saves its progress in "
                       "/checkpoint and resumes from it when restarted (DESIGN 3.14): a kill "
                       "loses only its run since its last checkpoint"},
        "checkpoint_interval_s": {"type": "number", "exclusiveMinimum": 0, "maximum": 86400,
                                  "description": "how often it checkpoints; required with "
                                  "checkpoint: true, refused without it"},
        "constraints": {
            "type": "array",
            "maxItems": MAX_CONSTRAINTS,
            "items": {"type": "string", "maxLength": MAX_CONSTRAINT_CHARS,
                      "pattern": CONSTRAINT_PATTERN},
            "description": "placement constraints as Swarm's: node.labels.disk==ssd, "
                           "node.hostname!=gs-node2, node.platform.arch==x86_64",
        },
        "forwarded_from": {**ID, "description": "set by a peer cluster that forwards the "
                           "request (DESIGN 12): it is placed here and never forwarded again"},
    },
}

_MEMBER_PROPERTIES = {k: v for k, v in REQUEST_BODY["properties"].items()  # type: ignore[attr-defined]
                      if k != "forwarded_from"}
DEPLOYMENT_BODY = {
    "type": "object",
    "additionalProperties": False,
    "required": ["name", "requests"],
    "properties": {
        "name": ID,
        "requests": {
            "type": "array",
            "minItems": 1,
            "maxItems": MAX_MEMBERS,
            "description": "POST /requests bodies, each with a name unique in the deployment; "
            "its id is '<deployment>-<name>' (at most 128 characters)",
            "items": {
                **REQUEST_BODY,
                "required": [*REQUEST_BODY["required"], "name"],  # type: ignore[misc]
                "properties": {**_MEMBER_PROPERTIES, "name": ID, "queue": {
                    "enum": [False], "description": "a deployment's requests never queue"}},
            },
        },
        "links": {
            "type": "array",
            "maxItems": MAX_LINKS,
            "items": {
                "type": "object",
                "additionalProperties": False,
                "required": ["a", "b"],
                "properties": {
                    "a": {**ID, "description": "a request's name in the deployment"},
                    "b": {**ID, "description": "another request's name"},
                    "max_latency_ms": {"type": "number", "minimum": 0},
                    "min_bandwidth_mbit": {"type": "number", "minimum": 0,
                                           "exclusiveMinimum": True},
                },
            },
        },
    },
}


def _object(
    properties: dict[str, Any], required: list[str] | None = None, *, closed: bool = False
) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": "object", "properties": properties}
    if required:
        schema["required"] = required
    if closed:
        schema["additionalProperties"] = False
    return schema


def _nullable(schema: dict[str, Any]) -> dict[str, Any]:
    if "enum" in schema:  # an enum admits null only when it lists it
        return {**schema, "enum": [*schema["enum"], None], "nullable": True}
    return {**schema, "nullable": True}


def _list(items: dict[str, Any]) -> dict[str, Any]:
    return {"type": "array", "items": items}


LOAD_WINDOW = _object(
    {
        "cpu_mean": UTIL,
        "cpu_std": UTIL,
        "memory_mean": UTIL,
        "memory_std": UTIL,
        "samples": {"type": "integer", "minimum": 1},
    },
    ["cpu_mean", "cpu_std", "memory_mean", "memory_std"],
    closed=True,
)
LOAD_WINDOWS = _object({"5m": LOAD_WINDOW, "10m": LOAD_WINDOW, "15m": LOAD_WINDOW}, [],
                       closed=True)
MEASURED_AT = {"type": "number", "minimum": 0}
HOST = _object(
    {
        "id": STRING,
        "address": STRING,
        "cpu_capacity": INT,
        "memory_capacity": INT,
        "cpu_util": NUMBER,
        "memory_util": NUMBER,
        "util": NUMBER,
        "region": {"enum": ["LEE", "DEE", "EED"]},
        "class": _nullable(INT),
        "cpu_allocated": INT,
        "memory_allocated": INT,
        "overbooking_factor": NUMBER,
        "task_count": INT,
        "util_at": _nullable(NUMBER),
        "windows": LOAD_WINDOWS,
    },
    ["id", "cpu_capacity", "memory_capacity", "region", "class", "task_count"],
)
WATCHER = _object(
    {
        "timestamp": INT,
        "source": STRING,
        "data": {
            "type": "object",
            "additionalProperties": _object(
                {
                    "cpu_util": NUMBER,
                    "memory_util": NUMBER,
                    "measured_at": _nullable(NUMBER),
                    "age_s": _nullable(NUMBER),
                    "windows": LOAD_WINDOWS,
                },
                ["cpu_util", "memory_util", "measured_at", "age_s", "windows"],
            ),
        },
    },
    ["timestamp", "source", "data"],
)
TASK = _object(
    {
        "id": STRING,
        "host": STRING,
        "class": INT,
        "type": {"enum": ["job", "service"]},
        "cpu_shares": INT,
        "memory": INT,
        "original_cpu_shares": INT,
        "original_memory": INT,
        "cut_received": NUMBER,
        "cut_received_exact": STRING,
        "cpu_util": NUMBER,
        "memory_util": NUMBER,
        "started_at": NUMBER,
    },
    ["id", "host", "class", "type", "cpu_shares", "memory"],
)
RESOURCES = _object({"cpu_shares": _nullable(INT), "memory": _nullable(INT)})
HOST_POWER_PROPERTIES = {
    "estimated_w": NUMBER,
    "measured_w": _nullable(NUMBER),
    "measured_at": _nullable(NUMBER),
}
HOST_POWER = _object(HOST_POWER_PROPERTIES, ["estimated_w", "measured_w", "measured_at"])
POWER = _object(
    {
        "hosts": {
            "type": "object",
            "additionalProperties": _object(
                {"name": STRING, **HOST_POWER_PROPERTIES},
                ["name", "estimated_w", "measured_w", "measured_at"],
            ),
        },
        "cluster": _object(
            {
                "estimated_w": NUMBER,
                "measured_w": _nullable(NUMBER),
                "measured_hosts": INT,
                "estimated_kwh": NUMBER,
                "measured_kwh": NUMBER,
                "since": NUMBER,
            },
            ["estimated_w", "measured_w", "estimated_kwh", "measured_kwh", "since"],
        ),
    },
    ["hosts", "cluster"],
)
SERVICE_LEVEL = _object(
    {
        "availability": NUMBER,
        "slo": NUMBER,
        "met_slo": {"type": "boolean"},
        "q_s": NUMBER,
        "executed_s": NUMBER,
        "pending_s": NUMBER,
        "overhead": NUMBER,
        "preemptions": INT,
        "work_lost_s": NUMBER,
    },
    ["availability", "slo", "met_slo", "q_s", "executed_s", "pending_s", "preemptions"],
)
REQUEST_SUMMARY_PROPERTIES = {
    "id": STRING,
    "status": {"enum": [s.value for s in RequestStatus]},
    "host": _nullable(STRING),
    "service_id": _nullable(STRING),
    "image": STRING,
    "class": INT,
    "type": {"enum": ["job", "service"]},
    "original": RESOURCES,
    "current": RESOURCES,
    "cut_received": {"type": "string", "description": "an exact fraction, e.g. '1/3'"},
    "kills": INT,
    "created_at": NUMBER,
    "updated_at": NUMBER,
    # DESIGN 3.10, at the moment of the answer: availability, the class's SLO, Q (s), ...
    "service": _nullable(SERVICE_LEVEL),
    # DESIGN 12: the peer cluster it was offloaded to, the cluster that forwarded it here
    "cluster": _nullable(STRING),
    "forwarded_from": _nullable(STRING),
    # its host as `docker node ls` names it (an offloaded request's: as its peer names it)
    "host_name": _nullable(STRING),
}
REQUEST_SUMMARY = _object(REQUEST_SUMMARY_PROPERTIES, ["id", "status", "host", "kills"])
REQUEST = _object(
    {
        **REQUEST_SUMMARY_PROPERTIES,
        "spec": {"type": "object"},
        "history": _list({"type": "object"}),
    },
    ["id", "status", "host", "kills", "spec", "history"],
)
DECISION = _object(
    {
        "placed": {"type": "boolean"},
        "host": _nullable(STRING),
        "pass": _nullable({"enum": ["simple", "cut", "kill"]}),
        "request": _object({"cpu_shares": INT, "memory": INT, "cut_received": NUMBER}),
        "cuts": _list(
            _object({"task": STRING, "cpu_shares": INT, "memory": INT, "cut_received": NUMBER})
        ),
        "kills": _list(STRING),
        "suspends": {**_list(STRING), "description": "victims paused on the host instead of "
                     "killed (DESIGN 3.14): they keep their memory and resume there"},
        "reason": STRING,
        "decision_ms": NUMBER,
        "cluster": {**STRING, "description": "the peer cluster that placed it (offloaded)"},
    },
    ["placed", "host", "pass", "cuts", "kills"],
)
COUNT = {"type": "integer", "minimum": 0}
DEPLOYMENT_SUMMARY_PROPERTIES: dict[str, Any] = {
    "name": STRING,
    "status": {"enum": [s.value for s in DeploymentStatus]},
    "created_at": NUMBER,
}
DEPLOYMENT = _object(
    {
        **DEPLOYMENT_SUMMARY_PROPERTIES,
        "requests": _list(_object({
            "name": STRING, "id": STRING,
            "cluster": {**_nullable(STRING), "description": "where it was created"},
            "status": _nullable(STRING), "host": _nullable(STRING),
            "error": {**STRING, "description": "its peer did not answer"},
        }, ["name", "id", "cluster", "status", "host"])),
        "links": _list({"type": "object"}),
        "cost": _nullable(NUMBER),
        "reason": {**_nullable(STRING), "description": "why it was undone"},
    },
    ["name", "status", "created_at", "requests", "links"],
)
ROOM = {"type": "array", "items": COUNT, "minItems": 2, "maxItems": 2,
        "description": "[cpu_shares, memory bytes]"}
ADVERT = _object(
    {
        "cluster": STRING,
        "hosts": COUNT,
        "cpu_capacity": COUNT,
        "memory_capacity": COUNT,
        "cpu_allocated": COUNT,
        "memory_allocated": COUNT,
        "cpu_util": NUMBER,
        "memory_util": NUMBER,
        "hosts_by_region": {"type": "object", "additionalProperties": COUNT},
        "hosts_by_class": {"type": "object", "additionalProperties": COUNT},
        "empty_hosts": COUNT,
        "rooms": {**_list(_list(ROOM)), "minItems": 4, "maxItems": 4,
                  "description": "per request class 1-4, the Pareto front of the busy hosts' "
                                 "rooms"},
        "empty_rooms": _list(ROOM),
        "busy_cpu_load": NUMBER,
        "busy_host_cpu": COUNT,
        "power_table": STRING,
        "memory_w_per_gib": NUMBER,
        "wake_counts_idle": {"type": "boolean"},
    },
    ["cluster", "hosts", "cpu_capacity", "memory_capacity", "cpu_allocated",
     "memory_allocated", "cpu_util", "memory_util", "hosts_by_region", "hosts_by_class",
     "empty_hosts", "rooms", "empty_rooms", "busy_cpu_load", "busy_host_cpu", "power_table",
     "memory_w_per_gib", "wake_counts_idle"],
    closed=True,
)
PEER = _object(
    {
        "name": STRING,
        "url": STRING,
        "latency_ms": NUMBER,
        "bandwidth_mbit": NUMBER,
        "state": {"enum": ["unknown", "up", "down"]},
        "refreshed_at": _nullable(NUMBER),
        "checked_at": _nullable(NUMBER),
        "error": _nullable(STRING),
        "advert": _nullable(_object({
            "hosts": COUNT, "empty_hosts": COUNT, "cpu_capacity": COUNT, "cpu_allocated": COUNT,
            "memory_capacity": COUNT, "memory_allocated": COUNT, "cpu_util": NUMBER,
            "busy_cpu_load": NUMBER, "power_table": STRING,
        })),
    },
    ["name", "url", "latency_ms", "bandwidth_mbit", "state", "refreshed_at", "checked_at",
     "error", "advert"],
    closed=True,
)
PEERS = _object(
    {"cluster": STRING, "offload": {"enum": ["off", "unplaced", "kills"]},
     "peers": _list(PEER)},
    ["cluster", "offload", "peers"],
    closed=True,
)
HEALTH = _object(
    {
        "status": {"enum": ["ok", "degraded"]},
        "policy": STRING,
        "redis": {"type": "boolean"},
        "docker": {"type": "boolean"},
        "hosts": INT,
        "pending": INT,
        "redis_error": STRING,
        "docker_error": STRING,
    },
    ["status", "redis", "docker"],
)
CUT_RECEIVED = {
    "oneOf": [
        {"type": "string", "description": "an exact fraction in [0, 1), e.g. '1/6'"},
        {"type": "integer", "enum": [0]},
    ]
}
PLACEMENT = _object(
    {
        "request": _object(
            {
                "id": TASK_ID,
                "class": {"type": "integer", "minimum": 1, "maximum": 4},
                "type": {"enum": ["job", "service"]},
                "cpu_shares": {"type": "integer", "minimum": 2},
                "memory": {"type": "integer", "minimum": 1},
            },
            ["id", "class", "type", "cpu_shares", "memory"],
            closed=True,
        ),
        "host": ID,
        "cpu_shares": {"type": "integer", "minimum": 2},
        "memory": {"type": "integer", "minimum": 1},
        "cut_received": CUT_RECEIVED,
        "cuts": _list(
            _object(
                {
                    "task": ID,
                    "cpu_shares": {"type": "integer", "minimum": 2},
                    "memory": {"type": "integer", "minimum": 1},
                    "cut_received": CUT_RECEIVED,
                },
                ["task", "cpu_shares", "memory", "cut_received"],
                closed=True,
            )
        ),
        "kills": _list(ID),
    },
    ["request", "host"],
    closed=True,
)
BODY_METHODS = ("post", "put", "delete")  # the edge reads a body sent with any of these


def _op(
    method: str,
    summary: str,
    *,
    ok: str = "200",
    also_ok: tuple[str, ...] = (),
    answer: dict[str, Any] | None = None,
    errors: tuple[str, ...] = (),
    body: dict[str, Any] | None = None,
    params: list[dict[str, Any]] | None = None,
    public: bool = False,
) -> dict[str, Any]:
    """One operation: ``ok`` (and ``also_ok``) with the ``answer`` schema, then each error it
    can answer."""
    success = {"description": "success", "content": {"application/json": {"schema": answer or {}}}}
    responses: dict[str, Any] = {code: success for code in (ok, *also_ok)}
    codes = set(errors)
    if method in BODY_METHODS:
        codes |= {"400", "413"}
    if not public:
        codes.add("401")
    for code in sorted(codes):
        responses[code] = {
            "description": ERRORS[code],
            "content": {"application/json": {"schema": ERROR_REF}},
        }
    if "413" in responses:  # past SERVER_BODY_FACTOR x the limit, the server itself refuses
        responses["413"]["content"]["text/plain"] = {"schema": {"type": "string"}}
    if not public:
        responses["401"]["headers"] = {
            "WWW-Authenticate": {"required": True, "schema": {"type": "string", "enum": ["Bearer"]}}
        }
    operation: dict[str, Any] = {
        "summary": summary,
        "responses": responses,
        "security": [] if public else [{"bearer": []}],
    }
    if body is not None:
        operation["requestBody"] = {
            "required": True,
            "content": {"application/json": {"schema": body}},
        }
    if params:
        operation["parameters"] = params
    return operation


def _path(name: str, schema: dict[str, Any] = ID) -> dict[str, Any]:
    return {"name": name, "in": "path", "required": True, "schema": schema}


def _query(name: str, schema: dict[str, Any]) -> dict[str, Any]:
    return {"name": name, "in": "query", "required": False, "schema": schema}


def document() -> dict[str, Any]:
    host_id, request_id = _path("host_id"), _path("request_id")
    task_id = _path("task_id", TASK_ID)
    utilization = {
        "type": "object",
        "additionalProperties": False,
        "anyOf": [
            {"required": ["cpu_util"]},
            {"required": ["memory_util"]},
            {"required": ["measured_at"]},
        ],
        "properties": {
            "cpu_util": UTIL,
            "memory_util": UTIL,
            "power_w": {"type": "number", "minimum": 0},
            "measured_at": MEASURED_AT,
            "windows": LOAD_WINDOWS,
        },
    }
    health = dict(_op("get", "health of Redis and the Docker engine", answer=HEALTH, public=True))
    health["responses"]["503"] = {
        "description": "Redis or the Docker engine does not answer (the checks say which)",
        "content": {"application/json": {"schema": HEALTH}},
    }
    metrics = _op("get", "Prometheus exposition (DESIGN 11); takes GREENSWARM_METRICS_TOKEN too")
    metrics["responses"]["200"] = {
        "description": "the text exposition format 0.0.4",
        "content": {"text/plain": {"schema": {"type": "string"}}},
    }
    unavailable = ("503",)
    return {
        "openapi": "3.0.3",
        "info": {
            "title": "greenswarm manager",
            "version": "0.1.0",
            "description": "Energy-aware placement for Docker Swarm. Every call but GET /healthz "
            "needs 'Authorization: Bearer <token>'. A body larger than MAX_BODY_BYTES is 413; "
            "one nested deeper than MAX_JSON_DEPTH, or with a string longer than "
            "MAX_JSON_STRING_CHARS, is 400.",
        },
        "security": [{"bearer": []}],
        "components": {
            "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}},
            "schemas": {"Error": ERROR},
        },
        "paths": {
            "/requests": {
                "post": _op(
                    "post",
                    "submit a request (201 with the request and its decision)",
                    ok="201",
                    answer=_object(
                        {"request": REQUEST, "decision": _nullable(DECISION)},
                        ["request", "decision"],
                    ),
                    errors=("409", "503"),
                    body=REQUEST_BODY,
                ),
                "get": _op(
                    "get",
                    "list requests (without their spec and history)",
                    answer=_list(REQUEST_SUMMARY),
                    errors=("400", "503"),
                    params=[
                        _query("status", {"enum": [s.value for s in RequestStatus]}),
                        _query("limit", {"type": "integer", "minimum": 1, "maximum": 10000}),
                    ],
                ),
            },
            "/requests/{request_id}": {
                "get": _op(
                    "get",
                    "a request: status, host, resources, history (an offloaded one as its peer "
                    "has it: 503 naming the peer when it does not answer)",
                    answer=REQUEST,
                    errors=("400", "404", "503"),
                    params=[request_id],
                ),
                "delete": _op(
                    "delete",
                    "stop a request and free its resources (an offloaded one at its peer: "
                    "503 naming the peer when it does not answer)",
                    answer=REQUEST,
                    errors=("404", "503"),
                    params=[request_id],
                ),
            },
            "/deployments": {
                "post": _op(
                    "post",
                    "several requests with link constraints, placed all or nothing across "
                    "this cluster and its peers (DESIGN 12): 201 with where each runs; 409 "
                    "naming the request and the constraint or creation that failed, with "
                    "nothing of it left running",
                    ok="201", answer=DEPLOYMENT, errors=("409", "503"), body=DEPLOYMENT_BODY,
                ),
                "get": _op(
                    "get", "list deployments",
                    answer=_list(_object({**DEPLOYMENT_SUMMARY_PROPERTIES, "requests": COUNT},
                                         ["name", "status", "created_at", "requests"])),
                    errors=("400", "503"),
                    params=[_query("limit", {"type": "integer", "minimum": 1,
                                             "maximum": 10000})],
                ),
            },
            "/deployments/{name}": {
                "get": _op("get", "a deployment: each request's cluster, status and host",
                           answer=DEPLOYMENT, errors=("400", "404", "503"),
                           params=[_path("name")]),
                "delete": _op("delete", "stop every request of a deployment, here and at the "
                              "peers (503 naming those whose peer does not answer)",
                              answer=DEPLOYMENT, errors=("404", "503"), params=[_path("name")]),
            },
            "/federation/advert": {"get": _op(
                "get", "this cluster's advert to its peers now (DESIGN 12): capacity, "
                "allocation, room per class, power table; 503 while no host is known",
                answer=ADVERT, errors=("400", "503"))},
            "/federation/peers": {"get": _op(
                "get", "this cluster's peers: up, down (with the error) or not asked yet, "
                "and their adverts' summary (never their tokens)",
                answer=PEERS, errors=("400", "503"))},
            "/hosts": {
                "get": _op(
                    "get",
                    "hosts with region, class, utilization, allocation, tasks",
                    answer=_list({"allOf": [HOST, _object(
                        {"name": {**STRING, "description": "the node's hostname"},
                         "power": HOST_POWER, "tasks": _list(TASK)},
                        ["name", "power", "tasks"])]}),
                    errors=unavailable,
                )
            },
            "/healthz": {"get": health},
            "/events": {"get": _op(
                "get", "every request's typed events as written, oldest first, after a cursor",
                answer=_object({"events": _list(_object({"id": STRING, "request": STRING,
                                                         "kind": STRING, "t": NUMBER},
                                                        ["id", "request", "kind"])),
                                "next": STRING}, ["events", "next"]),
                errors=("400", "503"),
                params=[_query("since", {"type": "string",
                                         "pattern": "^(0|\\$|[0-9]{1,20}-[0-9]{1,20})$"}),
                        _query("limit", {"type": "integer", "minimum": 1, "maximum": 1000})],
            )},
            "/metrics": {"get": metrics},
            "/power": {"get": _op("get", "each host's power, estimated and measured (RAPL), "
                                  "and the cluster's energy since the manager started",
                                  answer=POWER, errors=("400", "503"))},
            "/openapi.json": {"get": _op("get", "this document", answer={"type": "object"})},
            "/registry/hosts": {
                "get": _op(
                    "get",
                    "message 1: hosts, or one (region, class) list in order (class and order "
                    "need region)",
                    answer=_list(HOST),
                    errors=("400", "503"),
                    params=[
                        _query("region", {"enum": ["LEE", "DEE", "EED"]}),
                        _query("class", {"enum": ["1", "2", "3", "4", "empty"]}),
                        _query("order", {"enum": ["asc", "desc"]}),
                    ],
                ),
                "post": _op(
                    "post",
                    "message 11: a monitor registers its host (201; 200 when it was known; 409 "
                    "for an id that is no Ready node of the Swarm)",
                    ok="201",
                    also_ok=("200",),
                    answer=HOST,
                    errors=("409", *unavailable),
                    body=_object(
                        {
                            "id": ID,
                            "address": {"type": "string", "maxLength": 255},
                            "cpu_capacity": {"type": "integer", "minimum": 2},
                            "memory_capacity": {"type": "integer", "minimum": 1},
                            "cpu_util": UTIL,
                            "memory_util": UTIL,
                            "measured_at": MEASURED_AT,
                        },
                        ["id", "cpu_capacity", "memory_capacity"],
                        closed=True,
                    ),
                ),
            },
            "/registry/hosts/{host_id}": {
                "get": _op(
                    "get",
                    "one host",
                    answer=HOST,
                    errors=("400", "404", "503"),
                    params=[host_id],
                ),
                "delete": _op(
                    "delete",
                    "a host leaves; its tasks are rescheduled",
                    ok="202",
                    answer=_object({"removed": STRING}, ["removed"]),
                    errors=("404", "503"),
                    params=[host_id],
                ),
            },
            "/registry/hosts/{host_id}/utilization": {
                "put": _op(
                    "put",
                    "message 12: host utilization (cpu_util, memory_util or both), when it "
                    "was measured and the load windows; measured_at alone is a heartbeat",
                    answer=HOST,
                    errors=("404", "405", "503"),
                    body=utilization,
                    params=[host_id],
                ),
            },
            "/registry/watcher": {
                "get": _op(
                    "get",
                    "the load watcher (Trimaran KEP): every host's utilization, its age and "
                    "its 5/10/15-minute windows",
                    answer=WATCHER,
                    errors=("400", "503"),
                ),
            },
            "/registry/watcher/{host_id}": {
                "get": _op(
                    "get",
                    "one host's load watcher entry (404 before its first measurement)",
                    answer=WATCHER,
                    errors=("400", "404", "503"),
                    params=[host_id],
                ),
            },
            "/registry/hosts/{host_id}/tasks": {
                "get": _op(
                    "get",
                    "message 2: a host's tasks, class descending, utilization ascending",
                    answer=_list(TASK),
                    errors=("400", "404", "503"),
                    params=[host_id],
                ),
            },
            "/registry/placements": {
                "post": _op(
                    "post",
                    "messages 3-5: apply a placement decision",
                    ok="201",
                    answer=_object({"placed": STRING, "killed": _list(STRING)}, ["placed"]),
                    errors=("404", "409", "503"),
                    body=PLACEMENT,
                ),
            },
            "/registry/tasks/{task_id}": {
                "get": _op(
                    "get",
                    "one task",
                    answer=TASK,
                    errors=("400", "404", "405", "503"),
                    params=[task_id],
                ),
                "delete": _op(
                    "delete",
                    "message 9: a task terminated (404: no such task is booked)",
                    ok="202",
                    answer=_object({"ended": STRING}, ["ended"]),
                    errors=("404", "405", "503"),
                    params=[task_id],
                ),
            },
            "/registry/tasks/{task_id}/resources": {
                "put": _op(
                    "put",
                    "message 6: the resources a cut task really has",
                    answer=TASK,
                    errors=("404", "405", "503"),
                    params=[task_id],
                    body=_object(
                        {
                            "cpu_shares": {"type": "integer", "minimum": 2},
                            "memory": {"type": "integer", "minimum": 1},
                        },
                        ["cpu_shares", "memory"],
                        closed=True,
                    ),
                ),
            },
            "/registry/tasks/{task_id}/kill": {
                "post": _op(
                    "post",
                    "messages 7-8: kill a task and reschedule it",
                    ok="202",
                    answer=_object({"killed": STRING}, ["killed"]),
                    errors=("404", "405", "503"),
                    params=[task_id],
                ),
            },
            "/registry/tasks/{task_id}/end": {
                "post": _op(
                    "post",
                    "message 10: an agent saw the task's container exit (ended: false when the "
                    "report is stale or the task unknown)",
                    answer=_object({"task": STRING, "ended": {"type": "boolean"}}, ["ended"]),
                    errors=("404", "405", "503"),
                    params=[task_id],
                    body=_object(
                        {
                            "status": {"enum": ["finished", "failed", "stopped", "killed"]},
                            "exit_code": _nullable(
                                {"type": "integer", "minimum": -(2**31), "maximum": 2**31}
                            ),
                            "service_id": _nullable({"type": "string", "maxLength": 128}),
                            "oom": {"type": "boolean"},
                        },
                        ["status"],
                        closed=True,
                    ),
                ),
            },
            "/registry/tasks/utilization": {
                "put": _op(
                    "put",
                    "message 13: a batch of task utilization updates",
                    answer=_object(
                        {"updated": _list(STRING), "unknown": _list(STRING)},
                        ["updated", "unknown"],
                    ),
                    errors=unavailable,
                    body=_object(
                        {
                            "host": ID,
                            "tasks": _list(
                                _object(
                                    {"id": ID, "cpu_util": UTIL, "memory_util": UTIL},
                                    ["id", "cpu_util", "memory_util"],
                                    closed=True,
                                )
                            ),
                        },
                        ["host", "tasks"],
                        closed=True,
                    ),
                ),
            },
        },
    }
