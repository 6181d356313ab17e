"""The OpenAPI 3 document of the manager process: its API and the registries it serves."""

from __future__ import annotations

from typing import Any

ID = {"type": "string", "pattern": "^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$"}
UTIL = {"type": "number", "minimum": 0, "maximum": 1}
ERROR = {
    "type": "object",
    "properties": {
        "error": {"type": "string"},
        "field": {"type": "string"},
        "message": {"type": "string"},
    },
    "required": ["error", "message"],
}
REQUEST_BODY = {
    "type": "object",
    "additionalProperties": False,
    "required": ["image", "cpu_shares", "memory", "type", "class"],
    "properties": {
        "image": {"type": "string", "example": "greenswarm/busybox:latest"},
        "command": {"oneOf": [{"type": "string"}, {"type": "array", "items": {"type": "string"}}]},
        "env": {"type": "object", "additionalProperties": {"type": "string"}},
        "ports": {
            "type": "array",
            "items": {
                "oneOf": [
                    {"type": "string", "example": "8080:80/tcp"},
                    {
                        "type": "object",
                        "properties": {
                            "published": {"type": "integer", "minimum": 1, "maximum": 65535},
                            "target": {"type": "integer", "minimum": 1, "maximum": 65535},
                            "protocol": {"enum": ["tcp", "udp"]},
                        },
                    },
                ]
            },
        },
        "volumes": {"type": "array", "items": {"type": "string", "pattern": "^/"}},
        "name": ID,
        "cpu_shares": {"type": "integer", "minimum": 2, "description": "1024 = one core"},
        "memory": {
            "oneOf": [
                {"type": "integer", "minimum": 4194304},
                {"type": "string", "example": "512m"},
            ]
        },
        "type": {"enum": ["job", "service"]},
        "class": {"type": "integer", "minimum": 1, "maximum": 4},
        "queue": {"type": "boolean", "description": "wait in the pending queue if nothing fits"},
    },
}


def _op(
    summary: str,
    *,
    body: dict[str, Any] | None = None,
    ok: str = "200",
    public: bool = False,
    params: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    responses: dict[str, Any] = {
        ok: {"description": "success", "content": {"application/json": {"schema": {}}}}
    }
    for code, text in (("400", "invalid input (the field is named)"), ("404", "not found")):
        responses[code] = {"description": text, "content": {"application/json": {"schema": ERROR}}}
    if not public:
        responses["401"] = {
            "description": "missing or wrong bearer token",
            "content": {"application/json": {"schema": ERROR}},
        }
    operation: dict[str, Any] = {"summary": summary, "responses": responses}
    if not public:
        operation["security"] = [{"bearer": []}]
    if body is not None:
        operation["requestBody"] = {
            "required": True,
            "content": {"application/json": {"schema": body}},
        }
    if params:
        operation["parameters"] = params
    return operation


def _path(name: str) -> dict[str, Any]:
    return {"name": name, "in": "path", "required": True, "schema": ID}


def _query(name: str, schema: dict[str, Any]) -> dict[str, Any]:
    return {"name": name, "in": "query", "required": False, "schema": schema}


def document() -> dict[str, Any]:
    host_id, task_id, request_id = _path("host_id"), _path("task_id"), _path("request_id")
    utilization = {
        "type": "object",
        "additionalProperties": False,
        "properties": {
            "cpu_util": UTIL,
            "memory_util": UTIL,
            "power_w": {"type": "number", "minimum": 0},
        },
    }
    return {
        "openapi": "3.0.3",
        "info": {
            "title": "greenswarm manager",
            "version": "0.1.0",
            "description": "Energy-aware placement for Docker Swarm. Every call but GET /healthz "
            "needs 'Authorization: Bearer <token>'.",
        },
        "components": {"securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}}},
        "paths": {
            "/requests": {
                "post": _op(
                    "submit a request (201 with the request and its decision)",
                    body=REQUEST_BODY,
                    ok="201",
                ),
                "get": _op(
                    "list requests",
                    params=[
                        _query(
                            "status",
                            {
                                "enum": [
                                    "pending",
                                    "running",
                                    "completed",
                                    "failed",
                                    "rejected",
                                    "killed-and-rescheduled",
                                    "stopped",
                                ]
                            },
                        ),
                        _query("limit", {"type": "integer", "minimum": 1, "maximum": 10000}),
                    ],
                ),
            },
            "/requests/{request_id}": {
                "get": _op("a request: status, host, resources, history", params=[request_id]),
                "delete": _op("stop a request and free its resources", params=[request_id]),
            },
            "/hosts": {"get": _op("hosts with region, class, utilization, allocation, tasks")},
            "/healthz": {"get": _op("health of Redis and the Docker engine", public=True)},
            "/openapi.json": {"get": _op("this document")},
            "/registry/hosts": {
                "get": _op(
                    "message 1: hosts, or one (region, class) list in order",
                    params=[
                        _query("region", {"enum": ["LEE", "DEE", "EED"]}),
                        _query("class", {"enum": ["1", "2", "3", "4", "empty"]}),
                        _query("order", {"enum": ["asc", "desc"]}),
                    ],
                ),
                "post": _op(
                    "message 11: a monitor registers its host",
                    ok="201",
                    body={
                        "type": "object",
                        "required": ["id", "cpu_capacity", "memory_capacity"],
                        "properties": {
                            "id": ID,
                            "address": {"type": "string"},
                            "cpu_capacity": {"type": "integer"},
                            "memory_capacity": {"type": "integer"},
                            "cpu_util": UTIL,
                            "memory_util": UTIL,
                        },
                    },
                ),
            },
            "/registry/hosts/{host_id}": {
                "get": _op("one host", params=[host_id]),
                "delete": _op(
                    "a host leaves; its tasks are rescheduled",
                    ok="202",
                    params=[host_id],
                ),
            },
            "/registry/hosts/{host_id}/utilization": {
                "put": _op(
                    "message 12: host utilization",
                    body=utilization,
                    params=[host_id],
                ),
            },
            "/registry/hosts/{host_id}/tasks": {
                "get": _op(
                    "message 2: a host's tasks, class descending, utilization ascending",
                    params=[host_id],
                ),
            },
            "/registry/placements": {
                "post": _op(
                    "messages 3-5: apply a placement decision",
                    ok="201",
                    body={"type": "object"},
                ),
            },
            "/registry/tasks/{task_id}": {
                "get": _op("one task", params=[task_id]),
                "delete": _op("message 9: a task terminated", params=[task_id]),
            },
            "/registry/tasks/{task_id}/resources": {
                "put": _op(
                    "message 6: the resources a cut task really has",
                    params=[task_id],
                    body={
                        "type": "object",
                        "required": ["cpu_shares", "memory"],
                        "properties": {
                            "cpu_shares": {"type": "integer"},
                            "memory": {"type": "integer"},
                        },
                    },
                ),
            },
            "/registry/tasks/{task_id}/kill": {
                "post": _op(
                    "messages 7-8: kill a task and reschedule it",
                    ok="202",
                    params=[task_id],
                ),
            },
            "/registry/tasks/{task_id}/end": {
                "post": _op(
                    "message 10: an agent saw the task's container exit",
                    params=[task_id],
                    body={
                        "type": "object",
                        "required": ["status"],
                        "properties": {
                            "status": {"enum": ["finished", "failed", "stopped", "killed"]},
                            "exit_code": {"type": "integer"},
                            "service_id": {"type": "string"},
                        },
                    },
                ),
            },
            "/registry/tasks/utilization": {
                "put": _op(
                    "message 13: a batch of task utilization updates",
                    body={
                        "type": "object",
                        "required": ["host", "tasks"],
                        "properties": {"host": ID, "tasks": {"type": "array"}},
                    },
                ),
            },
        },
    }
