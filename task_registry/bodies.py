"""The Task Registry's and the node agent's bodies as field specs (domain/fields.py): their
endpoints read with them, and the OpenAPI document states the registry's (manager/openapi.py)."""

from __future__ import annotations

from domain.fields import Bool, Choice, Fields, Int, Items, Named, Nullable, Text
from domain.lifecycle import REPORTED_END_STATUSES
from domain.model import ID, MIN_CPU_SHARES, UTILIZATION
from domain.units import MIN_MEMORY_BYTES

# PUT /registry/tasks/{task_id}/resources: what a cut task's container really has (message 6)
TASK_RESOURCES = Named("TaskResources", Fields(
    {"cpu_shares": Int(MIN_CPU_SHARES), "memory": Int(1)}, ("cpu_shares", "memory")))

# POST /registry/tasks/{task_id}/end: an agent saw its container exit (message 10)
TASK_END = Named("TaskEnd", Fields(
    {"status": Choice(tuple(status.value for status in REPORTED_END_STATUSES)),
     "exit_code": Nullable(Int(-(2**31), 2**31)),
     "service_id": Nullable(Text(max_length=128, description="the Swarm service it ran in")),
     "oom": Bool()},
    ("status",)))

# PUT /registry/tasks/utilization: the monitor's batch (message 13)
TASK_UTILIZATION = Named("TaskUtilization", Fields(
    {"host": ID,
     "tasks": Items(Fields({"id": ID, "cpu_util": UTILIZATION, "memory_util": UTILIZATION},
                           ("id", "cpu_util", "memory_util")))},
    ("host", "tasks")))

# PUT /agent/tasks/{task_id}/resources on a node's agent: a cut or a cut given back, which
# Docker takes only down to its floors (at most 256 cores' shares)
AGENT_RESOURCES = Fields(
    {"cpu_shares": Int(MIN_CPU_SHARES, 262_144), "memory": Int(MIN_MEMORY_BYTES)},
    ("cpu_shares", "memory"))
