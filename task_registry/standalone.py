"""The Host and Task Registry on their own (``greenswarm registry``), without a scheduler.

By default the manager serves these endpoints in its own process (the thesis keeps the Host
Registry next to the scheduler). Standalone, the events that would need a scheduler only change
the books: a scheduler elsewhere drives placements (``POST /registry/placements``) and
rescheduling itself. A placement must still name a request the manager recorded (DESIGN 9): the
standalone registry reads the records' status where the manager writes them, in the same Redis
(host_registry/requests.py).
"""

from __future__ import annotations

from flask import Flask, Response, jsonify

import host_registry.api
import task_registry.api
from domain.credentials import node_secret_from_token
from domain.errors import NotFoundError
from domain.lifecycle import TaskEnd
from domain.model import HostSpec, HostView, Task
from domain.store import ClusterStore
from host_registry.events import Registry
from host_registry.redis_store import RedisStore
from host_registry.requests import RedisRequestIndex, RequestIndex
from web import edge as web


class StandaloneEvents:
    def __init__(self, store: ClusterStore) -> None:
        self.store = store

    def admit_host(self, spec: HostSpec) -> None:
        return None  # no Swarm to check against: the remote scheduler's deployment decides

    def host_changed(self, host: HostView) -> None:
        return None  # nothing waits here: the remote scheduler retries its own queue

    def task_resized(self, task: Task) -> None:
        return None  # the books are all there is

    def host_removed(self, host_id: str) -> None:
        self.store.remove_host(host_id)

    def task_ended(self, end: TaskEnd) -> bool:
        try:
            self.store.end_task(end.task_id)
        except NotFoundError:
            return False
        return True

    def kill(self, task_id: str) -> None:
        self.store.end_task(task_id)  # the remote scheduler resubmits it (message 8)


def create_registry_app(
    store: ClusterStore, token: str, limits: web.BodyLimits | None = None,
    requests: RequestIndex | None = None, node_secret: str = "",
) -> Flask:
    """The registries' app on ``store``; ``requests`` defaults to the request records in the
    Redis store's own database and prefix (another store must say where they are);
    ``node_secret`` (DESIGN 9): the nodes' shared secret, by default derived from ``token`` as
    the manager does, so the same rules hold here: only a node's own credential writes its
    host's measurements."""
    if requests is None:
        if not isinstance(store, RedisStore):
            raise TypeError("a store other than Redis needs the request index it checks "
                            "placements against")
        requests = store.sibling(RedisRequestIndex)
    app = Flask("greenswarm.registry", static_folder=None)  # no files served
    app.json.sort_keys = False  # type: ignore[attr-defined]
    web.install(app, token, limits, node_secret=node_secret or node_secret_from_token(token))
    app.extensions["greenswarm"] = Registry(store, StandaloneEvents(store), requests)
    app.register_blueprint(host_registry.api.blueprint)
    app.register_blueprint(task_registry.api.blueprint)

    @app.get("/healthz")
    def health() -> Response:
        """Served without the token, for health checks: 503 when the store does not answer."""
        ping = getattr(store, "ping", None)  # the Redis store's; an in-memory one is always up
        if ping is not None:
            ping()
        return jsonify({"status": "ok"})

    return app
