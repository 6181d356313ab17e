"""Host Registry endpoints (thesis 3.2.2, messages 1, 3/5, 8, 11, 12) as a Flask blueprint."""

from __future__ import annotations

import time
from fractions import Fraction

from flask import Blueprint, Response, jsonify, request

from domain.classes import check_class
from domain.decision import Decision, Pass, TaskCut
from domain.energy import PowerReading
from domain.errors import NotFoundError, ValidationError
from domain.load import LoadWindows, check_measured_at
from domain.model import (
    HostSpec,
    HostView,
    Request,
    check_fraction_of_one,
    check_id,
    check_int,
    check_task_id,
    check_task_type,
)
from domain.regions import Region
from domain.store import Segment
from host_registry.events import registry
from web.access import Access, access, require_own_host
from web.edge import allow_only, json_body, required
from web.forms import host_json, watcher_json

blueprint = Blueprint("host_registry", __name__, url_prefix="/registry")


def _list_filter() -> tuple[Region, int | None, bool] | None:
    args = request.args
    allow_only(dict(args), {"region", "class", "order"})
    if "region" not in args:
        if "class" in args or "order" in args:
            raise ValidationError("region", "is required with class or order")
        return None
    try:
        region = Region(args["region"])
    except ValueError:
        raise ValidationError("region", "must be LEE, DEE or EED") from None
    raw_class = args.get("class", "empty")
    if raw_class == "empty":
        host_class = None
    elif raw_class in {"1", "2", "3", "4"}:
        host_class = int(raw_class)
    else:
        raise ValidationError("class", "must be 1, 2, 3, 4 or empty")
    order = args.get("order", "asc" if region is Region.EED else "desc")
    if order not in {"asc", "desc"}:
        raise ValidationError("order", "must be asc or desc")
    return region, host_class, order == "asc"


@blueprint.get("/hosts")
def list_hosts() -> Response:
    """Message 1: every host by id, or one (region, class) list in scheduling order."""
    store = registry().store
    selection = _list_filter()
    if selection is None:
        return jsonify([host_json(h) for h in store.all_hosts()])
    region, host_class, ascending = selection
    hosts = store.candidates([Segment(region, host_class, ascending)])
    return jsonify([host_json(h) for _, h in hosts])


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
    body = json_body()
    allow_only(
        body, {"id", "address", "cpu_capacity", "memory_capacity", "cpu_util", "memory_util",
               "measured_at"}
    )
    host_id = check_id(required(body, "id"), "id")
    require_own_host(host_id)
    address = body.get("address", "")
    if not isinstance(address, str) or len(address) > 255:
        raise ValidationError("address", "must be a string of at most 255 characters")
    cpu_capacity = check_int(required(body, "cpu_capacity"), "cpu_capacity", 2)
    memory_capacity = check_int(required(body, "memory_capacity"), "memory_capacity", 1)
    cpu_util = check_fraction_of_one(body.get("cpu_util", 0.0), "cpu_util")
    memory_util = check_fraction_of_one(body.get("memory_util", 0.0), "memory_util")
    measured_at = check_measured_at(body.get("measured_at", time.time()), time.time())
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


MAX_POWER_W = 100_000.0  # no one machine draws 100 kW: a larger reading is a fault


@blueprint.put("/hosts/<host_id>/utilization")
@access(Access.NODES_ONLY)
def host_utilization(host_id: str) -> Response:
    """Message 12: the monitor's thresholded host utilization (either or both numbers), the
    time it was measured and the load windows (DESIGN 5), from the host's own node only. A
    heartbeat carries only ``measured_at`` (and windows): the values held are still current."""
    require_own_host(check_id(host_id, "host"))
    body = json_body()
    allow_only(body, {"cpu_util", "memory_util", "power_w", "measured_at", "windows"})
    if not {"cpu_util", "memory_util", "measured_at"} & body.keys():
        raise ValidationError("cpu_util", "cpu_util, memory_util or measured_at is required")
    reg = registry()
    host = reg.store.host(check_id(host_id, "host"))
    cpu = check_fraction_of_one(body.get("cpu_util", host.cpu_util), "cpu_util")
    memory = check_fraction_of_one(body.get("memory_util", host.memory_util), "memory_util")
    power: float | None = None
    if "power_w" in body:
        power = body["power_w"]
        if (isinstance(power, bool) or not isinstance(power, int | float)
                or not 0 <= power <= MAX_POWER_W):
            raise ValidationError("power_w", f"must be a number of watts in [0, {MAX_POWER_W}]")
    now = time.time()
    measured_at = check_measured_at(body.get("measured_at", now), now)
    if power is not None:  # RAPL: the package's measured power (DESIGN 11)
        reg.power.record(host.id, PowerReading(float(power), measured_at))
    windows = LoadWindows.from_json(body["windows"]) if "windows" in body else None
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


def _fraction(value: object, field: str) -> Fraction:
    if isinstance(value, str):
        try:
            result = Fraction(value)
        except (ValueError, ZeroDivisionError):
            raise ValidationError(field, "must be a fraction such as '1/6'") from None
    elif isinstance(value, int) and not isinstance(value, bool) and value == 0:
        result = Fraction(0)
    else:
        raise ValidationError(field, "must be an exact fraction string such as '1/6'")
    if not 0 <= result < 1:
        raise ValidationError(field, "must be in [0, 1)")
    return result


@blueprint.post("/placements")
def place() -> tuple[Response, int]:
    """Messages 3, 4 and 5: a scheduler running elsewhere applies a decision (the new task,
    its host's allocation and class, and the cuts and kills that made room) in one step.
    The manager's own scheduler does the same in-process."""
    body = json_body()
    allow_only(body, {"request", "host", "cpu_shares", "memory", "cut_received", "cuts", "kills"})
    raw = required(body, "request")
    if not isinstance(raw, dict):
        raise ValidationError("request", "must be an object")
    allow_only(raw, {"id", "class", "type", "cpu_shares", "memory"}, "request.")
    request_ = Request(
        check_task_id(required(raw, "id", "request."), "request.id"),
        check_class(required(raw, "class", "request."), "request.class"),
        check_task_type(required(raw, "type", "request."), "request.type"),
        check_int(required(raw, "cpu_shares", "request."), "request.cpu_shares", 2),
        check_int(required(raw, "memory", "request."), "request.memory", 1),
    )
    host_id = check_id(required(body, "host"), "host")
    raw_cuts = body.get("cuts", [])
    if not isinstance(raw_cuts, list):
        raise ValidationError("cuts", "must be a list of cuts")
    cuts = []
    for index, item in enumerate(raw_cuts):
        prefix = f"cuts[{index}]."
        if not isinstance(item, dict):
            raise ValidationError(f"cuts[{index}]", "must be an object")
        allow_only(item, {"task", "cpu_shares", "memory", "cut_received"}, prefix)
        cuts.append(
            TaskCut(
                check_id(required(item, "task", prefix), prefix + "task"),
                host_id,
                check_int(required(item, "cpu_shares", prefix), prefix + "cpu_shares", 2),
                check_int(required(item, "memory", prefix), prefix + "memory", 1),
                _fraction(required(item, "cut_received", prefix), prefix + "cut_received"),
                0,
                0,
            )
        )
    kills = body.get("kills", [])
    if not isinstance(kills, list):
        raise ValidationError("kills", "must be a list of task ids")
    decision = Decision(
        request=request_,
        placed=True,
        host=host_id,
        pass_=Pass.SIMPLE,
        cpu_shares=check_int(body.get("cpu_shares", request_.cpu_shares), "cpu_shares", 2),
        memory=check_int(body.get("memory", request_.memory), "memory", 1),
        cut_received=_fraction(body.get("cut_received", "0"), "cut_received"),
        cuts=tuple(cuts),
        kills=tuple(check_id(k, f"kills[{i}]") for i, k in enumerate(kills)),
    )
    killed = registry().store.apply(decision, time.time())
    return jsonify({"placed": request_.id, "killed": [t.id for t in killed]}), 201
