"""What the live replay sees, turned into MetricsRecorder calls (pure: no I/O).

The driver hands :class:`RecorderFeed` four kinds of observations, all stamped with wall-clock
epoch seconds; the feed converts every time to the trace's clock (``TraceClock``) and calls the
recorder (measure/recorder.py) as the simulator does:

* the answer to ``POST /requests`` (:meth:`RecorderFeed.on_answer`): ``on_submit`` at the send
  time, then ``on_decision`` with the decision's host, pass, cuts (amounts removed: the task's
  resources before minus after; the request's own cut included) and kills; when the request
  asked to queue and waits (``--queue-new``), ``on_queued`` instead, and ``on_decision`` when
  its history shows it placed, its delay running from the submission. ``decision_ms`` is
  the manager's own decision time, as its answer reports it (``decision_ms``: deciding and
  booking, Docker work excluded; the client's round trip when an answer lacks it),
  ``delay_ms`` the client's round trip of the POST; both are also kept in :class:`ReplayCounters`;
* request records with their history (:meth:`RecorderFeed.on_record`): new events are buffered
  and :meth:`RecorderFeed.flush` processes the events of every record in timestamp order
  (replay/history.py says how each is recognised):

  - a victim placed again: ``on_reschedule(placed=True)`` with the cuts its decision made
    (other tasks' ``cut`` events that no POST answer announced); a victim left waiting:
    ``on_reschedule(placed=False)``;
  - a kill that no POST answer announced (``killed ... to make room for <victim>`` of a
    victim's reschedule, or a host that left, or a kill on request): ``on_task_end(killed)``,
    which the recorder counts as a kill like one of a decision;
  - a job that ended: ``on_task_end(finished)`` with the makespan from its latest ``placed``
    event to its ``ended`` event, x K; failed: ``on_task_end(failed)``; exit code 137:
    ``on_oom_kill`` (a service whose container exited with 137 too; Swarm restarts that one,
    and it keeps running, but its recorded run ends there as in the simulator);
  - a service stopped by its client: ``on_task_end(stopped)``;
  - a cut given back (``restored``): ``on_restore``, and the task's resources are its new ones;
  - its container runs (``started``, where the manager reports it): ``on_started``, the
    measured allocation time (else the recorder charges its configured one);
* ``GET /hosts`` (:meth:`RecorderFeed.on_hosts`): ``on_host_state`` with the monitor's
  ``cpu_util`` and ``memory_util``, the task count and the allocations, per host;
* client rounds of the services (:meth:`RecorderFeed.on_round`): ``on_service_response``.

The feed also tells the driver what to do next: which services are due to be stopped
(:meth:`RecorderFeed.due_stops`), which requests still change (:meth:`RecorderFeed.active_ids`)
and where each running service's clients must connect (:meth:`RecorderFeed.service_targets`).
Nothing after the end of the run (``end_trace_s``) reaches the recorder.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from domain import events as ev
from domain.lifecycle import EndStatus
from domain.model import TaskType
from measure.recorder import Cut, MetricsRecorder
from measure.stats import Stats
from replay.history import is_oom
from replay.plan import Submission, TraceClock
from replay.values import ReplayCounters, RoundResult, ServiceTarget
from scheduler import registry

FINAL_STATUSES = frozenset(
    {"completed", "failed", "rejected", "refused-at-admission", "stopped"})
RUNNING_STATUSES = frozenset({"running"})


@dataclass
class _Tracked:
    """The feed's view of one submitted request (internal, mutable)."""

    sub: Submission
    cpu: int
    memory: int
    seen: int = 0  # history events already taken
    status: str = "pending"
    host: str | None = None
    placed_wall_s: float | None = None
    answer_placed: bool = False  # the answer reported this placement; its event is known
    in_run: bool = False  # the recorder holds a running run for it
    awaiting: bool = False  # a killed victim not placed again yet
    queued: bool = False  # a new request waiting for its first place (it asked to queue)
    expected_cuts: int = 0  # cut events announced by POST answers, not seen yet
    expected_kills: int = 0
    stop_sent: bool = False

    @property
    def final(self) -> bool:
        return self.status in FINAL_STATUSES


def recorder_host_ids(hosts: Sequence[Mapping[str, Any]]) -> dict[str, str]:
    """Live host id -> the name the recorder (and the report) uses: its address when every
    host has a distinct one (``10.123.0.11``), else the id."""
    addresses = [str(h.get("address") or "") for h in hosts]
    readable = all(addresses) and len(set(addresses)) == len(addresses)
    return {str(h["id"]): (a if readable else str(h["id"])) for h, a in zip(hosts, addresses,
                                                                           strict=True)}


class RecorderFeed:
    """See the module docstring. One per replay; single-threaded."""

    def __init__(
        self,
        recorder: MetricsRecorder,
        clock: TraceClock,
        host_names: Mapping[str, str],
        *,
        policy: str,
        end_trace_s: float,
    ) -> None:
        self.recorder = recorder
        self.clock = clock
        self.host_names = dict(host_names)
        self.policy = policy
        self.end_trace_s = end_trace_s
        self._tracked: dict[str, _Tracked] = {}
        self._buffer: list[tuple[float, int, str, ev.Event]] = []
        self._order = 0
        self._unattributed: list[Cut] = []
        self._records: dict[str, Mapping[str, Any]] = {}
        self._addresses: dict[str, str] = {}
        self._unknown_hosts: set[str] = set()
        self._rtt_ms: list[float] = []
        self._server_ms: list[float] = []
        self._n: dict[str, int] = {}

    # ------------------------------------------------------------------ helpers

    def _count(self, name: str, by: int = 1) -> None:
        self._n[name] = self._n.get(name, 0) + by

    def _t(self, wall_s: float) -> float:
        return self.clock.trace_s(wall_s)

    def _in_window(self, wall_s: float) -> bool:
        return self._t(wall_s) <= self.end_trace_s

    def _host(self, live_id: str | None) -> str | None:
        if live_id is None:
            return None
        name = self.host_names.get(live_id)
        if name is None:
            self._unknown_hosts.add(live_id)
        return name

    def tracked(self, request_id: str) -> _Tracked | None:
        return self._tracked.get(request_id)

    # ------------------------------------------------------------------ submissions

    def on_answer(
        self, sub: Submission, sent_wall_s: float, received_wall_s: float,
        answer: Mapping[str, Any],
    ) -> None:
        """The 201 answer of ``POST /requests``: the request's record and the decision."""
        request = sub.request
        record = answer["request"]
        decision = answer.get("decision")
        if decision is None:
            raise ValueError(f"{sub.request_id}: the answer carries no decision (the 'swarm' "
                             "policy hands requests to Swarm; the replay does not follow it)")
        tracked = _Tracked(sub, request.cpu_shares, request.memory_bytes)
        self._tracked[sub.request_id] = tracked
        self._count("submitted")
        rtt_ms = max(0.0, (received_wall_s - sent_wall_s) * 1000.0)
        given = decision.get("decision_ms")  # the scheduler's own time (manager/api.py)
        server_ms = float(given) if isinstance(given, int | float) else None
        self._rtt_ms.append(rtt_ms)
        if server_ms is not None:
            self._server_ms.append(server_ms)
        t_sent = self._t(sent_wall_s)
        t_answer = self._t(received_wall_s)
        self.recorder.on_submit(
            t_sent, sub.request_id, request.request_class, request.type,
            workload=request.workload, expected_makespan_s=sub.expected_makespan_s,
            probe=sub.probe, cpu_shares=request.cpu_shares,
        )
        placed = bool(decision.get("placed"))
        cuts: list[Cut] = []
        kills: list[str] = []
        host_id = decision.get("host") if placed else None
        if placed:
            cuts, kills = self._answer_placed(tracked, decision, received_wall_s)
        elif record.get("status") == "pending":  # it asked to queue, and waits
            if not sub.probe:
                self._count("queued")
            tracked.queued = True
            if t_answer <= self.end_trace_s:
                self.recorder.on_queued(
                    t_answer, sub.request_id,
                    decision_ms=server_ms if server_ms is not None else rtt_ms,
                )
            else:
                self._count("events_after_end")
            self.on_record(record)
            return
        else:
            self._count("rejected")
        if t_answer <= self.end_trace_s:
            self.recorder.on_decision(
                t_answer, sub.request_id, request.request_class, request.type, placed,
                decision_ms=server_ms if server_ms is not None else rtt_ms,
                pass_name=self._pass_name(decision.get("pass")) if placed else None,
                host_id=self._host(host_id), cuts=cuts, kills=kills, delay_ms=rtt_ms,
            )
        else:
            self._count("events_after_end")
        self.on_record(record)

    def _answer_placed(
        self, tracked: _Tracked, decision: Mapping[str, Any], received_wall_s: float
    ) -> tuple[list[Cut], list[str]]:
        """A placing answer: the request runs (maybe cut), and the tasks it cut and killed
        are followed; returns the cuts and kills as the recorder counts them."""
        self._count("placed")
        sub, request = tracked.sub, tracked.sub.request
        cuts: list[Cut] = []
        own = decision.get("request") or {}
        cpu = int(own.get("cpu_shares", request.cpu_shares))
        memory = int(own.get("memory", request.memory_bytes))
        if cpu < request.cpu_shares or memory < request.memory_bytes:
            cuts.append(Cut(sub.request_id, request.cpu_shares - cpu,
                            request.memory_bytes - memory))
        tracked.cpu, tracked.memory = cpu, memory
        tracked.host = decision.get("host")
        tracked.answer_placed = True
        tracked.in_run = True
        tracked.placed_wall_s = received_wall_s  # refined by its 'placed' event
        for cut in decision.get("cuts", []):
            cuts.append(self._answer_cut(cut))
        kills = [str(victim) for victim in decision.get("kills", [])]
        for victim in kills:
            self._count("kills_from_answers")
            other = self._tracked.get(victim)
            if other is not None:
                other.expected_kills += 1
                other.awaiting = True
                other.in_run = False
                other.host = None
                other.placed_wall_s = None
        return cuts, kills

    def _answer_cut(self, cut: Mapping[str, Any]) -> Cut:
        task_id = str(cut["task"])
        cpu, memory = int(cut["cpu_shares"]), int(cut["memory"])
        self._count("cuts_from_answers")
        other = self._tracked.get(task_id)
        if other is None:
            return Cut(task_id, 0, 0)
        removed = Cut(task_id, max(0, other.cpu - cpu), max(0, other.memory - memory))
        other.cpu, other.memory = cpu, memory
        other.expected_cuts += 1
        return removed

    def on_invalid(self, sub: Submission, sent_wall_s: float, received_wall_s: float) -> None:
        """The manager refused the request as invalid (HTTP 400: e.g. larger than any host):
        no host can ever take it, so it counts as a failed allocation."""
        request = sub.request
        self._count("submitted")
        self._count("refused_invalid")
        rtt_ms = max(0.0, (received_wall_s - sent_wall_s) * 1000.0)
        self._rtt_ms.append(rtt_ms)
        t_sent, t_answer = self._t(sent_wall_s), self._t(received_wall_s)
        self.recorder.on_submit(t_sent, sub.request_id, request.request_class, request.type,
                                workload=request.workload, probe=sub.probe,
                                cpu_shares=request.cpu_shares)
        if t_answer <= self.end_trace_s:
            self.recorder.on_decision(t_answer, sub.request_id, request.request_class,
                                      request.type, False, decision_ms=rtt_ms, delay_ms=rtt_ms)
        tracked = _Tracked(sub, request.cpu_shares, request.memory_bytes, status="rejected")
        self._tracked[sub.request_id] = tracked

    def on_refused_at_admission(self, sub: Submission, sent_wall_s: float,
                                received_wall_s: float) -> None:
        """The manager did not admit the request (503 naming the admission, DESIGN 3.13): no
        record is made; the recorder counts it as the simulator does (a failed allocation, an
        SLO miss, refused at admission)."""
        request = sub.request
        self._count("submitted")
        self._count("refused_at_admission")
        self._rtt_ms.append(max(0.0, (received_wall_s - sent_wall_s) * 1000.0))
        t_sent, t_answer = self._t(sent_wall_s), self._t(received_wall_s)
        self.recorder.on_submit(t_sent, sub.request_id, request.request_class, request.type,
                                workload=request.workload, probe=sub.probe,
                                cpu_shares=request.cpu_shares)
        self.recorder.on_admission_refused(min(t_answer, self.end_trace_s), sub.request_id)
        self._tracked[sub.request_id] = _Tracked(sub, request.cpu_shares, request.memory_bytes,
                                                 status="refused-at-admission")

    def _pass_name(self, raw: object) -> str:
        """The pass of a policy that has passes (scheduler.registry); a placement of any other
        policy, or of a run whose label names no policy, is named after the label (as the
        simulator names a policy without passes)."""
        plugin = registry.find(self.policy)
        if plugin is None or raw not in plugin.passes:
            return self.policy
        return str(raw)

    # ------------------------------------------------------------------ records

    def on_record(self, record: Mapping[str, Any]) -> None:
        """A request's record with its history; new events wait for :meth:`flush`."""
        tracked = self._tracked.get(str(record.get("id")))
        if tracked is None:
            return
        self._records[tracked.sub.request_id] = record
        events = record.get("history", [])
        for raw in events[tracked.seen:]:
            event = ev.event_from_json(raw)
            self._order += 1
            self._buffer.append((_wall_s(event), self._order, tracked.sub.request_id, event))
        tracked.seen = max(tracked.seen, len(events))

    def flush(self) -> None:
        """Process every buffered history event, oldest first."""
        buffered = sorted(self._buffer, key=lambda item: (item[0], item[1]))
        self._buffer.clear()
        for _, _, request_id, event in buffered:
            self._count("events")
            self._apply(self._tracked[request_id], event)

    def _apply(self, tracked: _Tracked, event: ev.Event) -> None:
        status = ev.status_after(event)
        if status is not None:
            tracked.status = status
        record = self._in_window(_wall_s(event))
        if not record and event.kind not in (ev.EventKind.SUBMITTED, ev.EventKind.OTHER):
            self._count("events_after_end")
        match event:
            case ev.Started():
                self._count("starts")
                if record and tracked.in_run:
                    self.recorder.on_started(self._t(_wall_s(event)), tracked.sub.request_id)
            case ev.Placed():
                self._on_placed(tracked, event, record)
            case ev.Cut():
                self._on_cut(tracked, event, record)
            case ev.Restored():
                self._on_restored(tracked, event, record)
            case ev.Killed() | ev.Preempted() | ev.HostLost():
                self._on_killed(tracked, event, record)
            case ev.Queued():
                self._on_waiting(tracked, event, record)
            case ev.Ended():
                self._on_ended(tracked, event, record)
            case ev.Exited():
                self._on_exited(tracked, event, record)
            case ev.Stopped():
                self._on_stopped(tracked, event, record)
            case ev.StartFailed() | ev.Vanished():
                self._on_lost(tracked, event, record)
            case ev.Suspended() | ev.Resumed():
                # paused on its host, or running again (DESIGN 3.14): counted, and the pause
                # is time not running, as in the simulator
                if record and tracked.in_run:
                    pause = (self.recorder.on_resumed if isinstance(event, ev.Resumed)
                             else self.recorder.on_suspended)
                    pause(self._t(_wall_s(event)), tracked.sub.request_id)

    def _on_placed(self, tracked: _Tracked, event: ev.Placed, record: bool) -> None:
        if event.host is not None:
            tracked.host = event.host
        if event.cpu_shares is not None:
            tracked.cpu = event.cpu_shares
        if event.memory is not None:
            tracked.memory = event.memory
        tracked.placed_wall_s = _wall_s(event)
        tracked.stop_sent = False
        if tracked.answer_placed:  # the placement its POST answer reported
            tracked.answer_placed = False
            return
        if tracked.queued:  # a queued new request's first place: its decision
            self._on_first_place(tracked, event, record)
            return
        if not tracked.awaiting:
            return  # nothing the recorder needs (e.g. a repeated event)
        tracked.awaiting = False
        tracked.in_run = True
        self._count("reschedules_placed")
        cuts, self._unattributed = self._unattributed, []
        if record:
            self.recorder.on_reschedule(
                self._t(_wall_s(event)), tracked.sub.request_id, True,
                pass_name=self._pass_name(event.pass_ or event.policy),
                host_id=self._host(tracked.host),
                cuts=cuts,
            )

    def _on_first_place(self, tracked: _Tracked, event: ev.Placed, record: bool) -> None:
        """A retry placed a queued new request: the decision the recorder waits for, its delay
        from the submission (the decision's own time is not reported: a retry's). Kills that
        decision made come from the victims' histories, as a victim's reschedule's do."""
        tracked.queued = False
        tracked.in_run = True
        if not tracked.sub.probe:
            self._count("queued_placed")
        cuts, self._unattributed = self._unattributed, []
        request = tracked.sub.request
        if record:
            self.recorder.on_decision(
                self._t(_wall_s(event)), tracked.sub.request_id, request.request_class,
                request.type, True, decision_ms=None,
                pass_name=self._pass_name(event.pass_ or event.policy),
                host_id=self._host(tracked.host),
                cuts=cuts,
            )

    def _on_cut(self, tracked: _Tracked, event: ev.Cut, record: bool) -> None:
        cpu = event.cpu_shares if event.cpu_shares is not None else tracked.cpu
        memory = event.memory if event.memory is not None else tracked.memory
        if tracked.expected_cuts > 0:  # announced by a POST answer (booked amounts counted)
            tracked.expected_cuts -= 1
        else:
            self._count("cuts_from_history")
            self._unattributed.append(Cut(tracked.sub.request_id, max(0, tracked.cpu - cpu),
                                          max(0, tracked.memory - memory)))
        tracked.cpu, tracked.memory = cpu, memory

    def _on_restored(self, tracked: _Tracked, event: ev.Restored, record: bool) -> None:
        """A cut given back (DESIGN 3.8): the task's resources grow again (a later cut is
        counted from them) and the recorder counts it."""
        if event.cpu_shares is not None:
            tracked.cpu = event.cpu_shares
        if event.memory is not None:
            tracked.memory = event.memory
        if record:
            self.recorder.on_restore(self._t(_wall_s(event)), tracked.sub.request_id,
                                     tracked.cpu, tracked.memory)

    def _on_killed(self, tracked: _Tracked, event: ev.Killed | ev.Preempted | ev.HostLost,
                   record: bool) -> None:
        was_running = tracked.in_run
        tracked.awaiting = True
        tracked.in_run = False
        tracked.host = None
        tracked.placed_wall_s = None
        tracked.cpu, tracked.memory = tracked.sub.request.cpu_shares, (
            tracked.sub.request.memory_bytes)
        if tracked.expected_kills > 0:  # reported with the decision of a POST answer
            tracked.expected_kills -= 1
            return
        # A victim's reschedule made room (the request it made room for is named, ``by``), or a
        # kill no decision made (host left, kill on request): the recorder counts a 'killed'
        # end as a kill.
        by = None if isinstance(event, ev.HostLost) else event.by
        self._count("kills_from_history" if by in self._tracked else "kills_unreported")
        if record and was_running:
            self.recorder.on_task_end(self._t(_wall_s(event)), tracked.sub.request_id,
                                      EndStatus.KILLED)

    def _on_waiting(self, tracked: _Tracked, event: ev.Queued, record: bool) -> None:
        if not tracked.awaiting:
            return
        self._count("reschedules_waiting")
        tracked.host = None
        if record:
            self.recorder.on_reschedule(self._t(_wall_s(event)), tracked.sub.request_id, False)

    def _on_ended(self, tracked: _Tracked, event: ev.Ended, record: bool) -> None:
        was_running = tracked.in_run
        tracked.in_run = False
        request_id = tracked.sub.request_id
        wall_s = _wall_s(event)
        t = self._t(wall_s)
        if is_oom(event):
            self._count("oom_jobs" if tracked.sub.request.type is TaskType.JOB
                        else "oom_services")
            if record and was_running:
                self._oom(t, tracked)
            return
        status = event.status or ""
        if status == "completed":
            self._count("jobs_completed")
            if record and was_running:
                placed = tracked.placed_wall_s if tracked.placed_wall_s is not None else wall_s
                self.recorder.on_task_end(
                    t, request_id, EndStatus.FINISHED,
                    makespan_s=max(0.0, (wall_s - placed) * self.clock.speedup),
                    expected_makespan_s=tracked.sub.expected_makespan_s,
                )
        elif status == "failed":
            self._count("jobs_failed")
            if record and was_running:
                self.recorder.on_task_end(t, request_id, EndStatus.FAILED)
        elif record and was_running:
            self.recorder.on_task_end(t, request_id, EndStatus.STOPPED)

    def _oom(self, t: float, tracked: _Tracked) -> None:
        host = self._host(tracked.host)
        if host is not None:
            self.recorder.on_oom_kill(t, host, tracked.sub.request_id)
        else:
            self.recorder.on_task_end(t, tracked.sub.request_id, EndStatus.OOM)

    def _on_exited(self, tracked: _Tracked, event: ev.Exited, record: bool) -> None:
        if not is_oom(event):
            self._count("service_exits")
            return
        self._count("oom_services")
        if tracked.in_run:  # the recorded run ends here; Swarm restarts the container
            tracked.in_run = False
            if record:
                self._oom(self._t(_wall_s(event)), tracked)

    def _on_stopped(self, tracked: _Tracked, event: ev.Stopped, record: bool) -> None:
        was_running = tracked.in_run
        tracked.in_run = False
        if not record:
            return
        self._count("services_stopped")
        if was_running:
            self.recorder.on_task_end(self._t(_wall_s(event)), tracked.sub.request_id,
                                      EndStatus.STOPPED)

    def _on_lost(self, tracked: _Tracked, event: ev.StartFailed | ev.Vanished,
                 record: bool) -> None:
        was_running = tracked.in_run
        tracked.in_run = False
        self._count("start_failures" if isinstance(event, ev.StartFailed) else "vanished")
        if record and was_running:
            self.recorder.on_task_end(self._t(_wall_s(event)), tracked.sub.request_id,
                                      EndStatus.FAILED)

    # ------------------------------------------------------------------ hosts and rounds

    def on_hosts(self, wall_s: float, hosts: Iterable[Mapping[str, Any]]) -> None:
        """One ``GET /hosts``: every known host's state from now on (monitor's numbers)."""
        t = min(self._t(wall_s), self.end_trace_s)
        for host in hosts:
            live_id = str(host["id"])
            if host.get("address"):
                self._addresses[live_id] = str(host["address"])
            name = self._host(live_id)
            if name is None:
                continue
            self.recorder.on_host_state(
                t, name,
                cpu_util=_unit(host.get("cpu_util")),
                memory_util=_unit(host.get("memory_util")),
                task_count=int(host.get("task_count", 0)),
                cpu_allocated_shares=float(host.get("cpu_allocated", 0)),
                memory_allocated_bytes=float(host.get("memory_allocated", 0)),
            )

    def on_round(self, result: RoundResult) -> None:
        if not result.ready:
            self._count("rounds_not_ready")
            return
        if not result.ok:
            self._count("rounds_failed")
            return
        self._count("rounds_ok")
        tracked = self._tracked.get(result.request_id)
        if tracked is None or not tracked.in_run or not self._in_window(result.at_wall_s):
            self._count("rounds_unrecorded")
            return
        self.recorder.on_service_response(self._t(result.at_wall_s), result.request_id,
                                          result.rate, result.response_ms)

    # ------------------------------------------------------------------ what to do next

    def due_stops(self, now_wall_s: float) -> list[str]:
        """Running services whose client time is over (not asked to stop yet)."""
        due = []
        for tracked in self._tracked.values():
            if (tracked.sub.is_service and not tracked.final and not tracked.awaiting
                    and not tracked.stop_sent and tracked.placed_wall_s is not None
                    and tracked.sub.stop_due_wall_s(tracked.placed_wall_s) <= now_wall_s):
                due.append(tracked.sub.request_id)
        return due

    def mark_stop_sent(self, request_id: str) -> None:
        self._tracked[request_id].stop_sent = True

    def active_ids(self) -> list[str]:
        """Requests whose record may still change (not in a final status)."""
        return [rid for rid, tracked in self._tracked.items() if not tracked.final]

    def service_targets(self) -> list[ServiceTarget]:
        targets = []
        for tracked in self._tracked.values():
            sub = tracked.sub
            rate = sub.request.request_rate or 0
            if (not sub.is_service or sub.port is None or rate <= 0 or tracked.final
                    or tracked.awaiting or tracked.stop_sent
                    or tracked.status not in RUNNING_STATUSES or tracked.host is None):
                continue
            address = self._addresses.get(tracked.host)
            if address:
                targets.append(ServiceTarget(sub.request_id, sub.request.workload, rate,
                                             address, sub.port, sub.data_keys))
        return targets

    def records(self) -> list[Mapping[str, Any]]:
        """The latest record (with its history) of every request, in submission order."""
        return [self._records[rid] for rid in self._tracked if rid in self._records]

    def counters(self) -> ReplayCounters:
        n = self._n.get
        return ReplayCounters(
            submitted=n("submitted", 0),
            refused_invalid=n("refused_invalid", 0),
            refused_at_admission=n("refused_at_admission", 0),
            placed=n("placed", 0),
            rejected=n("rejected", 0),
            queued=n("queued", 0),
            queued_placed=n("queued_placed", 0),
            client_rtt_ms=Stats.of(self._rtt_ms),
            server_decision_ms=Stats.of(self._server_ms),
            reschedules_placed=n("reschedules_placed", 0),
            reschedules_waiting=n("reschedules_waiting", 0),
            kills_from_answers=n("kills_from_answers", 0),
            kills_from_history=n("kills_from_history", 0),
            kills_unreported=n("kills_unreported", 0),
            cuts_from_answers=n("cuts_from_answers", 0),
            cuts_from_history=n("cuts_from_history", 0),
            cuts_unattributed=len(self._unattributed),
            jobs_completed=n("jobs_completed", 0),
            jobs_failed=n("jobs_failed", 0),
            oom_jobs=n("oom_jobs", 0),
            oom_services=n("oom_services", 0),
            service_exits=n("service_exits", 0),
            services_stopped=n("services_stopped", 0),
            start_failures=n("start_failures", 0),
            vanished=n("vanished", 0),
            rounds_ok=n("rounds_ok", 0),
            rounds_failed=n("rounds_failed", 0),
            rounds_not_ready=n("rounds_not_ready", 0),
            rounds_unrecorded=n("rounds_unrecorded", 0),
            events=n("events", 0),
            events_after_end=n("events_after_end", 0),
            unknown_hosts=tuple(sorted(self._unknown_hosts)),
            starts=n("starts", 0),
        )


def _unit(value: object) -> float:
    number = float(value) if isinstance(value, int | float) else 0.0
    return min(1.0, max(0.0, number)) if math.isfinite(number) else 0.0


def _wall_s(event: ev.Event) -> float:
    """When the event happened (epoch seconds; an undated one at 0)."""
    return event.t if event.t is not None else 0.0
