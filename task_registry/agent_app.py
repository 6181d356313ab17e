"""The node agent's REST endpoints (the manager pushes cuts, pauses and resumes here)."""

from __future__ import annotations

from flask import Blueprint, Flask, Response, current_app, jsonify

from domain.credentials import manager_word
from domain.model import check_id
from task_registry.agent import Agent
from task_registry.bodies import AGENT_RESOURCES
from web import edge as web
from web.edge import json_body

blueprint = Blueprint("agent", __name__)


def agent() -> Agent:
    found: Agent = current_app.extensions["greenswarm.agent"]
    return found


@blueprint.get("/healthz")
def health() -> Response:
    return jsonify({"status": "ok", "node": agent().node_id})


@blueprint.get("/agent/tasks")
def list_tasks() -> Response:
    return jsonify(agent().describe())


@blueprint.put("/agent/tasks/<task_id>/resources")
def set_resources(task_id: str) -> Response:
    """Apply a cut, or a cut given back, live; answers what the container really got."""
    body = AGENT_RESOURCES.read(json_body(), "")
    cpu, memory = body["cpu_shares"], body["memory"]
    applied_cpu, applied_memory = agent().apply(check_id(task_id, "task"), cpu, memory)
    return jsonify(
        {
            "task": task_id,
            "cpu_shares": applied_cpu,
            "memory": applied_memory,
            "memory_unapplied": applied_memory - memory,
        }
    )


@blueprint.post("/agent/tasks/<task_id>/pause")
def pause(task_id: str) -> Response:
    """Suspend a task on this node (``docker pause``, DESIGN 3.14); 404 when no container of
    it runs here. Pausing one already paused changes nothing."""
    paused = agent().pause(check_id(task_id, "task"))
    return jsonify({"task": task_id, "paused": paused})


@blueprint.post("/agent/tasks/<task_id>/unpause")
def unpause(task_id: str) -> Response:
    """Resume a suspended task where it stopped (``docker unpause``)."""
    paused = agent().unpause(check_id(task_id, "task"))
    return jsonify({"task": task_id, "paused": paused})


@blueprint.post("/agent/cleanup")
def cleanup() -> Response:
    agent().converge()
    return jsonify({"status": "ok"})


def create_agent_app(agent_: Agent) -> Flask:
    """The agent's app: it takes only the manager's word for this node (DESIGN 9), derived
    from the node's credential, never the operator's token nor another node's credential."""
    app = Flask("greenswarm.agent", static_folder=None)  # no files served
    web.install(app, manager_word(agent_.credential), agent_.settings.body_limits)
    app.extensions["greenswarm.agent"] = agent_
    app.register_blueprint(blueprint)
    return app
