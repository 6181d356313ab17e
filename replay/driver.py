"""The live replay's I/O loop: submit, stop, poll, feed the recorder, clean up.

One thread drives everything against the manager's REST API (POST/DELETE /requests,
GET /requests/{id}, GET /hosts, GET /healthz); the services' clients run on threads of their
own (replay/clients.py) and hand their rounds over through a queue. Every wait is
bounded: HTTP calls have timeouts, a manager that does not answer for ``unreachable_s`` ends
the replay with an error, and the clean-up (stopping every request the replay submitted and
every client) runs whatever happened.
"""

from __future__ import annotations

import queue
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TextIO

from client.manager import ManagerClient
from domain.energy import PowerModel
from domain.errors import (
    AuthError,
    ConflictError,
    GreenSwarmError,
    NotFoundError,
    UnavailableError,
)
from domain.model import HostSpec
from domain.slo import SloTable
from measure.recorder import MetricsRecorder
from measure.results import PolicyResult
from measure.stats import Stats
from replay.clients import ServiceClient
from replay.feed import RecorderFeed, recorder_host_ids
from replay.plan import Submission, TraceClock, round_interval_wall_s
from replay.values import ReplayCounters, RoundResult
from workloads.trace import TraceHeader

REPLAY_FILE = "replay.json"
# every request's record with its history (requests.jsonl is the service levels, one line each)
RECORDS_FILE = "histories.jsonl"


@dataclass(frozen=True)
class ReplayOptions:
    policy_label: str
    speedup: float
    duration_s: float  # trace seconds
    power_model: PowerModel | None = None
    hosts_poll_s: float = 1.0  # wall seconds between GET /hosts
    records_poll_s: float = 1.0  # wall seconds between polls of the active requests
    wait_hosts_s: float = 60.0
    unreachable_s: float = 30.0  # give up when the manager does not answer this long
    max_submit_errors: int = 5  # consecutive failed POSTs before giving up
    client_timeout_s: float = 5.0
    progress: TextIO | None = None
    progress_tty: bool = False
    # service levels (DESIGN 3.10): the objectives, and the allocation time charged where the
    # manager reports no container start
    slo: SloTable | None = None
    allocation_s: float = 0.0


@dataclass
class _Run:
    """Mutable bookkeeping of one replay (driver side)."""

    lags_s: list[float] = field(default_factory=list)
    submit_errors: int = 0
    consecutive_submit_errors: int = 0
    poll_errors: int = 0
    stop_errors: int = 0
    last_ok_wall_s: float = 0.0
    unknown_ids: set[str] = field(default_factory=set)  # POSTs whose outcome is unknown
    warnings: list[str] = field(default_factory=list)
    cleanup_stopped: int = 0
    cleanup_errors: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class ReplayReport:
    """What replay.json holds besides the recorder's result."""

    policy_label: str
    manager_policy: str
    manager_url: str
    speedup: float
    duration_s: float
    wall_s: float
    submissions_planned: int
    hosts: Mapping[str, str]  # recorder name -> live host id
    submit_lag_s: Stats
    submit_errors: int
    poll_errors: int
    stop_errors: int
    cleanup_stopped: int
    cleanup_errors: tuple[str, ...]
    warnings: tuple[str, ...]
    counters: ReplayCounters

    def to_json(self) -> dict[str, Any]:
        return {
            "format": "greenswarm-replay",
            "version": 1,
            "policy_label": self.policy_label,
            "manager_policy": self.manager_policy,
            "manager_url": self.manager_url,
            "speedup": self.speedup,
            "duration_s": self.duration_s,
            "wall_s": self.wall_s,
            "submissions_planned": self.submissions_planned,
            "hosts": dict(self.hosts),
            "submit_lag_s": self.submit_lag_s.to_json(),
            "submit_errors": self.submit_errors,
            "poll_errors": self.poll_errors,
            "stop_errors": self.stop_errors,
            "cleanup_stopped": self.cleanup_stopped,
            "cleanup_errors": list(self.cleanup_errors),
            "warnings": list(self.warnings),
            "counters": self.counters.to_json(),
            "notes": {
                "time": "recorder times are trace seconds = wall seconds since the start x "
                        "speedup; response times are wall milliseconds",
                "decision_ms": "the scheduler's own time to decide and book, as POST "
                               "/requests reports it (Docker work excluded)",
                "scheduling_delay_ms": "client round trip of POST /requests",
                "oom": "exit code 137 in a request's history (job ended, or service "
                       "container exited)",
                "makespans": "latest 'placed' event to 'ended' event x speedup; expected = "
                             "MAKESPAN_S (whole wall seconds) x speedup",
                "host_state": "GET /hosts: the monitors' cpu_util and memory_util",
            },
        }


def wait_for_hosts(api: ManagerClient, expected: int, timeout_s: float,
                   sleep: Callable[[float], None] = time.sleep) -> list[dict[str, Any]]:
    """The manager answers, is healthy, and lists ``expected`` hosts (or as many as it has
    when the time is up, at least one)."""
    deadline = time.monotonic() + timeout_s
    last_error = ""
    hosts: list[dict[str, Any]] = []
    while True:
        try:
            health = api.healthz()
            if health.get("status") == "ok":
                hosts = api.hosts()
                if len(hosts) >= expected:
                    return hosts
                last_error = f"{len(hosts)} of {expected} hosts known"
            else:
                last_error = f"/healthz says {health}"
        except UnavailableError as exc:
            last_error = str(exc)
        if time.monotonic() >= deadline:
            if hosts:
                return hosts
            raise UnavailableError(f"the manager at {api.url} is not ready after "
                                   f"{timeout_s:.0f} s: {last_error}")
        sleep(1.0)


class Replay:
    """One policy run: see the module docstring."""

    def __init__(self, api: ManagerClient, header: TraceHeader, plan: Sequence[Submission],
                 options: ReplayOptions) -> None:
        self.api = api
        self.header = header
        self.plan = list(plan)
        self.options = options
        self.run_state = _Run()
        self.clients: dict[str, ServiceClient] = {}
        self.rounds: queue.SimpleQueue[RoundResult] = queue.SimpleQueue()
        self.manager_policy = ""
        self.records: list[Mapping[str, Any]] = []
        self._last_progress = 0.0
        self._next = 0

    # ------------------------------------------------------------------ set-up

    def _prepare(self) -> tuple[RecorderFeed, TraceClock, dict[str, str]]:
        options = self.options
        health = self.api.healthz()
        self.manager_policy = str(health.get("policy", ""))
        if self.manager_policy == "swarm":
            raise GreenSwarmError("the manager runs the 'swarm' policy (Swarm's own scheduler "
                                  "decides later): the replay follows decisions and does not "
                                  "support it")
        hosts = wait_for_hosts(self.api, len(self.header.hosts), options.wait_hosts_s)
        self._check_cluster(hosts)
        names = recorder_host_ids(hosts)
        specs = tuple(sorted((HostSpec(names[str(h["id"])], int(h["cpu_capacity"]),
                                       int(h["memory_capacity"])) for h in hosts),
                             key=lambda spec: spec.id))
        busy = [names[str(h["id"])] for h in hosts if int(h.get("task_count", 0))]
        if busy:
            self._warn(f"hosts already run tasks before the replay: {', '.join(busy)}")
        info = {
            "source": self.header.source,
            "seed": self.header.seed,
            "duration_s": options.duration_s,
            "hosts": len(specs),
            "notes": f"live replay on {self.api.url} (policy {self.manager_policy}), speedup "
                     f"{options.speedup:g}; {self.header.notes}",
        }
        recorder = MetricsRecorder(
            options.policy_label, specs, power_model=options.power_model,
            duration_hint_s=options.duration_s, trace_info=info, slo=options.slo,
            allocation_s=options.allocation_s,
        )
        start = time.time()
        clock = TraceClock(start, options.speedup)
        feed = RecorderFeed(recorder, clock, names, policy=self.manager_policy,
                            end_trace_s=options.duration_s)
        feed.on_hosts(start, hosts)
        self.run_state.last_ok_wall_s = start
        return feed, clock, {v: k for k, v in names.items()}

    def _check_cluster(self, hosts: Sequence[Mapping[str, Any]]) -> None:
        wanted = sorted((h.cpu_capacity, h.memory_capacity)
                        for h in self.header.hosts)
        live = sorted((int(h["cpu_capacity"]), int(h["memory_capacity"])) for h in hosts)
        if wanted != live:
            self._warn(f"the trace was made for {len(wanted)} hosts {wanted}, the manager has "
                       f"{len(live)} {live}: the replay runs on the live cluster")

    def _warn(self, text: str) -> None:
        self.run_state.warnings.append(text)
        sys.stderr.write(f"replay: warning: {text}\n")

    # ------------------------------------------------------------------ the loop

    def run(self) -> tuple[PolicyResult, ReplayReport]:
        feed, clock, hosts = self._prepare()
        options = self.options
        end_wall = clock.wall_s(options.duration_s)
        next_hosts = next_records = clock.start_wall_s
        result: PolicyResult | None = None
        try:
            while True:
                now = time.time()
                if now >= end_wall:
                    break
                self._submit_due(feed, clock, end_wall)
                self._stop_due(feed)
                now = time.time()
                if now >= next_records:
                    self._poll_records(feed)
                    next_records = now + options.records_poll_s
                if now >= next_hosts:
                    self._poll_hosts(feed)
                    next_hosts = now + options.hosts_poll_s
                feed.flush()
                self._drain_rounds(feed)
                self._sync_clients(feed)
                self._check_reachable()
                self._progress(feed, clock, end_wall)
                self._sleep(clock, end_wall, min(next_hosts, next_records))
            # The end: what happened up to it, then the result on the trace's clock.
            self._poll_records(feed)
            self._poll_hosts(feed)
            feed.flush()
            self._drain_rounds(feed)
            result = feed.recorder.finish(options.duration_s)
            self.records = feed.records()  # as they were at the end, before the clean-up
            self._progress(feed, clock, end_wall, final=True)
        finally:
            self._cleanup(feed)
        assert result is not None  # an exception above left through the finally clause
        report = ReplayReport(
            policy_label=options.policy_label,
            manager_policy=self.manager_policy,
            manager_url=self.api.url,
            speedup=options.speedup,
            duration_s=options.duration_s,
            wall_s=time.time() - clock.start_wall_s,
            submissions_planned=len(self.plan),
            hosts=hosts,
            submit_lag_s=Stats.of(self.run_state.lags_s),
            submit_errors=self.run_state.submit_errors,
            poll_errors=self.run_state.poll_errors,
            stop_errors=self.run_state.stop_errors,
            cleanup_stopped=self.run_state.cleanup_stopped,
            cleanup_errors=tuple(self.run_state.cleanup_errors),
            warnings=tuple(self.run_state.warnings),
            counters=feed.counters(),
        )
        return result, report

    def _sleep(self, clock: TraceClock, end_wall: float, next_poll: float) -> None:
        wake = min(end_wall, next_poll, time.time() + 0.2)
        if self._next < len(self.plan):
            wake = min(wake, clock.start_wall_s + self.plan[self._next].offset_wall_s)
        time.sleep(max(0.005, wake - time.time()))

    def _submit_due(self, feed: RecorderFeed, clock: TraceClock, end_wall: float) -> None:
        run = self.run_state
        while self._next < len(self.plan):
            sub = self.plan[self._next]
            planned = clock.start_wall_s + sub.offset_wall_s
            sent = time.time()
            if planned > sent or sent >= end_wall:
                return
            self._next += 1
            run.lags_s.append(sent - planned)
            try:
                status, answer = self.api.submit(sub.body)
            except UnavailableError as exc:
                self._submit_failed(sub.request_id, f"not submitted: {exc}")
                continue
            received = time.time()
            if status == 201:
                run.consecutive_submit_errors = 0
                run.last_ok_wall_s = received
                feed.on_answer(sub, sent, received, answer)
                feed.flush()
            elif status == 400:
                run.consecutive_submit_errors = 0
                feed.on_invalid(sub, sent, received)
                self._warn(f"{sub.request_id}: refused as invalid: {answer}")
            elif status == 503 and isinstance(answer, dict) and "admission" in answer:
                run.consecutive_submit_errors = 0  # an answer, not a failure of the manager
                feed.on_refused_at_admission(sub, sent, received)
                feed.flush()
            elif status == 409:
                raise ConflictError(
                    f"{sub.request_id} already exists on the manager: replay against a fresh "
                    "Redis prefix (GREENSWARM_REDIS_PREFIX) or give --id-prefix")
            else:
                self._submit_failed(sub.request_id, f"HTTP {status}: {answer}")

    def _submit_failed(self, request_id: str, why: str) -> None:
        """A submission got no usable answer: count it; too many in a row end the replay."""
        run = self.run_state
        run.submit_errors += 1
        run.consecutive_submit_errors += 1
        run.unknown_ids.add(request_id)
        self._warn(f"{request_id}: {why}")
        if run.consecutive_submit_errors >= self.options.max_submit_errors:
            raise UnavailableError(f"{run.consecutive_submit_errors} submissions in a row "
                                   f"failed; the last: {why}") from None

    def _stop_due(self, feed: RecorderFeed) -> None:
        for request_id in feed.due_stops(time.time()):
            feed.mark_stop_sent(request_id)
            client = self.clients.pop(request_id, None)
            if client is not None:
                client.stop()
            try:
                record = self.api.stop(request_id)
            except AuthError:
                raise  # a refused token ends the replay, as on every call
            except GreenSwarmError as exc:  # unreachable, or the manager could not stop it now
                self.run_state.stop_errors += 1
                self._warn(f"{request_id}: stop failed: {exc}")
                continue
            if record is not None:
                feed.on_record(record)

    def _poll_records(self, feed: RecorderFeed) -> None:
        for request_id in feed.active_ids():
            try:
                feed.on_record(self.api.request(request_id))
            except (UnavailableError, NotFoundError):
                # a record that is gone (a manager restarted on an empty Redis) is counted as
                # a failed poll, as an unreachable manager is: the run goes on and its result
                # is kept; replay.json shows the count
                self.run_state.poll_errors += 1
                continue
            self.run_state.last_ok_wall_s = time.time()

    def _poll_hosts(self, feed: RecorderFeed) -> None:
        try:
            hosts = self.api.hosts()
        except UnavailableError:
            self.run_state.poll_errors += 1
            return
        now = time.time()
        self.run_state.last_ok_wall_s = now
        feed.on_hosts(now, hosts)

    def _check_reachable(self) -> None:
        silent = time.time() - self.run_state.last_ok_wall_s
        if silent > self.options.unreachable_s:
            raise UnavailableError(f"the manager at {self.api.url} has not answered for "
                                   f"{silent:.0f} s")

    def _drain_rounds(self, feed: RecorderFeed) -> None:
        while True:
            try:
                feed.on_round(self.rounds.get_nowait())
            except queue.Empty:
                return

    def _sync_clients(self, feed: RecorderFeed) -> None:
        targets = {t.request_id: t for t in feed.service_targets()}
        for request_id in [r for r in self.clients if r not in targets]:
            self.clients.pop(request_id).stop()
        interval = round_interval_wall_s(self.options.speedup)
        for request_id, target in targets.items():
            client = self.clients.get(request_id)
            if client is None:
                client = ServiceClient(target, interval, self.rounds,
                                       timeout_s=self.options.client_timeout_s)
                self.clients[request_id] = client
                client.start()
            else:
                client.retarget(target.address, target.port)

    # ------------------------------------------------------------------ the end

    def _cleanup(self, feed: RecorderFeed) -> None:
        """Stop every client and every request the replay submitted that may still run."""
        for client in self.clients.values():
            client.stop()
        for client in self.clients.values():
            client.join(self.options.client_timeout_s + 1.0)
        self.clients.clear()
        run = self.run_state
        leftover = [*feed.active_ids(), *sorted(run.unknown_ids)]
        deadline = time.monotonic() + max(60.0, 2.0 * len(leftover))
        for request_id in leftover:
            if time.monotonic() > deadline:
                run.cleanup_errors.append(f"gave up stopping the rest at {request_id}")
                break
            try:
                if self.api.stop(request_id) is not None:
                    run.cleanup_stopped += 1
            except GreenSwarmError as exc:
                run.cleanup_errors.append(f"{request_id}: {exc}")
        if run.cleanup_errors:
            self._warn(f"clean-up: {len(run.cleanup_errors)} request(s) not stopped: "
                       f"{'; '.join(run.cleanup_errors[:3])}")

    def _progress(self, feed: RecorderFeed, clock: TraceClock, end_wall: float,
                  final: bool = False) -> None:
        stream = self.options.progress
        if stream is None:
            return
        now = time.time()
        every = 1.0 if self.options.progress_tty else 15.0
        if not final and now - self._last_progress < every:
            return
        self._last_progress = now
        c = feed.counters()
        lag = max(self.run_state.lags_s, default=0.0)
        duration = self.options.duration_s
        trace_now = min(clock.trace_s(now), duration)
        cuts = c.cuts_from_answers + c.cuts_from_history
        kills = c.kills_from_answers + c.kills_from_history + c.kills_unreported
        queued = (f" queued {c.queued} (placed later {c.queued_placed})" if c.queued else "")
        refused = c.rejected + c.refused_invalid + c.refused_at_admission
        line = (f"{self.options.policy_label}: trace {trace_now:,.0f}/{duration:,.0f} s, "
                f"wall {now - clock.start_wall_s:,.0f}/{end_wall - clock.start_wall_s:,.0f} s"
                f" | submitted {c.submitted}/{len(self.plan)} placed {c.placed}{queued} rejected "
                f"{refused} active {len(feed.active_ids())} | cuts "
                f"{cuts} kills {kills} oom {c.oom_jobs + c.oom_services} | jobs done "
                f"{c.jobs_completed} rounds {c.rounds_ok} (failed {c.rounds_failed}) | lag max "
                f"{lag:.1f} s")
        if self.options.progress_tty:
            stream.write("\r\033[K" + line + ("\n" if final else ""))
        else:
            stream.write(line + "\n")
        stream.flush()
