"""What each host's monitor measured of its power (RAPL), kept beside the Host Registry.

Power is a live reading only: the scheduler never reads it (the simulator has none), so it is
kept apart from the hosts' books, in one Redis hash ``{prefix}:host-power`` (host id ->
``{"watts", "measured_at"}``), or in memory.
"""

from __future__ import annotations

import json
from typing import Protocol

import redis

from domain.energy import PowerReading
from host_registry.redis_store import redis_errors


class PowerReadings(Protocol):
    def record(self, host_id: str, reading: PowerReading) -> None: ...

    def readings(self) -> dict[str, PowerReading]: ...

    def forget(self, host_id: str) -> None: ...


class MemoryPowerReadings:
    def __init__(self) -> None:
        self._readings: dict[str, PowerReading] = {}

    def record(self, host_id: str, reading: PowerReading) -> None:
        self._readings[host_id] = reading

    def readings(self) -> dict[str, PowerReading]:
        return dict(self._readings)

    def forget(self, host_id: str) -> None:
        self._readings.pop(host_id, None)


class RedisPowerReadings:
    def __init__(self, client: redis.Redis, prefix: str = "gs") -> None:
        self._redis = client
        self._key = f"{prefix}:host-power"

    def record(self, host_id: str, reading: PowerReading) -> None:
        value = json.dumps({"watts": reading.watts, "measured_at": reading.measured_at})
        with redis_errors():
            self._redis.hset(self._key, host_id, value)

    def readings(self) -> dict[str, PowerReading]:
        with redis_errors():
            raw = self._redis.hgetall(self._key)
        out: dict[str, PowerReading] = {}
        for host_id, value in raw.items():
            try:
                obj = json.loads(value)
                out[str(host_id)] = PowerReading(float(obj["watts"]), float(obj["measured_at"]))
            except (ValueError, KeyError, TypeError):
                continue  # a damaged entry is no reading
        return out

    def forget(self, host_id: str) -> None:
        with redis_errors():
            self._redis.hdel(self._key, host_id)
