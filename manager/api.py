"""The manager's public REST API: requests, hosts, health, and the OpenAPI document."""

from __future__ import annotations

from flask import Blueprint, Response, current_app, jsonify, request

from domain.errors import DamagedRecordError
from domain.fields import NO_QUERY
from domain.lifecycle import RequestStatus
from domain.model import check_id
from manager.core import Manager
from manager.endings import Removed
from manager.metrics import CONTENT_TYPE as METRICS_CONTENT_TYPE
from manager.openapi import Bounds, document
from manager.spec import DEPLOYMENT_LIST, EVENT_LIST, HISTORY_LIST, REQUEST_LIST
from web.edge import caller_known, json_body
from web.forms import host_json, task_json

blueprint = Blueprint("manager", __name__)



def manager() -> Manager:
    found: Manager = current_app.extensions["greenswarm.manager"]
    return found


@blueprint.post("/requests")
def submit() -> tuple[Response, int]:
    manager_ = manager()
    submitted = manager_.submissions.submit(json_body())
    return jsonify({"request": manager_.views.record_json(submitted.record),
                    "decision": submitted.decision}), 201


@blueprint.get("/requests/<request_id>")
def get_request(request_id: str) -> Response:
    return jsonify(manager().views.request_json(check_id(request_id, "id"), remote=True))


@blueprint.get("/requests")
def list_requests() -> Response:
    args = REQUEST_LIST.read(request.args)
    status = RequestStatus(args["status"]) if "status" in args else None
    manager_ = manager()
    listed = []
    for request_id in manager_.records.ids(status, args.get("limit", 1000)):
        try:
            listed.append(manager_.views.request_json(request_id, history=False))
        except DamagedRecordError as exc:  # one bad record never hides the others (DESIGN 9)
            manager_.faults.fail("request", request_id, str(exc))
    return jsonify(listed)


@blueprint.delete("/requests/<request_id>")
def stop(request_id: str) -> Response:
    manager_ = manager()
    stopped = manager_.endings.stop_request(check_id(request_id, "id"))
    if isinstance(stopped, Removed):  # a failing record can be removed (DESIGN 9)
        return jsonify(manager_.views.removed_json(stopped))
    return jsonify(manager_.views.record_json(stopped))


@blueprint.post("/deployments")
def deploy() -> tuple[Response, int]:
    """Several requests with link constraints, placed all or nothing across this cluster and
    its peers (DESIGN 12): 201 with where each runs, 409 naming what failed."""
    return jsonify(manager().deployments.deploy(json_body())), 201


@blueprint.get("/deployments")
def list_deployments() -> Response:
    args = DEPLOYMENT_LIST.read(request.args)
    return jsonify(manager().deployments.deployments_json(args.get("limit", 1000)))


@blueprint.get("/deployments/<name>")
def get_deployment(name: str) -> Response:
    return jsonify(manager().deployments.deployment_json(check_id(name, "name")))


@blueprint.delete("/deployments/<name>")
def undeploy(name: str) -> Response:
    return jsonify(manager().deployments.undeploy(check_id(name, "name")))


@blueprint.get("/federation/advert")
def federation_advert() -> Response:
    """This cluster's advert to its peers now (DESIGN 12)."""
    NO_QUERY.read(request.args)
    return jsonify(manager().views.advert_json())


@blueprint.get("/federation/peers")
def federation_peers() -> Response:
    """Each peer: its configuration (never its token), up or down, its advert's summary."""
    NO_QUERY.read(request.args)
    return jsonify(manager().views.peers_json())


@blueprint.get("/hosts")
def hosts() -> Response:
    manager_ = manager()
    listed = manager_.views.hosts()
    powers = manager_.power.hosts((host for host, _ in listed), manager_.clock())
    return jsonify(
        [
            {**host_json(host), "name": manager_.views.host_name(host.id),
             "power": {**powers[host.id].to_json(), **manager_.power_state_json(host.id)},
             "tasks": [task_json(task) for task in tasks]}
            for host, tasks in listed
        ]
    )


@blueprint.get("/power")
def power() -> Response:
    """Each host's power, estimated and measured (RAPL), and the cluster's since the manager
    started (DESIGN 11)."""
    NO_QUERY.read(request.args)
    manager_ = manager()
    hosts = list(manager_.store.all_hosts())
    powers = manager_.power.hosts(hosts, manager_.clock())
    return jsonify({
        "hosts": {host_id: {"name": manager_.views.host_name(host_id), **p.to_json()}
                  for host_id, p in powers.items()},
        "cluster": manager_.power.cluster_json(powers),
        "switching": (None if manager_.switching is None
                      else {**manager_.switching.summary_json(),
                            **({} if manager_.consolidation is None
                               else {"moves": dict(manager_.consolidation.counts),
                                     "last_consolidation": manager_.consolidation.last})}),
    })


@blueprint.get("/events")
def events() -> Response:
    """The typed events of every request as they were written, oldest first, after the cursor
    ``since`` ("0": the oldest kept, "$": only the cursor of now), at most ``limit``."""
    args = EVENT_LIST.read(request.args)
    manager_ = manager()
    found, cursor = manager_.records.events(args.get("since", "0"), args.get("limit", 100))
    for event in found:  # its host by name, a host that left included
        host = event.get("host")
        if isinstance(host, str) and host and event.get("cluster") is None:
            event["host_name"] = manager_.views.host_name(host)
    return jsonify({"events": found, "next": cursor})


@blueprint.get("/slo")
def slo() -> Response:
    """Per class, its requests by SLO state now and the share that met or meet their
    objective (DESIGN 3.10, 11), from the tally the records keep."""
    NO_QUERY.read(request.args)
    manager_ = manager()
    return jsonify({"classes": [row.to_json() for row in manager_.slo_classes(manager_.clock())]})


@blueprint.get("/history")
def history() -> Response:
    """The manager's samples of the cluster (DESIGN 11; one per GREENSWARM_HISTORY_INTERVAL_S,
    a day kept), oldest first, after the cursor ``since`` ("0": the oldest kept)."""
    args = HISTORY_LIST.read(request.args)
    manager_ = manager()
    samples, cursor = manager_.history.read(args.get("since", "0"), args.get("limit", 1000))
    return jsonify({"interval_s": manager_.history.interval_s, "samples": samples,
                    "next": cursor})


@blueprint.get("/metrics")
def metrics() -> Response:
    """Prometheus exposition (DESIGN 11): counters of decisions, gauges of hosts and queue."""
    return Response(manager().metrics.exposition(), content_type=METRICS_CONTENT_TYPE)


@blueprint.get("/healthz")
def health() -> tuple[Response, int]:
    """Public (load balancers carry no token): its checks and counts to anyone, which records
    fail and which nodes are down, with the errors, only to a caller with the token or a
    dashboard session (DESIGN 9)."""
    checks = manager().health.answer(details=caller_known())
    return jsonify(checks), 200 if checks["status"] == "ok" else 503


@blueprint.get("/openapi.json")
def openapi() -> Response:
    """The document, with the request bodies' bounds of now (the largest host's)."""
    requests_, deployments = manager().submissions.door_bounds()
    bounds = Bounds(*(requests_ or (None, None)), *(deployments or (None, None)))
    return jsonify(document(bounds))
