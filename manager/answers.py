"""The shapes of the manager's own answers as field specs (domain/fields.py): the OpenAPI
document states them (manager/openapi.py), and tests read live answers with them. The forms of
hosts and tasks every service shares are in web/forms.py."""

from __future__ import annotations

from domain.decision import Pass
from domain.fields import Bool, Choice, Fields, Int, Items, Named, Nullable, Num, Spec, Table, Text
from domain.lifecycle import RequestStatus
from domain.power import PowerAction, PowerState
from federation.peers import OffloadMode
from manager.deployments import DeploymentStatus
from web.forms import HOST_FIELDS, HOST_REQUIRED, TASK_FORM, TASK_TYPE_FORM

INT, NUMBER, TEXT, BOOL = Int(), Num(), Text(), Bool()
COUNT = Int(0)
ANY_OBJECT = Fields({}, closed=False)


def _open(fields: dict[str, Spec], *required: str) -> Fields:
    """An answer's object: these fields, ``required`` always there, more may come."""
    return Fields(fields, required, closed=False)


def _closed(fields: dict[str, Spec], *required: str) -> Fields:
    return Fields(fields, required)


RESOURCES = _open({"cpu_shares": Nullable(INT), "memory": Nullable(INT)})
HOST_POWER_FIELDS: dict[str, Spec] = {
    "estimated_w": NUMBER, "measured_w": Nullable(NUMBER), "measured_at": Nullable(NUMBER)}
# its power state (DESIGN 3.15): on, shutting-down, off, booting, since when (None: on since
# the manager knows it); with advise, what the power manager would do; the last switch's result
HOST_POWER_STATE = Choice(tuple(s.value for s in PowerState))
HOST_POWER = Named("HostPower", _open(
    {**HOST_POWER_FIELDS, "state": HOST_POWER_STATE, "since": Nullable(NUMBER),
     "advice": Choice(tuple(a.value for a in PowerAction)), "advice_detail": TEXT,
     "last_switch": _open({"op": TEXT, "detail": TEXT, "exit_status": Nullable(INT),
                           "duration_s": NUMBER}, "op", "detail")},
    "estimated_w", "measured_w", "measured_at", "state", "since"))
POWER = Named("Power", _open(
    {"hosts": Table(_open({"name": TEXT, **HOST_POWER_FIELDS},
                          "name", "estimated_w", "measured_w", "measured_at")),
     "cluster": _open({"estimated_w": NUMBER, "measured_w": Nullable(NUMBER),
                       "measured_hosts": INT, "estimated_kwh": NUMBER, "measured_kwh": NUMBER,
                       "since": NUMBER, "estimated_kwh_all_on": NUMBER},
                      "estimated_w", "measured_w", "estimated_kwh", "measured_kwh", "since"),
     "switching": Nullable(_open(
         {"backend": TEXT, "hosts": Table(COUNT), "switches": Table(COUNT),
          "advice": Items(TEXT), "moves": Table(COUNT),
          "last_consolidation": Nullable(_open({"verdict": TEXT, "detail": TEXT},
                                               "verdict", "detail"))},
         "backend", "hosts", "switches"))},
    "hosts", "cluster"))
# DESIGN 3.10, at the moment of the answer: availability, the class's SLO, Q (s), ...
SERVICE_LEVEL = Named("ServiceLevel", _open(
    {"availability": NUMBER, "slo": NUMBER, "met_slo": BOOL, "q_s": NUMBER,
     "executed_s": NUMBER, "pending_s": NUMBER, "overhead": NUMBER, "preemptions": INT,
     "work_lost_s": NUMBER},
    "availability", "slo", "met_slo", "q_s", "executed_s", "pending_s", "preemptions"))
STATUS = Choice(tuple(s.value for s in RequestStatus))
REQUEST_SUMMARY_FIELDS: dict[str, Spec] = {
    "id": TEXT, "status": STATUS, "host": Nullable(TEXT), "service_id": Nullable(TEXT),
    "image": TEXT, "class": INT, "type": TASK_TYPE_FORM, "original": RESOURCES,
    "current": RESOURCES,
    "cut_received": Text(description="an exact fraction, e.g. '1/3'"),
    "kills": INT, "created_at": NUMBER, "updated_at": NUMBER,
    "service": Nullable(SERVICE_LEVEL),
    # DESIGN 12: the peer cluster it was offloaded to, the cluster that forwarded it here
    "cluster": Nullable(TEXT), "forwarded_from": Nullable(TEXT),
    # its host as `docker node ls` names it (an offloaded request's: as its peer names it)
    "host_name": Nullable(TEXT),
}
REQUEST_SUMMARY = Named("RequestSummary", _open(REQUEST_SUMMARY_FIELDS,
                                                "id", "status", "host", "kills"))
REQUEST = Named("Request", _open(
    {**REQUEST_SUMMARY_FIELDS, "spec": ANY_OBJECT, "history": Items(ANY_OBJECT),
     # DELETE of a record that could not be read: it was removed, and why (DESIGN 9)
     "removed": Text(description="its record could not be read and was removed: why")},
    "id", "status", "host", "kills", "spec", "history"))
_CUT = _open({"task": TEXT, "cpu_shares": INT, "memory": INT, "cut_received": NUMBER})
DECISION = Named("Decision", _open(
    {"placed": BOOL, "host": Nullable(TEXT),
     "pass": Nullable(Choice(tuple(p.value for p in Pass))),
     "request": _open({"cpu_shares": INT, "memory": INT, "cut_received": NUMBER}),
     "cuts": Items(_CUT), "kills": Items(TEXT),
     "suspends": Items(TEXT, description="victims paused on the host instead of killed "
                       "(DESIGN 3.14): they keep their memory and resume there"),
     "reason": TEXT, "decision_ms": NUMBER,
     "cluster": Text(description="the peer cluster that placed it (offloaded)")},
    "placed", "host", "pass", "cuts", "kills"))
SUBMITTED = _open({"request": REQUEST, "decision": Nullable(DECISION)}, "request", "decision")
DEPLOYMENT_SUMMARY_FIELDS: dict[str, Spec] = {
    "name": TEXT, "status": Choice(tuple(s.value for s in DeploymentStatus)),
    "created_at": NUMBER}
DEPLOYMENT = Named("Deployment", _open(
    {**DEPLOYMENT_SUMMARY_FIELDS,
     "requests": Items(_open({
         "name": TEXT, "id": TEXT,
         "cluster": Nullable(TEXT).but_described("where it was created"),
         "status": Nullable(TEXT), "host": Nullable(TEXT),
         "error": Text(description="its peer did not answer, or its record could not be "
                       "read (and, on DELETE, was removed)")},
         "name", "id", "cluster", "status", "host")),
     "links": Items(ANY_OBJECT), "cost": Nullable(NUMBER),
     "reason": Nullable(TEXT).but_described("why it was undone"),
     # DELETE of a record that could not be read: it was removed, and why (DESIGN 9)
     "removed": Text(description="its record could not be read and was removed: why")},
    "name", "status", "created_at", "requests", "links"))
DEPLOYMENTS = Items(_open({**DEPLOYMENT_SUMMARY_FIELDS, "requests": COUNT},
                          "name", "status", "created_at", "requests"))
ROOM = Items(COUNT, 2, 2, description="[cpu_shares, memory bytes]")
ADVERT = Named("Advert", _closed(
    {"cluster": TEXT, "hosts": COUNT, "cpu_capacity": COUNT, "memory_capacity": COUNT,
     "cpu_allocated": COUNT, "memory_allocated": COUNT, "cpu_util": NUMBER,
     "memory_util": NUMBER, "hosts_by_region": Table(COUNT), "hosts_by_class": Table(COUNT),
     "empty_hosts": COUNT,
     "rooms": Items(Items(ROOM), 4, 4, description="per request class 1-4, the Pareto front "
                                                   "of the busy hosts' rooms"),
     "empty_rooms": Items(ROOM), "busy_cpu_load": NUMBER, "busy_host_cpu": COUNT,
     "power_table": TEXT, "memory_w_per_gib": NUMBER, "wake_counts_idle": BOOL},
    "cluster", "hosts", "cpu_capacity", "memory_capacity", "cpu_allocated", "memory_allocated",
    "cpu_util", "memory_util", "hosts_by_region", "hosts_by_class", "empty_hosts", "rooms",
    "empty_rooms", "busy_cpu_load", "busy_host_cpu", "power_table", "memory_w_per_gib",
    "wake_counts_idle"))
PEER = _closed(
    {"name": TEXT, "url": TEXT, "latency_ms": NUMBER, "bandwidth_mbit": NUMBER,
     "state": Choice(("unknown", "up", "down")), "refreshed_at": Nullable(NUMBER),
     "checked_at": Nullable(NUMBER), "error": Nullable(TEXT),
     "advert": Nullable(_open({
         "hosts": COUNT, "empty_hosts": COUNT, "cpu_capacity": COUNT, "cpu_allocated": COUNT,
         "memory_capacity": COUNT, "memory_allocated": COUNT, "cpu_util": NUMBER,
         "busy_cpu_load": NUMBER, "power_table": TEXT}))},
    "name", "url", "latency_ms", "bandwidth_mbit", "state", "refreshed_at", "checked_at",
    "error", "advert")
PEERS = Named("Peers", _closed(
    {"cluster": TEXT, "offload": Choice(tuple(m.value for m in OffloadMode)),
     "peers": Items(PEER)},
    "cluster", "offload", "peers"))
# records skipped because they fail, and nodes down (DESIGN 9; manager/faults.py): counted for
# anyone, named (with the errors) only for a caller with the token or a dashboard session
_DETAIL = "with the token or a dashboard session only"
RECONCILE = _open({"ok": BOOL, "errors_total": COUNT, "failing_count": COUNT,
                   "error": TEXT.but_described(f"why the last pass failed; {_DETAIL}"),
                   "failing": Items(_open({"id": TEXT, "kind": TEXT, "error": TEXT,
                                           "since": NUMBER}, "id", "error", "since"),
                                    description=f"the records failing now; {_DETAIL}")},
                  "ok", "errors_total", "failing_count")
HEALTH = Named("Health", _open(
    {"status": Choice(("ok", "degraded")),
     "details": Bool(description="whether the caller showed the token or a dashboard "
                                 "session, and the answer has the fields marked so"),
     "policy": TEXT.but_described(_DETAIL), "redis": BOOL, "docker": BOOL,
     "hosts": INT, "pending": INT, "redis_error": TEXT.but_described(_DETAIL),
     "docker_error": TEXT.but_described(_DETAIL), "reconcile": RECONCILE,
     "nodes_down_count": COUNT,
     "nodes_down": Items(_open({"id": TEXT, "name": TEXT, "since": NUMBER},
                               "id", "name", "since"),
                         description=f"the nodes Down or missing now; {_DETAIL}")},
    "status", "details", "redis", "docker", "reconcile", "nodes_down_count"))
HOSTS = Items(Fields({**HOST_FIELDS, "name": Text(description="the node's hostname"),
                      "power": HOST_POWER, "tasks": Items(TASK_FORM)},
                     (*HOST_REQUIRED, "name", "power", "tasks"), closed=False))
EVENTS = _open({"events": Items(_open({"id": TEXT, "request": TEXT, "kind": TEXT,
                                       "t": NUMBER, "host_name": TEXT},
                                      "id", "request", "kind")),
                "next": TEXT}, "events", "next")
# GET /slo: per class, its requests by SLO state now (manager/slo_tally.py)
SLO_CLASSES = Named("SloClasses", _open(
    {"classes": Items(_open(
        {"class": INT, "objective": NUMBER, "met": COUNT, "missed": COUNT, "meeting": COUNT,
         "missing": COUNT, "requests": COUNT, "fulfilment": Nullable(NUMBER),
         "suspensions": COUNT, "resumes": COUNT, "checkpoint_restarts": COUNT},
        "class", "objective", "met", "missed", "meeting", "missing", "requests",
        "fulfilment"))},
    "classes"))
# GET /history: the manager's samples of the cluster (manager/history.py)
HISTORY_SAMPLE = Named("HistorySample", _open(
    {"t": NUMBER, "hosts_on": COUNT, "estimated_w": NUMBER, "measured_w": Nullable(NUMBER),
     "estimated_kwh": NUMBER, "measured_kwh": NUMBER, "cpu_util": NUMBER,
     "memory_util": NUMBER, "cpu_allocated": NUMBER, "memory_allocated": NUMBER,
     "queue": COUNT, "tasks": COUNT, "slo": Table(Nullable(NUMBER))},
    "t", "hosts_on", "estimated_w", "estimated_kwh", "queue"))
HISTORY = _open({"interval_s": NUMBER, "samples": Items(HISTORY_SAMPLE), "next": TEXT},
                "interval_s", "samples", "next")
