"""Carrying out what the scheduler applied to the registries: on the Swarm, on the node agents
and in the request records (decide first, then apply; DESIGN 2).

For every placed decision, in order: the victims' services are removed, the suspended victims
paused by the node's agent (DESIGN 3.14), the cuts are pushed to the agent, the new service is
created; then the suspended tasks that resume are unpaused, and the cuts given back (DESIGN 3.8)
are pushed the same way; queued entries and refusals are recorded. The registries are the
desired state; the agents and the periodic reconciliation bring the Swarm to it. Each of these
steps is taken for one record on its own (manager/faults.py): a request whose record fails (it
has none, say) is skipped, and the rest of the outcome is still carried out. Runs on the manager's
scheduling loop only.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from fractions import Fraction
from functools import partial

from domain.decision import Decision, Pass, TaskCut
from domain.errors import ConflictError, GreenSwarmError, NotFoundError, UnavailableError
from domain.events import (
    CheckpointRestart,
    Cut,
    HostLost,
    Killed,
    Placed,
    Preempted,
    Queued,
    Rejected,
    Restored,
    Resumed,
    StartFailed,
    Suspended,
)
from domain.lifecycle import RequestStatus
from domain.model import Task
from domain.restore import TaskRestore
from host_registry.redis_store import RedisStore
from manager.agents import AgentClient
from manager.checkpoints import MOUNT_TARGET, CheckpointDirs, checkpointing
from manager.faults import RecordFaults
from manager.records import RequestRecords
from manager.swarm import Placement, SwarmBackend
from scheduler.service import Outcome


class Effects:
    def __init__(
        self,
        store: RedisStore,
        records: RequestRecords,
        backend: SwarmBackend,
        agents: AgentClient,
        room_freed: Callable[[str], None],
        faults: RecordFaults,
        observe: Callable[[Outcome], None] | None = None,
        checkpoints: CheckpointDirs | None = None,
    ) -> None:
        self.store = store
        self.checkpoints = checkpoints  # where checkpointing jobs save (DESIGN 3.14)
        self.faults = faults
        self.observe = observe  # told of every outcome carried out (the metrics)
        self.records = records
        self.backend = backend
        self.agents = agents
        # a booking undone outside the scheduler: retry the queue, then give cuts back there
        self.room_freed = room_freed
        self.agent_urls: dict[str, str] = {}  # host id -> its agent, as the last sync found

    def carry_out(self, outcome: Outcome) -> None:
        if self.observe is not None:
            self.observe(outcome)
        each = self.faults.attempt
        for decision in outcome.applied:
            taken = Preempted if decision.pass_ is Pass.PREEMPT else Killed
            for victim in decision.kills:
                event = taken(f"{taken.kind.value} on {decision.host} to make room for "
                              f"{decision.request.id}", host=decision.host,
                              by=decision.request.id)
                each("task", victim, partial(self.mark_killed, victim, event))
            for victim in decision.suspends:
                each("task", victim, partial(self.suspend, victim, decision))
            for cut in decision.cuts:
                each("task", cut.task, partial(self.cut, cut, decision.request.id))
            each("request", decision.request.id, partial(self.start, decision))
        for task in outcome.resumed:
            each("task", task.id, partial(self.resume, task))
        for restore in outcome.restored:
            each("task", restore.task, partial(self.restore, restore))
        for entry in outcome.queued:  # it will start again with its original resources
            each("request", entry.request.id, partial(
                self.records.update,
                entry.request.id,
                Queued(f"waiting in the pending queue ({entry.reason})",
                       queue_reason=entry.reason.value),
                status=RequestStatus.PENDING,
                host=None,
                service_id=None,
                cpu_shares=entry.request.cpu_shares,
                memory=entry.request.memory,
                cut_received="0",
            ))
        for refused in outcome.refused:
            each("request", refused.request.id, partial(
                self.records.update,
                refused.request.id,
                Rejected(refused.reason, policy=refused.policy or None),
                status=RequestStatus.REJECTED,
            ))

    def mark_killed(self, task_id: str, event: Killed | Preempted | HostLost) -> None:
        """A task was taken off its host (kill, or its host left): its service goes now, so a
        later placement never meets the old one (and nothing runs unbooked meanwhile)."""
        self.backend.remove(task_id)
        self.records.update(task_id, event, kills=self.records.kills_of(task_id) + 1)

    def suspend(self, task_id: str, decision: Decision) -> None:
        """Pause a victim on its host (DESIGN 3.14): it keeps its memory and place there."""
        host = decision.host or ""
        self._pause(task_id, Suspended(f"suspended on {host} to make room for "
                                       f"{decision.request.id}", host=host,
                                       by=decision.request.id))

    def resume(self, task: Task) -> None:
        """Unpause a suspended task where it stopped: its host's CPU room came back."""
        self._pause(task.id, Resumed(f"resumed on {task.host} with {task.cpu_shares} shares",
                                     host=task.host))

    def _pause(self, task_id: str, event: Suspended | Resumed) -> None:
        """Push a pause (``Suspended``) or an unpause (``Resumed``) to the agent of the task's
        host, and record it. The registry already books it: an agent that cannot take it now
        is told by its reconciliation later (applied False until then)."""
        host = event.host or ""
        try:
            self.agents.pause(host, self.agent_url(host), task_id,
                              paused=isinstance(event, Suspended))
        except GreenSwarmError as exc:
            event = replace(event, reason=f"{event.reason}; booked, not yet applied ({exc})",
                            applied=False)
        else:
            event = replace(event, applied=True)
        self.records.update(task_id, event)

    def start(self, decision: Decision) -> None:
        request_id, host = decision.request.id, decision.host or ""
        try:
            record = self.records.get(request_id)
        except NotFoundError:  # nothing to start: the booking holds no room for nothing
            self.store.end_task(request_id)
            self.room_freed(host)
            raise ConflictError(f"placed on {host} without a request record: nothing to "
                                "start, its booking undone") from None
        saves = self.checkpoints is not None and checkpointing(record.spec)
        try:
            checkpoint_dir = self.checkpoints.prepare(request_id) \
                if self.checkpoints is not None and saves else None
            service_id = self.backend.create(
                Placement(request_id, record.spec, host, decision.cpu_shares, decision.memory,
                          checkpoint_dir=checkpoint_dir)
            )
        except GreenSwarmError as exc:
            self.store.end_task(request_id)  # undo the booking: nothing runs
            self.records.update(
                request_id,
                StartFailed(f"could not start on {host}: {exc}", host=host),
                status=RequestStatus.FAILED,
                host=None,
                service_id=None,
            )
            self.room_freed(host)
            return
        # running, whether it ran before or not: its history and kill count say it was killed
        self.records.update(
            request_id,
            Placed(f"placed: {decision.reason}", pass_=decision.pass_,
                   policy=decision.policy or None, victims=decision.kills,
                   cuts=tuple(cut.task for cut in decision.cuts)),
            status=RequestStatus.RUNNING,
            host=host,
            service_id=service_id,
            cpu_shares=decision.cpu_shares,
            memory=decision.memory,
            cut_received=str(decision.cut_received),
        )
        if saves and record.kills > 0:  # placed again after a kill: from its last checkpoint
            self.records.update(request_id, CheckpointRestart(
                f"starts again on {host} from its last checkpoint in {MOUNT_TARGET}",
                host=host))

    def cut(self, cut: TaskCut, beneficiary: str) -> None:
        self._push(
            Cut(f"cut to {cut.cpu_shares} shares and {cut.memory} bytes (total cut "
                f"{cut.cut_received})", host=cut.host, by=beneficiary),
            cut.task, cut.cpu_shares, cut.memory, cut.cut_received,
            kept="; the node kept {memory} bytes (the task uses more than the target)",
        )

    def restore(self, restore: TaskRestore) -> None:
        """Push a cut given back to the node (raising memory is always allowed) and record
        what it applied; the registry books that."""
        self._push(
            Restored(f"cut given back: {restore.cpu_shares} shares and {restore.memory} bytes "
                     f"(total cut {restore.cut_received})", host=restore.host),
            restore.task, restore.cpu_shares, restore.memory, restore.cut_received,
            kept="; the node has {cpu_shares} shares and {memory} bytes",
        )

    def _push(
        self, event: Cut | Restored, task_id: str, cpu_shares: int, memory: int,
        cut_received: Fraction, *, kept: str,
    ) -> None:
        """Push a task's new CPU shares and memory to its node's agent (``event``'s host), and
        record what the node applied. Unreachable, it is booked, not yet applied: the agent's
        reconciliation applies the booking later. When the node kept more memory (never below
        the task's use plus a margin), the registry books what it kept and the event says so
        (``kept``, formatted with the ``cpu_shares`` and ``memory`` the node has)."""
        host = event.host or ""
        try:
            result = self.agents.cut(host, self.agent_url(host), task_id, cpu_shares, memory)
        except GreenSwarmError as exc:  # the agent's reconciliation applies the booking later
            self.records.update(
                task_id,
                replace(event, reason=f"{event.reason}; booked, not yet applied ({exc})",
                        applied=False),
                cpu_shares=cpu_shares,
                memory=memory,
                cut_received=str(cut_received),
            )
            return
        what = event.reason
        if (result.cpu_shares, result.memory) != (cpu_shares, memory):
            self.store.resize_task(task_id, result.cpu_shares, result.memory)
            what += kept.format(cpu_shares=result.cpu_shares, memory=result.memory)
        self.records.update(
            task_id,
            replace(event, reason=what, applied=True),
            cpu_shares=result.cpu_shares,
            memory=result.memory,
            cut_received=str(cut_received),
        )

    def resized(self, task: Task) -> None:
        """The node applied a booked cut later, maybe only in part (it never lowers memory
        below the task's use plus a margin), and the registry now books what it applied: the
        record says the same."""
        self.records.update(
            task.id,
            Cut(f"the node applied the cut: {task.cpu_shares} shares and {task.memory} bytes",
                host=task.host, applied=True),
            cpu_shares=task.cpu_shares,
            memory=task.memory,
            cut_received=str(task.cut_received),
        )

    def agent_url(self, host_id: str) -> str:
        url = self.agent_urls.get(host_id)
        if url is None:
            raise UnavailableError(f"no agent address known for host {host_id}")
        return url
