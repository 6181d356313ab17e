"""The live replay's pure parts: the plan (what is submitted and stopped when, and how), the
history events, and the feed that turns answers, records and host polls into recorder calls."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from cli.main import main
from domain.errors import ValidationError
from domain.events import (
    Cut,
    Ended,
    Event,
    Exited,
    HostLost,
    Killed,
    Placed,
    Queued,
    Rejected,
    Restored,
    Resumed,
    Started,
    Stopped,
    Submitted,
    Suspended,
    with_changes,
)
from domain.lifecycle import RequestStatus as R
from domain.model import HostSpec, TaskType
from measure.recorder import MetricsRecorder
from measure.results import PolicyResult
from replay.feed import RecorderFeed, recorder_host_ids
from replay.history import is_oom
from replay.plan import (
    ReplayPlanConfig,
    Submission,
    TraceClock,
    job_makespan_wall_s,
    plan_submissions,
    round_interval_wall_s,
)
from replay.values import RoundResult
from workloads.trace import TraceRequest, Workload

MIB = 1024**2
GIB = 1024**3
K = 10.0
START = 1_000_000.0  # wall clock (epoch seconds) of the replay's start


def job(rid: str, t: float = 0.0, *, cls: int = 3, workload: Workload = Workload.FFMPEG,
        cpu: int = 512, memory: int = 512 * MIB, makespan: float = 100.0) -> TraceRequest:
    return TraceRequest(t, rid, cls, TaskType.JOB, workload, cpu, memory, makespan)


def service(rid: str, t: float = 0.0, *, cls: int = 4, workload: Workload = Workload.REDIS,
            cpu: int = 256, memory: int = 512 * MIB, makespan: float = 200.0,
            rate: int = 40) -> TraceRequest:
    return TraceRequest(t, rid, cls, TaskType.SERVICE, workload, cpu, memory, makespan, rate)


def plan(*requests: TraceRequest, speedup: float = K, duration_s: float = 3600.0,
         probes: tuple[str, ...] = (), **options: Any) -> list[Submission]:
    config = ReplayPlanConfig(speedup=speedup, duration_s=duration_s, **options)
    return plan_submissions(((r, r.id in probes) for r in requests), config)


# ------------------------------------------------------------------ the plan


def test_submissions_are_at_t_over_k_with_the_trace_resources_class_and_type() -> None:
    subs = plan(job("r1", 0.0), service("r2", 15.0), job("r3", 95.0, cls=1, cpu=900),
                probes=("r3",))
    assert [s.offset_wall_s for s in subs] == [0.0, 1.5, 9.5]
    assert [s.probe for s in subs] == [False, False, True]
    third = subs[2].body
    assert (third["name"], third["class"], third["type"], third["cpu_shares"],
            third["memory"]) == ("r3", 1, "job", 900, 512 * MIB)


def test_requests_after_the_duration_are_not_submitted() -> None:
    subs = plan(job("r1", 0.0), job("r2", 100.0), job("r3", 100.5), duration_s=100.0)
    assert [s.request_id for s in subs] == ["r1", "r2"]


@pytest.mark.parametrize(("makespan", "speedup", "wall"), [
    (100.0, 10.0, 10), (30.0, 10.0, 3), (34.9, 10.0, 3), (35.1, 10.0, 4), (30.0, 15.0, 2),
    (5.0, 20.0, 1), (1800.0, 10.0, 180),
])
def test_jobs_run_their_makespan_over_k_in_whole_seconds_at_least_one(
    makespan: float, speedup: float, wall: int
) -> None:
    assert job_makespan_wall_s(makespan, speedup) == wall
    sub = plan(job("r1", makespan=makespan), speedup=speedup)[0]
    assert sub.body["env"]["MAKESPAN_S"] == str(wall)
    assert sub.job_makespan_wall_s == wall
    # What the replay expects, on the trace's clock: the rounded wall makespan x K.
    assert sub.expected_makespan_s == pytest.approx(wall * speedup)


def test_workloads_get_their_image_and_the_profilers_sizes() -> None:
    subs = plan(
        job("f", workload=Workload.FFMPEG, memory=300 * MIB, makespan=60.0),
        job("d", workload=Workload.DL, memory=768 * MIB, makespan=60.0),
        service("r", workload=Workload.REDIS, memory=1000 * MIB, rate=40),
        service("s", workload=Workload.TIMESERVER, memory=256 * MIB, rate=20),
        port_base=30000,
    )
    bodies = {s.request_id: s.body for s in subs}
    assert bodies["f"]["image"] == "greenswarm/ffmpeg:latest"
    assert bodies["f"]["env"] == {"MAKESPAN_S": "6"}
    assert bodies["d"]["image"] == "greenswarm/dl:latest"
    assert bodies["d"]["env"] == {"MAKESPAN_S": "6", "DL_MEMORY_MB": "384"}
    assert bodies["r"]["image"] == "greenswarm/redis:latest"
    assert bodies["r"]["env"] == {"REDIS_DATA_MB": "500", "REDIS_PORT": "30000"}
    assert bodies["r"]["ports"] == ["30000:30000"]
    assert bodies["s"]["image"] == "greenswarm/timeserver:latest"
    assert bodies["s"]["env"] == {"PORT": "30001"}
    assert bodies["s"]["ports"] == ["30001:30001"]
    assert "ports" not in bodies["f"] and "ports" not in bodies["d"]
    assert [s.port for s in subs] == [None, None, 30000, 30001]
    assert subs[2].data_keys == 500 * 1024  # REDIS_DATA_MB MiB of 1 KiB values


def test_generic_requests_run_busybox_and_a_job_sleeps_its_makespan() -> None:
    subs = plan(job("g1", workload=Workload.GENERIC, makespan=50.0),
                service("g2", workload=Workload.GENERIC, rate=None))  # type: ignore[arg-type]
    assert all(s.body["image"] == "greenswarm/busybox:latest" for s in subs)
    assert "sleep 5 " in subs[0].body["command"][-1]
    assert subs[1].port is None and "ports" not in subs[1].body


def test_service_ports_are_unique_and_ids_get_the_prefix() -> None:
    subs = plan(*[service(f"r{i}", float(i)) for i in range(5)], port_base=40000,
                id_prefix="run7-")
    assert [s.port for s in subs] == [40000, 40001, 40002, 40003, 40004]
    assert [s.request_id for s in subs] == [f"run7-r{i}" for i in range(5)]
    assert subs[0].body["name"] == "run7-r0"


def test_too_many_services_for_the_port_range_is_a_clear_error() -> None:
    with pytest.raises(ValidationError) as err:
        plan(service("a"), service("b", 1.0), port_base=65535)
    assert err.value.field == "port_base"


def test_a_service_stops_makespan_over_k_after_its_latest_placement() -> None:
    sub = plan(service("r1", makespan=200.0))[0]
    assert sub.stop_due_wall_s(START + 3.0) == pytest.approx(START + 23.0)


def test_the_trace_clock_compresses_wall_time_by_k() -> None:
    clock = TraceClock(START, 15.0)
    assert clock.trace_s(START + 2.0) == pytest.approx(30.0)
    assert clock.trace_s(START - 5.0) == 0.0
    assert clock.wall_s(30.0) == pytest.approx(START + 2.0)
    assert round_interval_wall_s(10.0) == pytest.approx(1.0)
    assert round_interval_wall_s(20.0) == pytest.approx(0.5)


# ------------------------------------------------------------------ history events


def test_an_oom_kill_is_the_agents_flag_or_exit_code_137_and_nothing_else_is() -> None:
    assert is_oom(Ended("ended: failed", status=R.FAILED, exit_code=137))
    assert is_oom(Exited("container exited (code 137); Swarm restarts it", exit_code=137))
    assert is_oom(Exited("container exited (code 1, out of memory)", exit_code=1, oom=True))
    assert not is_oom(Ended("ended: failed", status=R.FAILED, exit_code=1))
    assert not is_oom(Exited("container exited (code 0); Swarm restarts it", exit_code=0))
    assert not is_oom(Cut("cut to 1 shares"))


# ------------------------------------------------------------------ the feed

HOSTS: list[dict[str, Any]] = [
    {"id": "nodeA", "address": "10.123.0.11", "cpu_capacity": 1024, "memory_capacity": 2 * GIB},
    {"id": "nodeB", "address": "10.123.0.12", "cpu_capacity": 1024, "memory_capacity": 2 * GIB},
]


class World:
    """A feed on a recorder of two hosts, and builders of what the manager answers."""

    def __init__(self, *requests: TraceRequest, end_s: float = 1000.0,
                 policy: str = "energy", probes: tuple[str, ...] = ()) -> None:
        names = recorder_host_ids(HOSTS)
        specs = [HostSpec(names[h["id"]], h["cpu_capacity"], h["memory_capacity"])
                 for h in HOSTS]
        self.recorder = MetricsRecorder("live-test", specs)
        self.feed = RecorderFeed(self.recorder, TraceClock(START, K), names, policy=policy,
                                 end_trace_s=end_s)
        self.subs = {s.request_id: s for s in plan(*requests, probes=probes)}
        self.history: dict[str, list[dict[str, Any]]] = {}

    def wall(self, trace_s: float) -> float:
        return START + trace_s / K

    def event(self, rid: str, trace_s: float, event: Event) -> None:
        self.history.setdefault(rid, []).append(
            with_changes(event, self.wall(trace_s), {}).to_json())

    def record(self, rid: str) -> dict[str, Any]:
        """As GET /requests/{id}: the status is the one its latest event set."""
        history = self.history.get(rid, [])
        status = next((e["status"] for e in reversed(history) if "status" in e), "pending")
        return {"id": rid, "status": status, "history": history}

    def answer(self, rid: str, trace_s: float, *, host: str | None = "nodeA",
               pass_name: str = "simple", cpu: int | None = None, memory: int | None = None,
               cuts: list[dict[str, Any]] | None = None, kills: list[str] | None = None,
               rtt_s: float = 0.2, server_s: float = 0.1, queued: bool = False) -> None:
        """POST at trace_s, answered rtt_s wall seconds later; the manager took server_s.
        ``host`` None: refused, or queued when ``queued`` (it asked to)."""
        sub = self.subs[rid]
        request = sub.request
        sent = self.wall(trace_s)
        self.history[rid] = [Submitted("submitted", t=sent + 0.01).to_json()]
        placed = host is not None
        cpu = request.cpu_shares if cpu is None else cpu
        memory = request.memory_bytes if memory is None else memory
        decided: Event
        if placed:
            decided = Placed(f"placed: {pass_name} pass: LEE host {host} (class 3, U=0.1): "
                             "fits", pass_=pass_name, status=R.RUNNING, host=host,
                             cpu_shares=cpu, memory=memory)
        elif queued:
            decided = Queued("waiting in the pending queue (queued)", queue_reason="queued",
                             status=R.PENDING)
        else:
            decided = Rejected("no pass placed it", status=R.REJECTED)
        self.history[rid].append(with_changes(decided, sent + 0.01 + server_s, {}).to_json())
        decision = {
            "placed": placed, "host": host, "pass": pass_name if placed else None,
            "request": {"cpu_shares": cpu, "memory": memory, "cut_received": 0.0},
            "cuts": cuts or [], "kills": kills or [], "reason": "",
            "decision_ms": server_s * 1000.0,  # as manager/api.py reports it
        }
        self.feed.on_answer(sub, sent, sent + rtt_s, {"request": self.record(rid),
                                                      "decision": decision})
        self.feed.flush()

    def poll(self, *rids: str) -> None:
        for rid in rids:
            self.feed.on_record(self.record(rid))
        self.feed.flush()

    def finish(self, end_s: float = 1000.0) -> PolicyResult:
        return self.recorder.finish(end_s)


def test_a_placed_job_that_finishes_gives_its_makespan_on_the_trace_clock() -> None:
    world = World(job("r1", makespan=100.0))
    world.answer("r1", 0.0, rtt_s=0.25, server_s=0.12)
    # placed at 0.13 wall s (1.3 trace s), ended 12 wall s later: 120 trace seconds.
    world.event("r1", 1.3 + 120.0, Ended("ended: finished", status=R.COMPLETED, exit_code=0))
    world.poll("r1")
    assert world.feed.active_ids() == []
    result = world.finish()
    m = result.metrics
    assert (m.requests, m.successful, m.jobs_finished) == (1, 1, 1)
    assert m.job_makespan_s_mean == pytest.approx(120.0)
    assert m.job_slowdown_mean == pytest.approx(1.2)  # expected: MAKESPAN_S 10 x K
    assert m.scheduling_delay_ms_mean == pytest.approx(250.0)  # the client's round trip
    assert m.decision_ms_mean == pytest.approx(120.0)  # the manager's own time
    assert result.passes == {"simple": 1}
    counters = world.feed.counters()
    assert counters.client_rtt_ms.p50 == pytest.approx(250.0)
    assert counters.server_decision_ms.p50 == pytest.approx(120.0)


def test_a_refused_request_is_a_failed_allocation_and_an_invalid_one_too() -> None:
    world = World(job("r1"), job("r2", 1.0))
    world.answer("r1", 0.0, host=None)
    sub = world.subs["r2"]
    world.feed.on_invalid(sub, world.wall(1.0), world.wall(1.0) + 0.01)
    m = world.finish().metrics
    assert (m.requests, m.successful, m.failed, m.success_rate) == (2, 0, 2, 0.0)
    assert world.feed.counters().refused_invalid == 1
    assert world.feed.active_ids() == []


def test_a_request_refused_at_admission_is_counted_as_the_simulator_counts_it() -> None:
    """A 503 naming the admission (DESIGN 3.13) is an answer, not a failed submission: a failed
    allocation and an SLO miss, counted apart, as the simulator's recorder counts it."""
    world = World(job("r1"), job("r2", 1.0, cls=1))
    world.answer("r1", 0.0)
    world.feed.on_refused_at_admission(world.subs["r2"], world.wall(1.0), world.wall(1.0) + 0.01)
    m = world.finish().metrics
    assert (m.requests, m.failed, m.refused_at_admission) == (2, 1, 1)
    assert world.feed.counters().refused_at_admission == 1
    assert world.feed.active_ids() == ["r1"]


def test_the_plan_asks_to_queue_with_queue_new() -> None:
    [plain] = plan(job("r1"))
    [queued] = plan(job("r1"), queue_new=True)
    assert "queue" not in plain.body and queued.body["queue"] is True
    assert {k: v for k, v in queued.body.items() if k != "queue"} == plain.body


def test_a_queued_request_is_decided_when_its_history_shows_it_placed() -> None:
    """--queue-new: r2 waits in the manager's queue from 1 s to 31 s (trace time), and its
    decision then counts, with the wait as its scheduling delay; r3 still waits at the end
    (undecided); the queued answers' decision times count, a retry's is not known."""
    world = World(job("r1"), job("r2", 1.0, cls=1), job("r3", 2.0, cls=1), end_s=100.0)
    world.answer("r1", 0.0)
    world.answer("r2", 1.0, host=None, queued=True, rtt_s=0.01, server_s=0.005)
    world.answer("r3", 2.0, host=None, queued=True, rtt_s=0.01, server_s=0.005)
    assert set(world.feed.active_ids()) == {"r1", "r2", "r3"}
    world.event("r1", 30.0, Ended("ended: finished", status=R.COMPLETED, exit_code=0))
    world.event("r2", 31.0, Placed("placed: simple pass: LEE host nodeB (class empty, U=0.0): "
                                   "fits", pass_="simple", status=R.RUNNING, host="nodeB",
                                   cpu_shares=256, memory=512 * MIB))
    world.poll("r1", "r2", "r3")
    assert world.feed.tracked("r2").in_run  # type: ignore[union-attr]
    result = world.finish(100.0)
    m = result.metrics
    assert (m.requests, m.successful, m.failed, m.success_rate) == (3, 2, 0, 1.0)
    assert (m.queued_requests, m.queued_at_end, m.undecided) == (2, 1, 1)
    assert result.scheduling_delay_ms.max == pytest.approx(30_000.0)  # r2: 1 s to 31 s
    assert m.decisions == 3  # r1's, and the two answers that queued r2 and r3
    assert m.reschedule_attempts == 0  # a queued request is not a victim
    assert result.passes == {"simple": 2}
    counters = world.feed.counters()
    assert (counters.queued, counters.queued_placed, counters.rejected) == (2, 1, 0)


def test_queued_probes_are_not_counted_as_queued_new_requests() -> None:
    """As the recorder's queued_requests, the replay's queued counters leave probes out."""
    world = World(job("r1", cls=1), job("p1", 1.0, cls=1), end_s=100.0, probes=("p1",))
    world.answer("r1", 0.0, host=None, queued=True)
    world.answer("p1", 1.0, host=None, queued=True)
    for rid, t in (("r1", 20.0), ("p1", 21.0)):
        world.event(rid, t, Placed("placed: simple pass: LEE host nodeB (class empty, U=0.0): "
                                   "fits", pass_="simple", status=R.RUNNING, host="nodeB",
                                   cpu_shares=512, memory=512 * MIB))
    world.poll("r1", "p1")
    counters = world.feed.counters()
    assert (counters.queued, counters.queued_placed) == (1, 1)
    m = world.finish(100.0).metrics
    assert (m.requests, m.probes, m.queued_requests, m.successful) == (1, 1, 1, 1)


def test_baseline_policies_name_their_placements_after_the_policy() -> None:
    world = World(job("r1"), job("r2", 1.0), policy="spread")
    world.answer("r1", 0.0, pass_name="simple")  # what the baselines' decisions say
    world.answer("r2", 1.0, pass_name="")
    assert world.finish().passes == {"spread": 2}


def test_cuts_and_kills_of_a_decision_are_counted_once_and_the_victim_rescheduled() -> None:
    world = World(service("v", 0.0, cls=4), service("c", 1.0, cls=4, cpu=300),
                  job("x", 2.0, cls=1, cpu=600, memory=1 * GIB))
    world.answer("v", 0.0)
    world.answer("c", 1.0)
    # x is placed on nodeA by killing v and cutting c to 200 shares; x itself is cut too.
    world.answer("x", 2.0, pass_name="kill", cpu=500, memory=900 * MIB,
                 cuts=[{"task": "c", "cpu_shares": 200, "memory": 400 * MIB,
                        "cut_received": 1 / 3}], kills=["v"])
    world.event("c", 2.05, Cut("cut to 200 shares and 419430400 bytes (total cut 1/3)",
                               cpu_shares=200, memory=400 * MIB, cut_received="1/3"))
    world.event("v", 2.04, Killed("killed on nodeA to make room for x", by="x", kills=1))
    world.event("v", 2.2, Placed("placed: simple pass: LEE host nodeB (class empty, U=0.0): "
                                 "fits", pass_="simple", status=R.RUNNING, host="nodeB",
                                 cpu_shares=256, memory=512 * MIB))
    world.poll("c", "v")
    result = world.finish()
    m = result.metrics
    assert (m.successful, m.kills, m.victims, m.victims_lost) == (3, 1, 1, 0)
    assert (m.reschedule_attempts, m.reschedules_placed) == (1, 1)
    assert m.cuts == 2  # c, and x's own cut
    assert m.cut_cpu_shares == (300 - 200) + (600 - 500)
    assert m.cut_memory_bytes == (512 - 400) * MIB + (1024 - 900) * MIB
    assert result.passes == {"simple": 3, "kill": 1}
    counters = world.feed.counters()
    assert (counters.kills_from_answers, counters.cuts_from_answers,
            counters.cuts_from_history) == (1, 1, 0)
    # The victim runs again on nodeB: its stop time starts again from the new placement.
    tracked = world.feed.tracked("v")
    assert tracked is not None and tracked.host == "nodeB"
    assert tracked.placed_wall_s == pytest.approx(world.wall(2.2))


def test_cuts_and_kills_made_by_a_victims_reschedule_come_from_the_histories() -> None:
    world = World(service("v", 0.0, cls=4), service("d", 0.5, cls=4, cpu=400),
                  service("w", 0.7, cls=4), job("x", 1.0, cls=1))
    for rid, t in (("v", 0.0), ("d", 0.5), ("w", 0.7)):
        world.answer(rid, t)
    world.answer("x", 1.0, pass_name="kill", kills=["v"])
    world.event("v", 1.02, Killed("killed on nodeA to make room for x", by="x", kills=1))
    # v's reschedule (no POST answer tells about it) cuts d and kills w.
    world.event("d", 1.05, Cut("cut to 300 shares and 536870912 bytes (total cut 1/6)",
                               cpu_shares=300, memory=512 * MIB))
    world.event("w", 1.06, Killed("killed on nodeB to make room for v", by="v", kills=1))
    world.event("v", 1.1, Placed("placed: cut pass: DEE host nodeB (class 4, U=0.6): fits",
                                 pass_="cut", status=R.RUNNING, host="nodeB", cpu_shares=256,
                                 memory=512 * MIB))
    world.event("w", 1.12, Queued("waiting in the pending queue (victim)",
                                  queue_reason="victim", status=R.PENDING))
    world.poll("w", "d", "v")  # polled in any order: processed by time
    m = world.finish().metrics
    assert (m.kills, m.victims, m.victims_lost) == (2, 2, 1)  # w never placed again
    assert (m.cuts, m.cut_cpu_shares) == (1, 100)
    assert (m.reschedule_attempts, m.reschedules_placed) == (2, 1)
    counters = world.feed.counters()
    assert (counters.kills_from_history, counters.cuts_from_history) == (1, 1)
    assert counters.reschedules_waiting == 1
    # w waits: no stop is due for it, and its clients are gone.
    assert "w" not in world.feed.due_stops(world.wall(10_000.0))
    assert "w" not in {t.request_id for t in world.feed.service_targets()}


def test_a_cut_given_back_is_counted_and_the_task_has_its_resources_again() -> None:
    """DESIGN 3.8: d is cut (400 -> 300 shares), then given back (400): counted, and a later
    cut is measured from the 400 it has again, not from the stale 300."""
    world = World(service("d", 0.0, cls=4, cpu=400))
    world.answer("d", 0.0)
    world.event("d", 1.0, Cut("cut to 300 shares and 536870912 bytes (total cut 1/6)",
                              cpu_shares=300, memory=512 * MIB))
    world.poll("d")
    tracked = world.feed.tracked("d")
    assert tracked is not None and tracked.cpu == 300
    world.event("d", 2.0, Restored("cut given back", host="nodeA", applied=True,
                                   cpu_shares=400, memory=512 * MIB, cut_received="0"))
    world.poll("d")
    assert tracked.cpu == 400
    assert world.finish().metrics.restores == 1


def test_a_pause_and_its_resume_from_the_history_are_counted_and_time_kept() -> None:
    """DESIGN 3.14: a job the live manager paused (its ``suspended`` event) and resumed is
    counted as the simulator counts it, and its pause is time not running."""
    world = World(job("j", 0.0, cls=4, makespan=100.0))
    world.answer("j", 0.0)
    world.event("j", 10.0, Suspended("suspended for c1", host="nodeA", by="c1", applied=True))
    world.event("j", 40.0, Resumed("resumed", host="nodeA", applied=True))
    world.poll("j")
    m = world.finish().metrics
    assert (m.suspensions, m.resumes) == (1, 1)


def test_a_kill_no_decision_made_still_counts() -> None:
    world = World(service("v"))
    world.answer("v", 0.0)
    world.event("v", 5.0, HostLost("killed: its host nodeA left the Swarm", kills=1))
    world.poll("v")
    m = world.finish().metrics
    assert (m.kills, m.victims, m.victims_lost) == (1, 1, 1)
    assert world.feed.counters().kills_unreported == 1


def test_service_levels_come_from_the_histories_and_a_seen_start_is_the_allocation() -> None:
    """j is submitted at 0 and placed when the answer comes (2 trace s: the decision on its
    arrival, part of its first allocation, which is free: DESIGN 3.10), runs until it is
    killed at 100 (a host lost), waits until placed again at 150, and its container is seen
    running at 155 (5 s of allocation, waiting); it ends at 300. A job restarts from scratch:
    its first 98 s delivered nothing (p, not e). e = 145, p = 98 + 50 + 5: A = 145 / 298,
    a miss of its 2/3. Without the 'started' event the allocation is the configured one (here
    none): A = 150 / 298."""
    for started, availability in ((True, 145 / 298), (False, 150 / 298)):
        world = World(job("j", makespan=100.0))
        world.answer("j", 0.0, rtt_s=0.2)
        world.event("j", 100.0, HostLost("killed: its host nodeA left the Swarm", kills=1))
        world.event("j", 150.0, Placed("placed: simple pass: LEE host nodeB (class empty, "
                                       "U=0.0): fits", pass_="simple", status=R.RUNNING,
                                       host="nodeB"))
        if started:
            world.event("j", 155.0, Started("its container runs"))
        world.event("j", 300.0, Ended("ended: finished", status=R.COMPLETED, exit_code=0))
        world.poll("j")
        result = world.finish()
        [level] = result.request_levels
        assert level.availability == pytest.approx(availability)
        assert (level.preemptions, level.met_slo) == (1, False)  # class 3: SLO 2/3
        assert world.feed.counters().starts == (1 if started else 0)
        # its first run's 98 s are lost (a job restarts), at its half core
        assert result.metrics.work_lost_cpu_s == pytest.approx(98 * 0.5)


def test_exit_code_137_counts_as_an_oom_kill_once_per_run() -> None:
    world = World(job("j"), service("s", 1.0))
    world.answer("j", 0.0)
    world.answer("s", 1.0, host="nodeB")
    world.event("j", 20.0, Ended("ended: failed", status=R.FAILED, exit_code=137))
    world.event("s", 21.0, Exited("container exited (code 137); Swarm restarts it",
                                  exit_code=137))
    world.event("s", 25.0, Exited("container exited (code 137); Swarm restarts it",
                                  exit_code=137))
    world.event("s", 26.0, Exited("container exited (code 1); Swarm restarts it", exit_code=1))
    world.poll("j", "s")
    # The OOM-killed service keeps running (Swarm restarted it): rounds are not recorded.
    world.feed.on_round(RoundResult(world.wall(30.0), "s", 40, 12.0, True))
    result = world.finish()
    m = result.metrics
    assert (m.oom_kills, m.jobs_finished, m.tasks_failed, m.responses) == (2, 0, 0, 0)
    assert {h.host_id: h.oom_kills for h in result.hosts} == {"10.123.0.11": 1,
                                                              "10.123.0.12": 1}
    c = world.feed.counters()
    assert (c.oom_jobs, c.oom_services, c.service_exits, c.rounds_unrecorded) == (1, 2, 1, 1)


def test_failed_jobs_and_services_stopped_by_their_client() -> None:
    world = World(job("j"), service("s", 1.0, makespan=200.0))
    world.answer("j", 0.0)
    world.answer("s", 1.0)
    placed = world.wall(1.0) + 0.01 + 0.1  # see World.answer: sent + 0.01 + server time
    assert world.feed.due_stops(placed + 19.9) == []
    assert world.feed.due_stops(placed + 20.1) == ["s"]
    world.feed.mark_stop_sent("s")
    assert world.feed.due_stops(placed + 30.0) == []
    world.event("j", 5.0, Ended("ended: failed", status=R.FAILED, exit_code=2))
    world.event("s", 202.0, Stopped("stopped by the client", status=R.STOPPED))
    world.poll("j", "s")
    m = world.finish().metrics
    assert (m.tasks_failed, m.services_stopped, m.oom_kills) == (1, 1, 0)


def test_service_targets_follow_the_hosts_address_and_need_a_rate() -> None:
    world = World(service("r", rate=40), service("q", 1.0, rate=0),
                  service("t", 2.0, workload=Workload.TIMESERVER, rate=20))
    world.feed.on_hosts(START, HOSTS)
    world.answer("r", 0.0, host="nodeB")
    world.answer("q", 1.0)
    world.answer("t", 2.0, host=None)
    targets = world.feed.service_targets()
    assert [(t.request_id, t.address, t.port, t.rate) for t in targets] == [
        ("r", "10.123.0.12", 20000, 40)]


def test_rounds_become_service_responses_and_failures_are_only_counted() -> None:
    world = World(service("r", rate=40))
    world.answer("r", 0.0)
    world.feed.on_round(RoundResult(world.wall(10.0), "r", 40, 8.0, True))
    world.feed.on_round(RoundResult(world.wall(20.0), "r", 40, 12.0, True))
    world.feed.on_round(RoundResult(world.wall(30.0), "r", 40, 5000.0, False))
    world.feed.on_round(RoundResult(world.wall(1.0), "r", 40, 0.0, False, ready=False))
    result = world.finish()
    assert result.metrics.responses == 2
    assert result.response_ms["redis-40"].mean == pytest.approx(10.0)
    c = world.feed.counters()
    assert (c.rounds_ok, c.rounds_failed, c.rounds_not_ready) == (2, 1, 1)


def test_host_polls_are_the_hosts_states_under_their_addresses() -> None:
    world = World(end_s=100.0)
    busy = [{**HOSTS[0], "cpu_util": 0.8, "memory_util": 0.5, "task_count": 2,
             "cpu_allocated": 768, "memory_allocated": GIB}, {**HOSTS[1], "cpu_util": 0.0,
                                                            "memory_util": 0.02,
                                                            "task_count": 0}]
    world.feed.on_hosts(world.wall(50.0), busy)
    world.feed.on_hosts(world.wall(500.0), busy)  # after the end: clamped to it
    result = world.finish(100.0)
    by_host = {h.host_id: h for h in result.hosts}
    assert by_host["10.123.0.11"].avg_cpu_util == pytest.approx(0.4)
    assert by_host["10.123.0.12"].empty_share == pytest.approx(1.0)
    assert result.metrics.avg_cpu_allocated == pytest.approx(0.75 / 4)


def test_host_names_fall_back_to_ids_when_addresses_are_missing_or_shared() -> None:
    assert recorder_host_ids(HOSTS) == {"nodeA": "10.123.0.11", "nodeB": "10.123.0.12"}
    same = [{**h, "address": "10.0.0.1"} for h in HOSTS]
    assert recorder_host_ids(same) == {"nodeA": "nodeA", "nodeB": "nodeB"}


def test_nothing_after_the_end_reaches_the_recorder() -> None:
    world = World(job("j"), end_s=100.0)
    world.answer("j", 0.0)
    world.event("j", 150.0, Ended("ended: finished", status=R.COMPLETED, exit_code=0))
    world.poll("j")
    m = world.finish(100.0).metrics
    assert m.jobs_finished == 0
    assert world.feed.counters().events_after_end == 1


def test_the_swarm_policy_is_refused_clearly() -> None:
    world = World(job("j"))
    sub = world.subs["j"]
    with pytest.raises(ValueError, match="swarm"):
        world.feed.on_answer(sub, START, START + 0.1, {"request": {"id": "j", "history": []},
                                                      "decision": None})


# ------------------------------------------------------------------ the command line


@pytest.mark.parametrize(("content", "says"), [(None, "cannot read"), ("  \n", "holds no token")])
def test_a_bad_token_file_is_named_as_the_option_and_nothing_is_written(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], content: str | None, says: str
) -> None:
    token_file = tmp_path / "token"
    if content is not None:
        token_file.write_text(content)
    out = tmp_path / "out"
    # The manager URL is never contacted: the token is read first.
    code = main(["bench", "replay", "--trace", str(tmp_path / "unread.jsonl"),
                 "--manager", "http://127.0.0.1:9", "--speedup", "10",
                 "--policy-label", "live-energy", "--out", str(out),
                 "--token-file", str(token_file)])
    assert code == 2
    err = capsys.readouterr().err
    assert "error: token_file: " in err and says in err
    assert "GREENSWARM_TOKEN_FILE" not in err
    assert not out.exists()
