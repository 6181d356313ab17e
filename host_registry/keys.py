"""The Host Registry's Redis layout and record codec.

===========================================  =====================================================
 key                                          holds
===========================================  =====================================================
 ``{p}:host:{id}``                             hash: capacity, utilization, its time and load
                                               windows, region, class, the tally
                                               (domain.tally), the class limits, and the
                                               room of every pass (domain.capacity)
 ``{p}:list:{region}:{class}``                 sorted set: hosts of one region and class by U;
                                               ``class`` is ``empty`` for hosts with no task
 ``{p}:bound:{region}:{class}``                hash: per room field, an upper bound of the room of
                                               the list's hosts (exact after a full scan)
 ``{p}:hosts``                                 sorted set (score 0): every host id, for listing
 ``{p}:pending``                               sorted set: the pending queue, scored by
                                               violation deadline, members ``{class}:{id}``
 ``{p}:pending:{id}``                          hash: one pending entry
 ``{p}:stamp``                                 counter: the source of every hash's "stamp" field,
                                               which optimistic writes check (``CAS_LUA``,
                                               host_registry/redis_tx.py)
===========================================  =====================================================

Rooms are stored so that a list can be filtered inside Redis (see ``CANDIDATES_LUA``) without
sending every host to the scheduler; they are recomputed in Python on every write, so the rule
lives only in domain.capacity.
"""

from __future__ import annotations

import json
from collections.abc import Mapping

from domain.load import LoadWindows
from domain.model import HostView, Request, TaskType
from domain.pending import PendingEntry, PendingReason
from domain.regions import Region
from domain.rooms import ROOM_KEYS, RoomKey, RoomKind
from domain.tally import TALLY_FIELDS
from host_registry.task_keys import constraints_field, constraints_from_field

EMPTY = "empty"


class HostKeys:
    def __init__(self, prefix: str) -> None:
        self.prefix = prefix
        self.host_prefix = f"{prefix}:host:"
        self.all = f"{prefix}:hosts"
        self.pending = f"{prefix}:pending"
        self.stamp_counter = f"{prefix}:stamp"
        # the managers' lease and its fencing token, the newest ever given (DESIGN 13)
        self.leader = f"{prefix}:leader"
        self.fence = f"{prefix}:leader:fence"

    def host(self, host_id: str) -> str:
        return f"{self.host_prefix}{host_id}"

    def region_list(self, region: Region, host_class: int | None) -> str:
        return f"{self.prefix}:list:{region.value}:{host_class or EMPTY}"

    def bound(self, region: Region, host_class: int | None) -> str:
        return f"{self.prefix}:bound:{region.value}:{host_class or EMPTY}"

    def pending_entry(self, request_id: str) -> str:
        return f"{self.prefix}:pending:{request_id}"


def room_fields(key: RoomKey) -> tuple[str, str]:
    """Hash fields holding the room of one key, e.g. ``room_kill2_job_cpu``."""
    if key.kind is RoomKind.SIMPLE:
        name = "simple"
    elif key.kind is RoomKind.CUT:
        name = f"cut{key.cls}"
    else:
        name = f"kill{key.cls}_{'job' if key.job else 'service'}"
    return f"room_{name}_cpu", f"room_{name}_memory"


LIMIT_FIELDS = tuple((f"cpu_limit_{cls}", f"memory_limit_{cls}") for cls in (1, 2, 3, 4))
ROOM_FIELDS = tuple(room_fields(key) for key in ROOM_KEYS)  # names made once: every write


def host_to_hash(view: HostView) -> dict[str, str]:
    fields = {
        "id": view.id,
        "address": view.address,
        "cpu_capacity": str(view.cpu_capacity),
        "memory_capacity": str(view.memory_capacity),
        "cpu_util": repr(view.cpu_util),
        "memory_util": repr(view.memory_util),
        "region": view.region.value,
        "class": str(view.host_class or EMPTY),
        "util_at": "" if view.util_at is None else repr(view.util_at),
        "windows": "" if view.windows is None else json.dumps(view.windows.to_json()),
    }
    fields.update(zip(TALLY_FIELDS, map(str, view.tally), strict=True))
    for (cpu_field, memory_field), cpu, memory in zip(
        LIMIT_FIELDS, view.cpu_limits, view.memory_limits, strict=True
    ):
        fields[cpu_field], fields[memory_field] = str(cpu), str(memory)
    # view.rooms holds room(view, key) for every key of ROOM_KEYS, in that order
    for (cpu_field, memory_field), (cpu, memory) in zip(ROOM_FIELDS, view.rooms, strict=True):
        fields[cpu_field], fields[memory_field] = str(cpu), str(memory)
    return fields


def host_from_hash(fields: Mapping[str, str]) -> HostView:
    return HostView(
        id=fields["id"],
        cpu_capacity=int(fields["cpu_capacity"]),
        memory_capacity=int(fields["memory_capacity"]),
        cpu_util=float(fields["cpu_util"]),
        memory_util=float(fields["memory_util"]),
        region=Region(fields["region"]),
        tally=tuple(int(fields[name]) for name in TALLY_FIELDS),
        cpu_limits=tuple(int(fields[f"cpu_limit_{c}"]) for c in (1, 2, 3, 4)),
        memory_limits=tuple(int(fields[f"memory_limit_{c}"]) for c in (1, 2, 3, 4)),
        address=fields.get("address", ""),
        util_at=float(fields["util_at"]) if fields.get("util_at") else None,
        windows=LoadWindows.from_json(json.loads(fields["windows"]))
        if fields.get("windows") else None,
    )


def load_fields(util_at: float | None, windows: LoadWindows | None) -> dict[str, str]:
    """The host-hash fields of a utilization's time and windows (only those given)."""
    fields = {}
    if util_at is not None:
        fields["util_at"] = repr(util_at)
    if windows is not None:
        fields["windows"] = json.dumps(windows.to_json())
    return fields


def pending_member(entry: PendingEntry) -> str:
    # Equal deadlines sort by member: class first, then id (PendingEntry.order_key).
    return f"{entry.request.cls}:{entry.request.id}"


def pending_to_hash(entry: PendingEntry) -> dict[str, str]:
    request = entry.request
    return {
        "id": request.id,
        "class": str(request.cls),
        "type": request.type.value,
        "cpu_shares": str(request.cpu_shares),
        "memory": str(request.memory),
        "reason": entry.reason.value,
        "enqueued_at": repr(entry.enqueued_at),
        "deadline": repr(entry.deadline),
        "executed_s": repr(entry.executed_s),
        "pending_s": repr(entry.pending_s),
        "preemptions": str(entry.preemptions),
        "constraints": constraints_field(request.constraints),
        "checkpoint_interval_s": repr(request.checkpoint_interval_s),
    }


def pending_from_hash(fields: Mapping[str, str]) -> PendingEntry:
    request = Request(
        fields["id"],
        int(fields["class"]),
        TaskType(fields["type"]),
        int(fields["cpu_shares"]),
        int(fields["memory"]),
        constraints_from_field(fields.get("constraints")),
        float(fields.get("checkpoint_interval_s") or 0.0),  # absent from entries queued before
    )
    return PendingEntry(
        request=request,
        reason=PendingReason(fields["reason"]),
        enqueued_at=float(fields["enqueued_at"]),
        deadline=float(fields["deadline"]),
        executed_s=float(fields["executed_s"]),
        pending_s=float(fields["pending_s"]),
        preemptions=int(fields.get("preemptions") or 0),  # absent from entries queued before
    )


# Walks the lists of a pass from segment ARGV[3], position ARGV[4], and returns
# {next_segment, next_position, {segment, host hash, segment, host hash, ...}} with at most
# ARGV[2] hosts whose stored room covers the segment's need, each as HGETALL gives it (so a
# page of candidates is one round trip); next_segment > number of segments at the end.
# Each segment has two KEYS (its list and the list's bound hash) and five ARGV: '1' to walk by
# descending U, the two room fields ('' for no filter) and the two needs. A list whose bound
# is below the need is skipped unread; a list read to its end gets its exact bound back.
CANDIDATES_LUA = """
local host_prefix, limit = ARGV[1], tonumber(ARGV[2])
local segment, index = tonumber(ARGV[3]), tonumber(ARGV[4])
local segments = #KEYS / 2
local found, count = {}, 0
while segment <= segments do
  local list_key, bound_key = KEYS[2 * segment - 1], KEYS[2 * segment]
  local base = 4 + (segment - 1) * 5
  local descending = ARGV[base + 1] == '1'
  local cpu_field, memory_field = ARGV[base + 2], ARGV[base + 3]
  local need_cpu, need_memory = tonumber(ARGV[base + 4]), tonumber(ARGV[base + 5])
  local skip, whole = false, index == 0  -- only a scan of the whole list may set the bound
  if cpu_field ~= '' and index == 0 then
    local bound = redis.call('HMGET', bound_key, cpu_field, memory_field)
    local cpu, memory = tonumber(bound[1]), tonumber(bound[2])
    skip = cpu ~= nil and memory ~= nil and (cpu < need_cpu or memory < need_memory)
  end
  local best_cpu, best_memory = -1, -1
  local chunk = math.min(math.max(2 * (limit - count), 8), 256)  -- ids per read, growing
  while not skip do
    local ids
    if descending then
      ids = redis.call('ZREVRANGE', list_key, index, index + chunk - 1)
    else
      ids = redis.call('ZRANGE', list_key, index, index + chunk - 1)
    end
    chunk = math.min(chunk * 4, 256)
    if #ids == 0 then
      if cpu_field ~= '' and whole then
        redis.call('HSET', bound_key, cpu_field, best_cpu, memory_field, best_memory)
      end
      break
    end
    for _, id in ipairs(ids) do
      index = index + 1
      local take = true
      if cpu_field ~= '' then
        local room = redis.call('HMGET', host_prefix .. id, cpu_field, memory_field)
        local cpu, memory = tonumber(room[1]), tonumber(room[2])
        take = cpu ~= nil and memory ~= nil and cpu >= need_cpu and memory >= need_memory
        if cpu ~= nil and cpu > best_cpu then best_cpu = cpu end
        if memory ~= nil and memory > best_memory then best_memory = memory end
      end
      if take then
        found[#found + 1] = segment
        found[#found + 1] = redis.call('HGETALL', host_prefix .. id)
        count = count + 1
        if count >= limit then return {segment, index, found} end
      end
    end
  end
  segment, index = segment + 1, 0
end
return {segment, index, found}
"""


# The tasks of one host in one round trip: KEYS[1] is the host's hash, KEYS[2..] its task
# lists in the order wanted; ARGV[1] the task key prefix. Returns false for an unknown host,
# else each task's hash as HGETALL gives it, list by list, in each list's order.
TASKS_ON_LUA = """
if redis.call('EXISTS', KEYS[1]) == 0 then return false end
local tasks = {}
for i = 2, #KEYS do
  for _, id in ipairs(redis.call('ZRANGE', KEYS[i], 0, -1)) do
    tasks[#tasks + 1] = redis.call('HGETALL', ARGV[1] .. id)
  end
end
return tasks
"""


# A task and its host in one round trip: KEYS[1] is the task's hash, ARGV[1] the host key
# prefix. Returns {task hash, host hash}, each as HGETALL gives it (empty when absent; the host
# is not looked up without a task).
TASK_AND_HOST_LUA = """
local task = redis.call('HGETALL', KEYS[1])
if #task == 0 then return {task, {}} end
local host = ''
for i = 1, #task, 2 do
  if task[i] == 'host' then host = task[i + 1] end
end
return {task, redis.call('HGETALL', ARGV[1] .. host)}
"""
