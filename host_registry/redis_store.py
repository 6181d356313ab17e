"""Host and Task Registry on Redis: the ClusterStore the live manager uses.

Every change runs as one optimistic transaction: read what it depends on (one pipelined round
trip), compute in Python with the same domain code as the in-memory store, then one Lua call
(``CAS_LUA``, :mod:`host_registry.redis_tx`) that writes everything only if none of those keys'
stamps changed meanwhile, or else retries. A host therefore moves between (region, class) lists
atomically and a reader never sees it twice or not at all. ``apply`` first skips the read: it
starts from the hashes the decision has just read, which the same stamps check (one round trip
per apply when nothing changed in between). Candidate lists are filtered inside
Redis by a Lua script that compares the stored room of each host with the request, so the
scheduler receives only hosts that can take it, a few at a time, in the order of DESIGN 3.4-3.6.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable, Iterator, Sequence
from dataclasses import replace
from typing import Any, TypeVar

import redis

from domain.booking import book
from domain.books import contribution
from domain.classes import ClassTable
from domain.decision import Decision
from domain.errors import ConflictError, FencedError, NotFoundError, UnavailableError
from domain.load import LoadWindows
from domain.model import HostSpec, HostView, Task
from domain.pending import PendingEntry
from domain.preemption import resume_on
from domain.regions import Region, RegionBounds
from domain.restore import TaskRestore, apply_restores, plan_restores
from domain.slo import SloTable
from domain.store import Segment
from domain.tally import EMPTY_TALLY, combine
from host_registry.connection import (
    SHORT_RECHECK_S,
    WAIT_TIMEOUT_MS,
    RedisEndpoint,
    ReplicaWait,
)
from host_registry.keys import (
    CANDIDATES_LUA,
    TASK_AND_HOST_LUA,
    TASKS_ON_LUA,
    HostKeys,
    host_from_hash,
    host_to_hash,
    load_fields,
    pending_from_hash,
    pending_member,
    pending_to_hash,
    room_fields,
)
from host_registry.redis_tx import CAS_LUA, Batch
from host_registry.task_keys import TaskKeys, task_from_hash, task_to_hash

T = TypeVar("T")
log = logging.getLogger(__name__)
# redis-py's stubs type every reply as bytes | str | ...; this client always decodes to str
# (decode_responses=True), so the handle and its pipelines are typed Any at this one edge.
Pipeline = Any
MAX_RETRIES = 100
FIRST_PAGE, LAST_PAGE = 1, 256  # most decisions take the first candidate
SEEN_LIMIT = 4096  # hashes kept from reads for the apply that usually follows (see _seen)


@contextlib.contextmanager
def redis_errors() -> Iterator[None]:
    """Translate redis-py's errors into the project's root at this edge."""
    try:
        yield
    except (redis.ConnectionError, redis.TimeoutError) as exc:
        raise UnavailableError(f"Redis is unreachable: {exc}") from exc
    except redis.ResponseError as exc:
        raise UnavailableError(f"Redis refused a command: {exc}") from exc


def _as_dict(flat: list[str]) -> dict[str, str]:
    """A hash as a Lua script returns HGETALL: [field, value, field, value, ...]."""
    return dict(zip(flat[::2], flat[1::2], strict=True))


class RedisStore:
    """Implements domain.store.ClusterStore on one Redis database."""

    def __init__(
        self,
        client: redis.Redis,
        classes: ClassTable | None = None,
        bounds: RegionBounds | None = None,
        prefix: str = "gs",
        wait_replicas: int = 0,
        endpoint: RedisEndpoint | None = None,
    ) -> None:
        self._redis: Any = client
        self._endpoint = endpoint  # where client connects, when known: for clients apart
        self._apart: list[redis.Redis] = []
        self._wait_replicas = wait_replicas
        self._replica_wait = ReplicaWait(wait_replicas)
        self._short_of_replicas = False
        self._fence: int | None = None
        self._classes = classes or ClassTable()
        self._bounds = bounds or RegionBounds()
        self.host_keys = HostKeys(prefix)
        self.task_keys = TaskKeys(prefix)
        self._candidates = client.register_script(CANDIDATES_LUA)
        self._tasks_on = client.register_script(TASKS_ON_LUA)
        self._task_and_host = client.register_script(TASK_AND_HOST_LUA)
        self._cas = client.register_script(CAS_LUA)
        # Host and task hashes as a decision last read them (candidates, host, tasks_on), by
        # key: apply's first attempt starts from these instead of reading them again. They
        # are only a guess: the write checks each one's stamp, and a stale guess costs one
        # failed write, after which apply reads as ever.
        self._seen: dict[str, dict[str, str]] = {}

    @classmethod
    def from_url(
        cls,
        url: str,
        classes: ClassTable | None = None,
        bounds: RegionBounds | None = None,
        prefix: str = "gs",
    ) -> RedisStore:
        return cls.connect(RedisEndpoint(url), classes, bounds, prefix)

    @classmethod
    def connect(
        cls,
        endpoint: RedisEndpoint,
        classes: ClassTable | None = None,
        bounds: RegionBounds | None = None,
        prefix: str = "gs",
    ) -> RedisStore:
        """On the server ``endpoint`` names, directly or through its Sentinels (DESIGN 13)."""
        return cls(endpoint.connect(), classes, bounds, prefix, endpoint.wait_replicas,
                   endpoint)

    @property
    def classes(self) -> ClassTable:
        return self._classes

    @property
    def bounds(self) -> RegionBounds:
        return self._bounds

    def sibling(self, make: Callable[[redis.Redis, str], T]) -> T:
        """A registry of other keys beside this store's (the request records, the
        deployments, the power readings: ``make(connection, prefix)``), on its connection and
        under its prefix: one connection and one prefix for all, and nobody else handles the
        connection."""
        return make(self._redis, self.host_keys.prefix)

    def sibling_apart(self, make: Callable[[redis.Redis, str], T], timeout_s: float,
                      retries: int = 1) -> T:
        """As :meth:`sibling`, on a client of its own to the same server (or the primary the
        same Sentinels name), whose calls give up after ``timeout_s`` and are tried again
        ``retries`` times on a new connection: for a registry on a clock, the lease. A
        primary whose machine is gone answers nothing, not even a reset, and a call on a
        connection already open to it waits for the socket's timeout; the store's is long
        enough for its largest reads. A store made on a bare client shares it."""
        if self._endpoint is None:
            return self.sibling(make)
        client = replace(self._endpoint, socket_timeout_s=timeout_s).connect(retries=retries)
        self._apart.append(client)
        return make(client, self.host_keys.prefix)

    def forget_idle_connections(self) -> None:
        """Close the connections not in use, so that the next call of each thread connects
        anew (to the primary the Sentinels name now): after a failover seen on another
        client, an idle connection to the old primary would wait out the socket's timeout."""
        self._redis.connection_pool.disconnect(inuse_connections=False)

    def close(self) -> None:
        """Release the connection pools (a process that is done with the store)."""
        for client in self._apart:
            client.close()
        self._redis.close()

    def ping(self) -> bool:
        with redis_errors():
            return bool(self._redis.ping())

    # -- reading ----------------------------------------------------------------------------

    def candidates(self, segments: Sequence[Segment]) -> Iterator[tuple[int, HostView]]:
        keys = [
            key
            for s in segments
            for key in (
                self.host_keys.region_list(s.region, s.host_class),
                self.host_keys.bound(s.region, s.host_class),
            )
        ]
        tail: list[str | int] = []
        for s in segments:
            fields = room_fields(s.room_key) if s.room_key is not None else ("", "")
            tail += [0 if s.ascending else 1, *fields, *s.need]
        segment, index, page = 1, 0, FIRST_PAGE
        while segment <= len(segments):
            with redis_errors():
                segment, index, flat = self._candidates(
                    keys=keys, args=[self.host_keys.host_prefix, page, segment, index, *tail]
                )
            for number, fields in zip(flat[::2], flat[1::2], strict=True):
                if fields:  # a listed host always has its hash; skip one that does not
                    read = _as_dict(fields)
                    view = host_from_hash(read)
                    self._remember(self.host_keys.host(view.id), read)
                    yield int(number) - 1, view
            page = min(page * 4, LAST_PAGE)

    def all_hosts(self) -> Iterator[HostView]:
        with redis_errors():
            ids = self._redis.zrange(self.host_keys.all, 0, -1)
        for start in range(0, len(ids), 500):
            with redis_errors():
                views = self._fetch(ids[start : start + 500])
            yield from (view for view in views if view is not None)

    def host(self, host_id: str) -> HostView:
        key = self.host_keys.host(host_id)
        with redis_errors():
            fields = self._redis.hgetall(key)
        if not fields:
            raise NotFoundError(f"no host {host_id!r}")
        view = host_from_hash(fields)
        self._remember(key, fields)
        return view

    def tasks_on(self, host_id: str) -> list[Task]:
        keys = [self.host_keys.host(host_id)]
        keys += [self.task_keys.by_class(host_id, cls) for cls in (4, 3, 2, 1)]
        with redis_errors():
            hashes = self._tasks_on(keys=keys, args=[self.task_keys.task("")])
        if hashes is None:
            raise NotFoundError(f"no host {host_id!r}")
        tasks = []
        for fields in hashes:
            if fields:
                read = _as_dict(fields)
                task = task_from_hash(read)
                self._remember(self.task_keys.task(task.id), read)
                tasks.append(task)
        return tasks

    def task(self, task_id: str) -> Task | None:
        with redis_errors():
            fields = self._redis.hgetall(self.task_keys.task(task_id))
        return task_from_hash(fields) if fields else None

    def tasks(self) -> list[Task]:
        with redis_errors():
            return self._tasks(self._redis.zrange(self.task_keys.all, 0, -1))

    def list_members(self) -> dict[tuple[Region, int | None], list[str]]:
        """Every (region, class) list read in one MULTI: a consistent snapshot."""
        keys = [(r, c) for r in Region for c in (None, 1, 2, 3, 4)]
        with redis_errors():
            pipe = self._redis.pipeline(transaction=True)
            for region, cls in keys:
                pipe.zrange(self.host_keys.region_list(region, cls), 0, -1)
            return dict(zip(keys, pipe.execute(), strict=True))

    # -- hosts ------------------------------------------------------------------------------

    def add_host(self, spec: HostSpec, cpu_util: float = 0.0, memory_util: float = 0.0) -> HostView:
        key = self.host_keys.host(spec.id)

        def attempt() -> tuple[HostView, Batch]:
            (fields,) = self._read_hashes([key])
            old = host_from_hash(fields) if fields else None
            view = HostView(
                id=spec.id,
                cpu_capacity=spec.cpu_capacity,
                memory_capacity=spec.memory_capacity,
                cpu_util=old.cpu_util if old else cpu_util,
                memory_util=old.memory_util if old else memory_util,
                region=old.region if old else self._bounds.classify(max(cpu_util, memory_util)),
                tally=old.tally if old else EMPTY_TALLY,
                cpu_limits=tuple(self._classes.limit(spec.cpu_capacity, c) for c in (1, 2, 3, 4)),
                memory_limits=tuple(
                    self._classes.limit(spec.memory_capacity, c) for c in (1, 2, 3, 4)
                ),
                address=spec.address,
                util_at=old.util_at if old else None,
                windows=old.windows if old else None,
            )
            batch = Batch().check(key, fields)
            batch.zadd(self.host_keys.all, spec.id, 0.0)
            self._stage_host(batch, old, view, fields)
            return view, batch

        return self._optimistic(attempt)

    def remove_host(self, host_id: str) -> list[Task]:
        key = self.host_keys.host(host_id)

        def attempt() -> tuple[list[Task], Batch]:
            fields, task_hashes = self._read_host_tasks(host_id)
            view = host_from_hash(fields)
            tasks = [task_from_hash(f) for _, f in task_hashes]
            batch = Batch().check(key, fields)  # every task change rewrites the host hash
            for task in tasks:
                self._stage_task_removal(batch, task)
            batch.delete(key, *self._class_keys(host_id))
            batch.zrem(self.host_keys.all, host_id)
            batch.zrem(self.host_keys.region_list(view.region, view.host_class), host_id)
            return sorted(tasks, key=lambda t: t.id), batch

        return self._optimistic(attempt)

    def update_host_utilization(
        self, host_id: str, cpu_util: float, memory_util: float,
        util_at: float | None = None, windows: LoadWindows | None = None,
    ) -> HostView:
        key = self.host_keys.host(host_id)

        def attempt() -> tuple[HostView, Batch]:
            fields, old = self._read_host(host_id)
            region = self._bounds.classify(max(cpu_util, memory_util))
            view = old.with_utilization(cpu_util, memory_util, region, util_at, windows)
            batch = Batch().check(key, fields)
            batch.hset(
                key,
                {
                    "cpu_util": repr(cpu_util),
                    "memory_util": repr(memory_util),
                    "region": region.value,
                    **load_fields(util_at, windows),
                },
            )
            self._stage_list_move(batch, old, view)
            return view, batch

        return self._optimistic(attempt)

    def update_host_load(
        self, host_id: str, util_at: float, windows: LoadWindows | None = None
    ) -> HostView:
        key = self.host_keys.host(host_id)

        def attempt() -> tuple[HostView, Batch]:
            fields, old = self._read_host(host_id)
            view = old.with_utilization(old.cpu_util, old.memory_util, old.region, util_at,
                                        windows)
            batch = Batch().check(key, fields)
            batch.hset(key, load_fields(util_at, windows))
            return view, batch

        return self._optimistic(attempt)

    # -- tasks ------------------------------------------------------------------------------

    def apply(
        self,
        decision: Decision,
        now: float,
        executed_s: float = 0.0,
        pending_s: float = 0.0,
        preemptions: int = 0,
    ) -> list[Task]:
        host_id = decision.host or ""
        touched = sorted({*decision.kills, *decision.suspends,
                          *(cut.task for cut in decision.cuts)})
        host_key = self.host_keys.host(host_id)
        new_key = self.task_keys.task(decision.request.id)
        touched_keys = [self.task_keys.task(task_id) for task_id in touched]

        def plan(
            host_fields: dict[str, str],
            new_fields: dict[str, str],
            task_fields: list[dict[str, str]],
        ) -> tuple[list[Task], Batch]:
            if not host_fields:
                raise NotFoundError(f"no host {host_id!r}")
            if new_fields:
                raise ConflictError(f"task {decision.request.id!r} is already running")
            batch = Batch().check(host_key, host_fields).check(new_key, new_fields)
            current: dict[str, Task] = {}
            for task_key, fields in zip(touched_keys, task_fields, strict=True):
                batch.check(task_key, fields)
                if fields and fields["host"] == host_id:
                    task = task_from_hash(fields)
                    current[task.id] = task
            host = host_from_hash(host_fields)
            booking = book(decision, host, current, self._classes, now, executed_s, pending_s,
                       preemptions)
            for victim in booking.killed:
                self._stage_task_removal(batch, victim)
            for task in (*booking.cut, *booking.suspended, booking.placed):
                self._stage_task(batch, task)
            self._stage_host(batch, host, booking.host, host_fields)
            return list(booking.killed), batch

        def attempt() -> tuple[list[Task], Batch]:
            host_fields, new_fields, *task_fields = self._read_hashes(
                [host_key, new_key, *touched_keys]
            )
            return plan(host_fields, new_fields, task_fields)

        # The decision has just read the host and any task it cuts or kills: first try to
        # write from those (the new task must not exist: an empty stamp checks that), and
        # read them again only if one changed meanwhile.
        seen = self._take_seen([host_key, *touched_keys])
        guess = None if seen is None else (lambda: plan(seen[0], {}, seen[1:]))
        return self._optimistic(attempt, guess)

    def load_task(self, task: Task) -> None:
        host_key, task_key = self.host_keys.host(task.host), self.task_keys.task(task.id)

        def attempt() -> tuple[None, Batch]:
            host_fields, task_fields = self._read_hashes([host_key, task_key])
            if not host_fields:
                raise NotFoundError(f"no host {task.host!r}")
            if task_fields:
                raise ConflictError(f"task {task.id!r} is already booked")
            host = host_from_hash(host_fields)
            batch = Batch().check(host_key, host_fields).check(task_key, task_fields)
            self._stage_task(batch, task)
            tally = combine(host.tally, contribution(task, self._classes))
            self._stage_host(batch, host, replace(host, tally=tally), host_fields)
            return None, batch

        self._optimistic(attempt)

    def resize_task(self, task_id: str, cpu_shares: int, memory: int) -> Task:
        _, resized = self._rebook(
            task_id, lambda task: replace(task, cpu_shares=cpu_shares, memory=memory)
        )
        assert resized is not None
        return resized

    def end_task(self, task_id: str) -> Task:
        task, _ = self._rebook(task_id, lambda task: None)
        return task

    def _rebook(
        self, task_id: str, change: Callable[[Task], Task | None]
    ) -> tuple[Task, Task | None]:
        """Replace a task by ``change(task)`` (None: remove it) and rebook its host's tally."""
        task_key = self.task_keys.task(task_id)

        def attempt() -> tuple[tuple[Task, Task | None], Batch]:
            with redis_errors():  # the task and its host: one round trip, not two
                flat_task, flat_host = self._task_and_host(
                    keys=[task_key], args=[self.host_keys.host_prefix]
                )
            task_fields, host_fields = _as_dict(flat_task), _as_dict(flat_host)
            if not task_fields:
                raise NotFoundError(f"no task {task_id!r}")
            task = task_from_hash(task_fields)
            new = change(task)
            if not host_fields:
                raise NotFoundError(f"no host {task.host!r}")
            host = host_from_hash(host_fields)
            batch = Batch().check(task_key, task_fields)
            batch.check(self.host_keys.host(task.host), host_fields)
            tally = combine(host.tally, contribution(task, self._classes), -1)
            if new is None:
                self._stage_task_removal(batch, task)
            else:
                self._stage_task(batch, new)
                tally = combine(tally, contribution(new, self._classes))
            self._stage_host(batch, host, replace(host, tally=tally), host_fields)
            return (task, new), batch

        return self._optimistic(attempt)

    def restore_cuts(self, host_id: str) -> list[TaskRestore]:
        host_key = self.host_keys.host(host_id)

        def attempt() -> tuple[list[TaskRestore], Batch | None]:
            host_fields, task_hashes = self._read_host_tasks(host_id)
            read = {
                task.id: (key, fields, task)
                for key, fields in task_hashes
                if (task := task_from_hash(fields)).host == host_id
            }
            tasks = {task_id: task for task_id, (_, _, task) in read.items()}
            host = host_from_hash(host_fields)
            restores = plan_restores(host, tasks.values(), self._classes)
            if not restores:
                return [], None
            # every change of a task's resources or of the host's task set rewrites the host
            # hash, so its stamp covers the plan; the restored tasks' own stamps keep a
            # utilization update of one of them from being overwritten
            batch = Batch().check(host_key, host_fields)
            for restore in restores:
                key, fields, _ = read[restore.task]
                batch.check(key, fields)
            view, restored = apply_restores(host, tasks, restores, self._classes)
            for task in restored:
                self._stage_task(batch, task)
            self._stage_host(batch, host, view, host_fields)
            return list(restores), batch

        return self._optimistic(attempt)

    def resume_suspended(self, host_id: str, now: float, slo: SloTable) -> list[Task]:
        host_key = self.host_keys.host(host_id)
        class_keys = [self.task_keys.by_class(host_id, c) for c in (1, 2, 3, 4)]

        def attempt() -> tuple[list[Task], Batch | None]:
            with redis_errors():
                pipe = self._redis.pipeline(transaction=False)
                pipe.hgetall(host_key)
                for class_key in class_keys:
                    pipe.zrange(class_key, 0, -1)
                host_fields, *id_lists = pipe.execute()
            if not host_fields:
                raise NotFoundError(f"no host {host_id!r}")
            task_keys = [self.task_keys.task(i) for ids in id_lists for i in ids]
            read = {
                task.id: (key, fields, task)
                for key, fields in zip(task_keys, self._read_hashes(task_keys), strict=True)
                if fields and (task := task_from_hash(fields)).host == host_id
            }
            host = host_from_hash(host_fields)
            view, resumed = resume_on(host, [task for _, _, task in read.values()], now, slo,
                                      self._classes)
            if not resumed:
                return [], None
            batch = Batch().check(host_key, host_fields)
            for task in resumed:
                key, fields, _ = read[task.id]
                batch.check(key, fields)
                self._stage_task(batch, task)
            self._stage_host(batch, host, view, host_fields)
            return list(resumed), batch

        return self._optimistic(attempt)

    def update_task_utilization(self, task_id: str, cpu_util: float, memory_util: float) -> Task:
        key = self.task_keys.task(task_id)

        def attempt() -> tuple[Task, Batch]:
            (fields,) = self._read_hashes([key])
            if not fields:
                raise NotFoundError(f"no task {task_id!r}")
            task = task_from_hash(fields).with_utilization(cpu_util, memory_util)
            batch = Batch().check(key, fields)
            batch.hset(key, {"cpu_util": repr(cpu_util), "memory_util": repr(memory_util)})
            batch.zadd(self.task_keys.by_class(task.host, task.cls), task.id, task.util)
            return task, batch

        return self._optimistic(attempt)

    # -- pending queue ----------------------------------------------------------------------

    def push_pending(self, entry: PendingEntry) -> None:
        key = self.host_keys.pending_entry(entry.request.id)

        def attempt() -> tuple[None, Batch]:
            (old,) = self._read_hashes([key])
            batch = Batch().check(key, old)
            if old:
                batch.zrem(self.host_keys.pending, pending_member(pending_from_hash(old)))
            batch.delete(key)
            batch.hset(key, pending_to_hash(entry))
            batch.zadd(self.host_keys.pending, pending_member(entry), entry.deadline)
            return None, batch

        self._optimistic(attempt)

    def pending(self) -> list[PendingEntry]:
        with redis_errors():
            members = self._redis.zrange(self.host_keys.pending, 0, -1)
        keys = [self.host_keys.pending_entry(member.split(":", 1)[1]) for member in members]
        return [pending_from_hash(fields) for fields in self._read_hashes(keys) if fields]

    def is_pending(self, request_id: str) -> bool:
        with redis_errors():
            return bool(self._redis.exists(self.host_keys.pending_entry(request_id)))

    def remove_pending(self, request_id: str) -> bool:
        key = self.host_keys.pending_entry(request_id)

        def attempt() -> tuple[bool, Batch]:
            (fields,) = self._read_hashes([key])
            batch = Batch().check(key, fields)
            if fields:
                batch.zrem(self.host_keys.pending, pending_member(pending_from_hash(fields)))
                batch.delete(key)
            return bool(fields), batch

        return self._optimistic(attempt)

    # -- internals ------------------------------------------------------------------------

    def _optimistic(
        self,
        attempt: Callable[[], tuple[T, Batch | None]],
        guess: Callable[[], tuple[T, Batch]] | None = None,
    ) -> T:
        """Read, compute, then write only if nothing read has changed; retry otherwise. An
        attempt without a batch has nothing to write. A ``guess`` computes from hashes read
        earlier instead: it is tried once, first, and kept only if its write succeeds."""
        if guess is not None:
            result, batch = guess()
            if self._write(batch):
                return result
        for _ in range(MAX_RETRIES):
            result, maybe = attempt()
            if maybe is None or self._write(maybe):
                return result
        raise UnavailableError(f"gave up after {MAX_RETRIES} conflicting concurrent writes")

    def _write(self, batch: Batch) -> bool:
        """CAS_LUA: write the batch if no checked key changed; False (nothing written) else."""
        keys = [self.host_keys.stamp_counter, self.host_keys.fence]
        args = [batch.to_json(), "" if self._fence is None else str(self._fence)]
        with redis_errors():
            if not self._wait_replicas:
                return self._written(self._cas(keys=keys, args=args))
            # WAIT counts the writes of its own connection: the script and WAIT share one
            # (a pipeline), in one round trip
            timeout_ms = self._replica_wait.timeout_ms()
            pipe = self._redis.pipeline(transaction=False)
            self._cas(keys=keys, args=args, client=pipe)
            pipe.wait(self._wait_replicas, timeout_ms)
            written, replicas = pipe.execute()
        if written == -1:
            return self._written(written)
        if written == 1:
            self._replica_wait.saw(replicas, timeout_ms)
        short = written == 1 and replicas < self._wait_replicas
        if short != self._short_of_replicas:  # said once when it starts, once when it ends
            self._short_of_replicas = short
            if short:
                log.warning("registry writes reach %d of %d replicas within %d ms (until "
                            "said otherwise; meanwhile they wait in full only every %g s)",
                            replicas, self._wait_replicas, WAIT_TIMEOUT_MS, SHORT_RECHECK_S)
            else:
                log.info("registry writes reach %d replicas again", self._wait_replicas)
        return bool(written == 1)

    def _written(self, outcome: int) -> bool:
        if outcome == -1:
            raise FencedError(f"this manager's lease token {self._fence} is no longer the "
                              "newest: another manager leads, and this write was refused")
        return bool(outcome == 1)

    def fence(self, token: int | None) -> None:
        """Every write from now on carries this lease token (DESIGN 13) and is refused once a
        newer one was given; None: unfenced (a registry without leader election)."""
        self._fence = token

    def _remember(self, key: str, fields: dict[str, str]) -> None:
        if "stamp" not in fields:  # without a stamp a write could not tell it is stale
            return
        if len(self._seen) >= SEEN_LIMIT:
            self._seen.clear()
        self._seen[key] = fields

    def _take_seen(self, keys: Sequence[str]) -> list[dict[str, str]] | None:
        """The hashes last read of ``keys``, forgotten now (a write is about to change them);
        None unless every one was read."""
        seen = [self._seen.pop(key, None) for key in keys]
        return None if any(fields is None for fields in seen) else [f for f in seen if f]

    def _read_hashes(self, keys: Sequence[str]) -> list[dict[str, str]]:
        if not keys:
            return []
        with redis_errors():
            pipe = self._redis.pipeline(transaction=False)
            for key in keys:
                pipe.hgetall(key)
            return list(pipe.execute())

    def _class_keys(self, host_id: str) -> list[str]:
        return [self.task_keys.by_class(host_id, c) for c in (1, 2, 3, 4)]

    def _read_host_tasks(
        self, host_id: str
    ) -> tuple[dict[str, str], list[tuple[str, dict[str, str]]]]:
        """A host's hash and, in class order, the hashes of the tasks its four class lists
        name, with their keys (a task gone meanwhile is left out); NotFoundError without the
        host. The host and its lists in one round trip, the tasks in a second."""
        class_keys = self._class_keys(host_id)
        with redis_errors():
            pipe = self._redis.pipeline(transaction=False)
            pipe.hgetall(self.host_keys.host(host_id))
            for class_key in class_keys:
                pipe.zrange(class_key, 0, -1)
            fields, *id_lists = pipe.execute()
        if not fields:
            raise NotFoundError(f"no host {host_id!r}")
        task_keys = [self.task_keys.task(i) for ids in id_lists for i in ids]
        hashes = zip(task_keys, self._read_hashes(task_keys), strict=True)
        return fields, [(key, task_fields) for key, task_fields in hashes if task_fields]

    def _read_host(self, host_id: str) -> tuple[dict[str, str], HostView]:
        (fields,) = self._read_hashes([self.host_keys.host(host_id)])
        if not fields:
            raise NotFoundError(f"no host {host_id!r}")
        return fields, host_from_hash(fields)

    def _stage_host(
        self, batch: Batch, old: HostView | None, new: HostView, stored: dict[str, str]
    ) -> None:
        """Write the host's hash, given as ``stored`` when read (the batch checks its stamp,
        so only the fields that differ need writing), and move it to its list."""
        fields = host_to_hash(new)
        changed = {name: value for name, value in fields.items() if stored.get(name) != value}
        batch.hset(self.host_keys.host(new.id), changed)
        self._stage_list_move(batch, old, new, fields)

    def _stage_list_move(
        self,
        batch: Batch,
        old: HostView | None,
        new: HostView,
        fields: dict[str, str] | None = None,
    ) -> None:
        """Put the host in its list and keep that list's room bounds valid upper bounds."""
        new_list = self.host_keys.region_list(new.region, new.host_class)
        if old is not None:
            old_list = self.host_keys.region_list(old.region, old.host_class)
            if old_list != new_list:
                batch.zrem(old_list, old.id)
        batch.zadd(new_list, new.id, new.util)
        rooms = fields if fields is not None else host_to_hash(new)
        batch.raise_bounds(
            self.host_keys.bound(new.region, new.host_class),
            {name: value for name, value in rooms.items() if name.startswith("room_")},
        )

    def _stage_task(self, batch: Batch, task: Task) -> None:
        batch.hset(self.task_keys.task(task.id), task_to_hash(task))
        batch.zadd(self.task_keys.by_class(task.host, task.cls), task.id, task.util)
        batch.zadd(self.task_keys.all, task.id, 0.0)

    def _stage_task_removal(self, batch: Batch, task: Task) -> None:
        batch.delete(self.task_keys.task(task.id))
        batch.zrem(self.task_keys.by_class(task.host, task.cls), task.id)
        batch.zrem(self.task_keys.all, task.id)

    def _fetch(self, ids: list[str]) -> list[HostView | None]:
        """Host views by id, in order; None where a host vanished meanwhile."""
        if not ids:
            return []
        pipe = self._redis.pipeline(transaction=False)
        for host_id in ids:
            pipe.hgetall(self.host_keys.host(host_id))
        return [host_from_hash(fields) if fields else None for fields in pipe.execute()]

    def _tasks(self, ids: list[str]) -> list[Task]:
        if not ids:
            return []
        pipe = self._redis.pipeline(transaction=False)
        for task_id in ids:
            pipe.hgetall(self.task_keys.task(task_id))
        return [task_from_hash(fields) for fields in pipe.execute() if fields]

    def flush(self) -> None:
        """Delete every key of this store's prefix (tests and ``--reset`` only)."""
        self._seen.clear()  # stamps start again from 1: an old hash could match a new stamp
        with redis_errors():
            batch: list[Any] = []
            for key in self._redis.scan_iter(match=f"{self.host_keys.prefix}:*", count=1000):
                batch.append(key)
                if len(batch) >= 1000:
                    self._redis.delete(*batch)
                    batch.clear()
            if batch:
                self._redis.delete(*batch)
