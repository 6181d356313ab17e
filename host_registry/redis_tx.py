"""The optimistic write on Redis: ``CAS_LUA`` and the :class:`Batch` of writes it applies.

A change reads what it depends on, computes, then hands ``CAS_LUA`` a batch: the keys it read with
the stamps it saw, and the commands to run. The script writes everything only if no checked
key's stamp changed meanwhile (else the store retries: ``RedisStore._optimistic`` in
:mod:`host_registry.redis_store`) and gives every key it wrote a fresh stamp.
"""

from __future__ import annotations

import json


class Batch:
    """Writes for CAS_LUA: the keys to check with the stamps read, then the commands."""

    def __init__(self) -> None:
        self.checks: list[list[str]] = []
        self.ops: list[list[str]] = []
        self.stamped: list[str] = []

    def check(self, key: str, fields: dict[str, str]) -> Batch:
        self.checks.append([key, fields.get("stamp", "")])
        return self

    def hset(self, key: str, mapping: dict[str, str]) -> None:
        """Set these fields (none: only give the key a fresh stamp)."""
        if mapping:
            self.ops.append(["HSET", key, *(item for pair in mapping.items() for item in pair)])
        if key in self.stamped:
            self.stamped.remove(key)
        self.stamped.append(key)

    def delete(self, *keys: str) -> None:
        self.ops.append(["DEL", *keys])
        self.stamped = [key for key in self.stamped if key not in keys]

    def zadd(self, key: str, member: str, score: float) -> None:
        self.ops.append(["ZADD", key, repr(score), member])

    def zrem(self, key: str, member: str) -> None:
        self.ops.append(["ZREM", key, member])

    def raise_bounds(self, key: str, values: dict[str, str]) -> None:
        self.ops.append(["RAISE", key, *(item for pair in values.items() for item in pair)])

    def to_json(self) -> str:
        return json.dumps({"check": self.checks, "ops": self.ops, "stamp": self.stamped})



# Applies a batch of writes only if none of the checked keys changed since they were read.
# ARGV[1] is JSON: {"check": [[key, stamp or ""], ...], "ops": [[command, key, args...], ...],
# "stamp": [key, ...]}. A key's stamp is its "stamp" field ("" when the key did not exist);
# every key in "stamp" gets a fresh stamp from the counter KEYS[1]. Returns 1, or 0 on conflict
# (nothing written). Only hash, sorted-set and DEL commands are accepted, plus RAISE (see below).
# Fencing (DESIGN 13): ARGV[2], when not empty, is the writer's lease token; a token older than
# the newest one given (KEYS[2]) is a manager that no longer leads: -1, nothing written.
CAS_LUA = """
if ARGV[2] and ARGV[2] ~= '' then
  local newest = tonumber(redis.call('GET', KEYS[2]) or '0')
  if tonumber(ARGV[2]) < newest then return -1 end
end
local request = cjson.decode(ARGV[1])
for _, check in ipairs(request.check) do
  local stamp = redis.call('HGET', check[1], 'stamp')
  if stamp == false then stamp = '' end
  if stamp ~= check[2] then return 0 end
end
local allowed = {HSET = true, HDEL = true, DEL = true, ZADD = true, ZREM = true}
for _, op in ipairs(request.ops) do
  if op[1] == 'RAISE' then
    -- {'RAISE', bound hash, field, value, ...}: raise known bounds, leave unknown ones unknown
    -- (one HMGET of them all and one HSET of those raised)
    local fields = {}
    for i = 3, #op, 2 do fields[#fields + 1] = op[i] end
    if #fields > 0 then
      local bounds = redis.call('HMGET', op[2], unpack(fields))
      local raised = {}
      for j = 1, #fields do
        local current, value = tonumber(bounds[j]), op[2 * j + 2]
        if current ~= nil and tonumber(value) > current then
          raised[#raised + 1] = fields[j]
          raised[#raised + 1] = value
        end
      end
      if #raised > 0 then redis.call('HSET', op[2], unpack(raised)) end
    end
  elseif allowed[op[1]] then
    redis.call(unpack(op))
  else
    return redis.error_reply('command not allowed: ' .. op[1])
  end
end
if #request.stamp > 0 then
  local stamp = tostring(redis.call('INCR', KEYS[1]))
  for _, key in ipairs(request.stamp) do redis.call('HSET', key, 'stamp', stamp) end
end
return 1
"""
