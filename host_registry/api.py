"""Host Registry endpoints (thesis 3.2.2, messages 1, 3/5, 8, 11, 12) as a Flask blueprint."""

from __future__ import annotations

import time
from fractions import Fraction

from flask import Blueprint, Response, jsonify, request

from domain.decision import Decision, Pass, TaskCut
from domain.energy import PowerReading
from domain.errors import ConflictError, NotFoundError
from domain.lifecycle import FINAL
from domain.model import HostSpec, HostView, Request, TaskType, check_id
from domain.regions import Region
from domain.store import Segment
from host_registry.bodies import HOST_LIST, HOST_REGISTRATION, HOST_UTILIZATION, PLACEMENT
from host_registry.bodies import MAX_POWER_W as MAX_POWER_W
from host_registry.events import registry
from web.access import Access, access, require_own_host
from web.edge import allow_only, json_body
from web.forms import host_json, watcher_json

blueprint = Blueprint("host_registry", __name__, url_prefix="/registry")


def _list_filter() -> list[Segment] | None:
    """The (region, class) lists GET /registry/hosts asks for (HOST_LIST); None for every
    host. A class or an order without a region: that list in each region."""
    args = HOST_LIST.read(request.args)
    if not args:
        return None
    regions = [Region(args["region"])] if "region" in args else list(Region)
    raw_class = args.get("class", "empty")
    host_class = None if raw_class == "empty" else int(raw_class)
    return [Segment(region, host_class,
                    args.get("order", "asc" if region is Region.EED else "desc") == "asc")
            for region in regions]


@blueprint.get("/hosts")
def list_hosts() -> Response:
    """Message 1: every host by id, or one (region, class) list in scheduling order."""
    store = registry().store
    segments = _list_filter()
    if segments is None:
        return jsonify([host_json(h) for h in store.all_hosts()])
    return jsonify([host_json(h) for _, h in store.candidates(segments)])


@blueprint.get("/hosts/<host_id>")
@access(Access.NODES_READ)
def get_host(host_id: str) -> Response:
    return jsonify(host_json(registry().store.host(check_id(host_id, "host"))))


@blueprint.post("/hosts")
@access(Access.NODES_ONLY)
def register_host() -> tuple[Response, int]:
    """Message 11: a monitor announces its host (its own: a node's credential names it). A
    known host keeps the capacity the manager learnt from the Swarm; only its address and
    utilization are refreshed."""
    body = HOST_REGISTRATION.read(json_body(), "")
    host_id: str = body["id"]
    require_own_host(host_id)
    address: str = body.get("address", "")
    cpu_capacity, memory_capacity = body["cpu_capacity"], body["memory_capacity"]
    cpu_util, memory_util = body.get("cpu_util", 0.0), body.get("memory_util", 0.0)
    measured_at = min(body.get("measured_at", time.time()), time.time())
    reg = registry()
    try:
        known: HostView | None = reg.store.host(host_id)
    except NotFoundError:
        known = None
    if known is None:
        spec = HostSpec(host_id, cpu_capacity, memory_capacity, address)
        reg.events.admit_host(spec)  # 409 for an id that is not a host the scheduler may use
        reg.store.add_host(spec, cpu_util, memory_util)
        view = reg.store.update_host_load(host_id, measured_at)
        status = 201
    else:
        if address and address != known.address:
            reg.store.add_host(
                HostSpec(host_id, known.cpu_capacity, known.memory_capacity, address)
            )
        view = reg.store.update_host_utilization(host_id, cpu_util, memory_util, measured_at)
        status = 200
    reg.events.host_changed(view)
    return jsonify(host_json(view)), status


@blueprint.put("/hosts/<host_id>/utilization")
@access(Access.NODES_ONLY)
def host_utilization(host_id: str) -> Response:
    """Message 12: the monitor's thresholded host utilization (either or both numbers), the
    time it was measured and the load windows (DESIGN 5), from the host's own node only. A
    heartbeat carries only ``measured_at`` (and windows): the values held are still current."""
    require_own_host(check_id(host_id, "host"))
    body = HOST_UTILIZATION.read(json_body(), "")
    reg = registry()
    host = reg.store.host(check_id(host_id, "host"))
    cpu = body.get("cpu_util", host.cpu_util)
    memory = body.get("memory_util", host.memory_util)
    now = time.time()
    measured_at = min(body.get("measured_at", now), now)
    if "power_w" in body:  # RAPL: the package's measured power (DESIGN 11)
        reg.power.record(host.id, PowerReading(body["power_w"], measured_at))
    windows = body.get("windows")
    if "cpu_util" in body or "memory_util" in body:
        view = reg.store.update_host_utilization(host.id, cpu, memory, measured_at, windows)
        reg.events.host_changed(view)
    else:
        view = reg.store.update_host_load(host.id, measured_at, windows)
    return jsonify(host_json(view))


@blueprint.get("/watcher")
def load_watcher() -> Response:
    """Every host's utilization, its age and load windows in one call (the Trimaran KEP's load
    watcher API, DESIGN 3.12)."""
    allow_only(dict(request.args), set())
    now = time.time()
    data = {host.id: watcher_json(host, now) for host in registry().store.all_hosts()}
    return jsonify({"timestamp": int(now), "source": "greenswarm-monitor", "data": data})


@blueprint.get("/watcher/<host_id>")
def load_watcher_host(host_id: str) -> Response:
    """One host's entry of the load watcher; 404 when the host has no metrics yet."""
    host = registry().store.host(check_id(host_id, "host"))
    if host.util_at is None:
        raise NotFoundError(f"no metrics for host {host.id!r} yet")
    now = time.time()
    return jsonify({"timestamp": int(now), "source": "greenswarm-monitor",
                    "data": {host.id: watcher_json(host, now)}})


@blueprint.delete("/hosts/<host_id>")
def remove_host(host_id: str) -> tuple[Response, int]:
    """A host leaves: its tasks are rescheduled like kill victims (DESIGN 9)."""
    reg = registry()
    reg.events.host_removed(check_id(host_id, "host"))
    reg.power.forget(host_id)
    return jsonify({"removed": host_id}), 202


@blueprint.post("/placements")
def place() -> tuple[Response, int]:
    """Messages 3, 4 and 5: a scheduler running elsewhere applies a decision (the new task,
    its host's allocation and class, and the cuts and kills that made room) in one step.
    The manager's own scheduler does the same in-process. The request must be one the manager
    recorded and that has not ended (409 otherwise): a task nobody recorded is one nothing can
    start, reschedule or account for (DESIGN 9)."""
    body = PLACEMENT.read(json_body(), "")
    raw = body["request"]
    request_ = Request(raw["id"], raw["class"], TaskType(raw["type"]), raw["cpu_shares"],
                       raw["memory"])
    host_id: str = body["host"]
    cuts = tuple(TaskCut(cut["task"], host_id, cut["cpu_shares"], cut["memory"],
                         cut["cut_received"], 0, 0) for cut in body.get("cuts", []))
    decision = Decision(
        request=request_,
        placed=True,
        host=host_id,
        pass_=Pass.SIMPLE,
        cpu_shares=body.get("cpu_shares", request_.cpu_shares),
        memory=body.get("memory", request_.memory),
        cut_received=body.get("cut_received", Fraction(0)),
        cuts=cuts,
        kills=tuple(body.get("kills", [])),
    )
    reg = registry()
    status = reg.requests.status_of(request_.id)
    if status is None:
        raise ConflictError(f"the manager has no request {request_.id!r}: only a recorded "
                            "request can be placed")
    if status in FINAL:
        raise ConflictError(f"request {request_.id!r} is over ({status.value}): it cannot be "
                            "placed")
    killed = reg.store.apply(decision, time.time())
    return jsonify({"placed": request_.id, "killed": [t.id for t in killed]}), 201
