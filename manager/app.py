"""The manager's Flask application factory and its WSGI server."""

from __future__ import annotations

import logging

from flask import Flask

import host_registry.api
import manager.api
import task_registry.api
from host_registry.events import Registry
from manager import dashboard
from manager.core import Manager, ManagerEvents
from manager.forward import LeaderForward
from manager.sessions import DashboardSessions
from web import edge as web

log = logging.getLogger(__name__)


def create_app(manager_: Manager) -> Flask:
    """One app: the manager's API plus the Host and Task Registry endpoints (DESIGN 2)."""
    app = Flask("greenswarm.manager", static_folder=None)  # no files served
    app.json.sort_keys = False  # type: ignore[attr-defined]
    web.install(app, manager_.settings.token, manager_.settings.body_limits,
                route_tokens={"/metrics": manager_.settings.metrics_token},
                public_rules=dashboard.PUBLIC_RULES, read_cookie=dashboard.session_ok,
                node_secret=manager_.settings.nodes_secret)
    app.extensions["greenswarm"] = Registry(manager_.store, ManagerEvents(manager_),
                                            manager_.records, manager_.power.readings)
    app.extensions["greenswarm.manager"] = manager_
    LeaderForward(manager_.leadership).install(app)  # a standby's writes go to the leader
    settings = manager_.settings
    app.extensions[dashboard.SESSIONS_KEY] = manager_.store.sibling(
        lambda connection, prefix: DashboardSessions(connection, prefix, settings.token,
                                                     settings.session_max_age_s))
    app.register_blueprint(manager.api.blueprint)
    app.register_blueprint(dashboard.blueprint)
    app.register_blueprint(host_registry.api.blueprint)
    app.register_blueprint(task_registry.api.blueprint)
    return app
