"""Task Registry endpoints (thesis 3.2.2, messages 2, 4, 6, 7, 9, 10, 13) as a Flask blueprint.

The blueprint reads and writes the ClusterStore found in ``app.extensions["greenswarm"]``;
events that need the scheduler (a task ended, a kill) go through
``host_registry.events.RegistryEvents``.
"""

from __future__ import annotations

from flask import Blueprint, Response, jsonify
from flask.blueprints import BlueprintSetupState
from werkzeug.routing import BaseConverter

from domain.errors import NotFoundError
from domain.lifecycle import EndStatus, TaskEnd
from domain.model import RESERVED_TASK_IDS, check_id
from host_registry.events import registry
from task_registry.bodies import TASK_END, TASK_RESOURCES, TASK_UTILIZATION
from web.access import Access, access, calling_node, require_own_host
from web.edge import json_body
from web.forms import task_json


class TaskIdConverter(BaseConverter):
    """A path segment that may be a task id: not a reserved word, so that the routes beside
    /registry/tasks/<task_id> (utilization) are not read as a task (a GET or DELETE there is a
    405 with Allow, and OPTIONS lists only that route's methods)."""

    regex = "(?!(?:" + "|".join(sorted(RESERVED_TASK_IDS)) + ")(?:/|$))[^/]+"


blueprint = Blueprint("task_registry", __name__, url_prefix="/registry")


@blueprint.record_once
def _add_converter(state: BlueprintSetupState) -> None:  # before the rules below are added
    state.app.url_map.converters["task_id"] = TaskIdConverter


@blueprint.get("/hosts/<host_id>/tasks")
def list_tasks(host_id: str) -> Response:
    """Message 2: the tasks of a host, class descending then utilization ascending."""
    return jsonify([task_json(t) for t in registry().store.tasks_on(check_id(host_id, "host"))])


@blueprint.get("/tasks/<task_id:task_id>")
@access(Access.NODES_READ)
def get_task(task_id: str) -> Response:
    task = registry().store.task(check_id(task_id, "task"))
    if task is None:
        raise NotFoundError(f"no task {task_id!r}")
    return jsonify(task_json(task))


@blueprint.put("/tasks/<task_id:task_id>/resources")
@access(Access.NODES_TOO)
def set_resources(task_id: str) -> Response:
    """Message 6: a cut reached the node; the body says what the container really has now
    (from a scheduler, or from the agent of the node the task is booked on)."""
    body = TASK_RESOURCES.read(json_body(), "")
    reg = registry()
    if calling_node() is not None:
        _require_own_task(check_id(task_id, "task"), missing_ok=False)
    task = reg.store.resize_task(check_id(task_id, "task"), body["cpu_shares"], body["memory"])
    reg.events.task_resized(task)
    return jsonify(task_json(task))


@blueprint.post("/tasks/<task_id:task_id>/kill")
def kill_task(task_id: str) -> tuple[Response, int]:
    """Message 7: stop a task to make room; the scheduler reschedules it."""
    registry().events.kill(check_id(task_id, "task"))
    return jsonify({"killed": task_id}), 202


@blueprint.post("/tasks/<task_id:task_id>/end")
@access(Access.NODES_ONLY)
def task_end(task_id: str) -> tuple[Response, int]:
    """Message 10: the node's agent saw the task's container exit. ``service_id`` names the
    placement the container belonged to, so a late report cannot end a newer placement; a task
    booked on another node is 403 (its container here is a stale one)."""
    _require_own_task(check_id(task_id, "task"), missing_ok=True)
    body = TASK_END.read(json_body(), "")
    ended = registry().events.task_ended(
        TaskEnd(check_id(task_id, "task"), EndStatus(body["status"]), body.get("exit_code"),
                body.get("service_id"), body.get("oom", False))
    )
    return jsonify({"task": task_id, "ended": ended}), 200


@blueprint.delete("/tasks/<task_id:task_id>")
def delete_task(task_id: str) -> tuple[Response, int]:
    """Message 9: the scheduler tells the registry a task terminated (404 when no such task
    is booked)."""
    if not registry().events.task_ended(TaskEnd(check_id(task_id, "task"), EndStatus.STOPPED)):
        raise NotFoundError(f"no task {task_id!r}")
    return jsonify({"ended": task_id}), 202


@blueprint.put("/tasks/utilization")
@access(Access.NODES_ONLY)
def task_utilization() -> Response:
    """Message 13: the monitor's batch of task utilization updates, for its own host's tasks;
    a task not booked there (unknown, or booked on another host) is listed as unknown and not
    written."""
    body = TASK_UTILIZATION.read(json_body(), "")
    host_id: str = body["host"]
    require_own_host(host_id)
    updates = [(task["id"], task["cpu_util"], task["memory_util"]) for task in body["tasks"]]
    store = registry().store
    updated, unknown = [], []
    for task_id, cpu, memory in updates:  # validated first: a bad item changes nothing
        task = store.task(task_id)
        if task is None or task.host != host_id:
            unknown.append(task_id)
        else:
            store.update_task_utilization(task_id, cpu, memory)
            updated.append(task_id)
    return jsonify({"updated": updated, "unknown": unknown})


def _require_own_task(task_id: str, *, missing_ok: bool) -> None:
    """403 unless the calling node (if a node calls) is the one ``task_id`` is booked on; a task
    that is not booked is 404, or let through with ``missing_ok`` (the handler says so)."""
    task = registry().store.task(task_id)
    if task is None:
        if not missing_ok:
            raise NotFoundError(f"no task {task_id!r}")
        return
    require_own_host(task.host)
