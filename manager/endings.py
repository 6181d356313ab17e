"""How a request's run ends here: stopped by its client (DELETE /requests/{id}), ended by its
container (its agent's report), or killed on request (the Task Registry's kill).

Each frees the task's room through the scheduler, which retries the queue and gives cuts back
(the outcome is carried out by manager/effects.py), and records the end; an offloaded request
is stopped at its peer first (manager/offload.py). Everything but the peer's call runs on the
scheduling loop.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass

from domain.errors import DamagedRecordError, NotFoundError
from domain.events import Ended, Exited, Killed, Stopped
from domain.lifecycle import FINAL, EndStatus, RequestStatus, TaskEnd
from domain.model import TaskType
from domain.pending import PendingReason
from host_registry.redis_store import RedisStore
from manager.effects import Effects
from manager.faults import RecordFaults
from manager.loop import SchedulingLoop
from manager.offload import Offloading
from manager.reconcile import SwarmSync
from manager.records import RequestRecord, RequestRecords
from manager.swarm import SwarmBackend
from scheduler.service import Scheduler

log = logging.getLogger(__name__)
RAW_LOGGED = 2000  # characters of a removed damaged record written to the log


@dataclass(frozen=True)
class Removed:
    """A request stopped whose record could not be read, so it was removed (DESIGN 9), and
    the event the events stream got (its ``reason`` says why)."""

    request_id: str
    event: Stopped


class Endings:
    def __init__(self, store: RedisStore, records: RequestRecords, scheduler: Scheduler,
                 backend: SwarmBackend, swarm: SwarmSync, effects: Effects,
                 loop: SchedulingLoop, offloading: Offloading, faults: RecordFaults,
                 clock: Callable[[], float]) -> None:
        self.store = store
        self.records = records
        self.scheduler = scheduler
        self.backend = backend
        self.swarm = swarm
        self.effects = effects
        self.loop = loop
        self.offloading = offloading
        self.faults = faults
        self.clock = clock

    # -- stopped by the client ----------------------------------------------------------------

    def stop_request(self, request_id: str) -> RequestRecord | Removed:
        """Stop a request: its record afterwards; for a record that cannot be read, what
        :meth:`_remove_damaged` did."""
        try:
            record = self.records.get(request_id)
            if record.cluster is not None and record.status not in FINAL:
                return self.offloading.stop(record)
            return self.loop.call(lambda: self._stop_here(request_id))
        except DamagedRecordError as exc:
            return self._remove_damaged(request_id, str(exc))

    def _stop_here(self, request_id: str) -> RequestRecord:
        record = self.records.get(request_id)
        if record.status in FINAL:
            return record
        return self._mark_stopped(request_id, self._free(request_id))

    def _mark_stopped(self, request_id: str, pending: bool) -> RequestRecord:
        """The record of a request just freed (``pending``: from the queue) says stopped."""
        self.records.update(
            request_id,
            Stopped("stopped by the client while pending" if pending
                    else "stopped by the client"),
            status=RequestStatus.STOPPED,
        )
        return self.records.get(request_id)

    def _free(self, request_id: str) -> bool:
        """On the loop: what runs under the id is stopped: its place in the queue (True: it
        was pending), else its Swarm service and its booking (its room given back, the queue
        retried)."""
        if self.store.remove_pending(request_id):
            return True
        self.backend.remove(request_id)
        if self.store.task(request_id) is not None:
            _, outcome = self.scheduler.task_ended(request_id, self.clock())
            self.effects.carry_out(outcome)
        return False

    def _remove_damaged(self, request_id: str, why: str) -> RequestRecord | Removed:
        """A request whose record cannot be read is stopped and its record removed (DESIGN
        9: a failing record can be removed through the API). What runs under its id is freed
        as for any request; one offloaded to a peer (the record's ``cluster`` can be read
        alone) is stopped there first: a 503 naming the peer when it does not answer, nothing
        removed here then. The record is gone, its fields written to the log; one mended by
        hand meanwhile (it reads again) is kept and stopped as any other."""
        peer = self.records.cluster_of(request_id)
        if peer is not None:
            self.offloading.stop_at_peer(peer, request_id)
        return self.loop.call(lambda: self._remove_here(request_id, why))

    def _remove_here(self, request_id: str, why: str) -> RequestRecord | Removed:
        pending = self._free(request_id)
        event = Stopped(f"stopped by the client; its record could not be read and was "
                        f"removed ({why})", t=self.clock(), status=RequestStatus.STOPPED)
        raw = self.records.remove(request_id, event)
        self.faults.forget(request_id)
        if isinstance(raw, RequestRecord):  # mended by hand since it was found damaged
            return raw if raw.status in FINAL else self._mark_stopped(request_id, pending)
        log.warning("request %s: its record could not be read (%s); stopped and removed "
                    "through the API; it held: %s", request_id, why, str(raw)[:RAW_LOGGED])
        return Removed(request_id, event)

    # -- ended by its container ---------------------------------------------------------------

    def task_ended(self, end: TaskEnd) -> bool:
        return self.loop.call(lambda: self._task_ended(end))

    def _task_ended(self, end: TaskEnd) -> bool:
        """Free a task's room when its container is done; False when the report is stale."""
        task_id, status, exit_code, service_id, oom = (
            end.task_id, end.status, end.exit_code, end.service_id, end.oom
        )
        try:
            record = self.records.get(task_id)
        except NotFoundError:  # any booked task can be ended, one without a record too
            return self.swarm.drop_unrecorded(task_id)
        if service_id and record.service_id and service_id != record.service_id:
            return False  # an earlier placement of the same request (killed and moved)
        if self.store.task(task_id) is None:
            return False
        if record.status in FINAL:  # booked still, by mistake: only the booking goes
            return self.swarm.drop_unrecorded(task_id)
        if record.spec["type"] == TaskType.SERVICE.value and status in (
            EndStatus.FINISHED,
            EndStatus.FAILED,
        ):
            why = ", out of memory" if oom else ""
            self.records.update(
                task_id,
                Exited(f"container exited (code {exit_code}{why}); Swarm restarts it",
                       exit_code=exit_code, oom=oom or None),
            )
            return False
        _, outcome = self.scheduler.task_ended(task_id, self.clock())
        self.backend.remove(task_id)
        final = {
            EndStatus.FINISHED: RequestStatus.COMPLETED,
            EndStatus.FAILED: RequestStatus.FAILED,
        }.get(status, RequestStatus.STOPPED)
        why = " (out of memory)" if oom else ""
        self.records.update(
            task_id,
            Ended(f"ended: {status.value}{why}", exit_code=exit_code, oom=oom or None),
            status=final,
        )
        self.effects.carry_out(outcome)
        return True

    # -- killed on request --------------------------------------------------------------------

    def kill(self, task_id: str) -> None:
        self.loop.call(lambda: self._kill(task_id))

    def _kill(self, task_id: str) -> None:
        task = self.store.task(task_id)
        if task is None:
            raise NotFoundError(f"no running task {task_id!r}")
        # the service first: if Docker cannot remove it, the task stays booked and running
        self.effects.mark_killed(
            task_id, Killed(f"killed on {task.host} on request", host=task.host)
        )
        self.store.end_task(task_id)
        outcome = self.scheduler.reschedule([task], self.clock(), PendingReason.VICTIM)
        self.effects.carry_out(outcome)
