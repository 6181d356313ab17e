"""The Host Registry's bodies and query strings as field specs (domain/fields.py): its
endpoints read with them, and the OpenAPI document states them (manager/openapi.py)."""

from __future__ import annotations

from domain.classes import CLASS, CUT_RECEIVED
from domain.fields import Choice, Fields, Int, Items, Named, Num, Query, Text
from domain.load import MEASURED_AT, WINDOWS
from domain.model import ID, MIN_CPU_SHARES, TASK_ID, TASK_TYPE, UTILIZATION

MAX_POWER_W = 100_000.0  # no one machine draws 100 kW: a larger reading is a fault
CPU_SHARES = Int(MIN_CPU_SHARES)
MEMORY = Int(1)

# GET /registry/hosts: every host, or one (region, class) list in scheduling order; class or
# order without a region: that list in each region, LEE, DEE then EED.
HOST_LIST = Query({
    "region": Choice(("LEE", "DEE", "EED")),
    "class": Choice(("1", "2", "3", "4", "empty"),
                    description="the hosts of this class (empty: with no task); the default "
                                "with region or order"),
    "order": Choice(("asc", "desc"), description="by utilization; EED lists ascending, the "
                                                 "others descending by default"),
})

# POST /registry/hosts: a monitor registers its host (message 11)
HOST_REGISTRATION = Named("HostRegistration", Fields(
    {"id": ID, "address": Text(max_length=255), "cpu_capacity": CPU_SHARES,
     "memory_capacity": MEMORY, "cpu_util": UTILIZATION, "memory_util": UTILIZATION,
     "measured_at": MEASURED_AT},
    ("id", "cpu_capacity", "memory_capacity")))

# PUT /registry/hosts/{host_id}/utilization: the monitor's values (message 12)
HOST_UTILIZATION = Named("HostUtilization", Fields(
    {"cpu_util": UTILIZATION, "memory_util": UTILIZATION,
     "power_w": Num(0.0, MAX_POWER_W, description="the package's measured power (RAPL)"),
     "measured_at": MEASURED_AT, "windows": WINDOWS},
    one_of_required=("cpu_util", "memory_util", "measured_at"),
    description="cpu_util, memory_util or both; measured_at alone is a heartbeat"))

# POST /registry/placements: a decision made elsewhere (messages 3-5)
_TASK_CUT = Fields({"task": ID, "cpu_shares": CPU_SHARES, "memory": MEMORY,
                    "cut_received": CUT_RECEIVED},
                   ("task", "cpu_shares", "memory", "cut_received"))
PLACEMENT = Named("Placement", Fields(
    {"request": Fields({"id": TASK_ID, "class": CLASS, "type": TASK_TYPE,
                        "cpu_shares": CPU_SHARES, "memory": MEMORY},
                       ("id", "class", "type", "cpu_shares", "memory")),
     "host": ID, "cpu_shares": CPU_SHARES, "memory": MEMORY, "cut_received": CUT_RECEIVED,
     "cuts": Items(_TASK_CUT), "kills": Items(ID)},
    ("request", "host")))
