"""The modelled side of preemption that keeps work (DESIGN 3.14): a run paused on its host and
resumed there, and a checkpointable job's progress saved every interval of its running time;
and the life of a service that is taken off its CPU.

* Paused: the container is frozen (``docker pause``): it wants and gets no CPU, books no CPU
  shares, holds its memory as it was (its usage profile's steps pass without effect), and a job
  makes no progress. Resumed, it wants what its profile's current step says, and a job goes on
  from where it stopped.
* Checkpoints: a checkpointable job saves its progress each time its running time since its
  start reaches ``origin + k x interval`` (k >= 1). ``origin`` is the allocation time alpha on
  every placement but the first, where the accounting (domain.slo.ServiceClock) starts its run
  alpha after the placement: so the run time a kill throws away here is the one the accounting
  moves from e to p. Killed, the run's saved progress is kept for the next run, which starts
  with only the work left after it.

* A service's client uses it for ``makespan_s`` of running time (DESIGN 3.10: a service's
  running time stays in e, it served while it ran): it is stopped once its runs, since its first
  start, add up to that; its pauses and its waits in the queue do not count, and a service taken
  off its host and placed again runs only what is left of it.

A job's progress is linear between the engine's rate changes (``Run.work_t``, ``rate``); the
checkpoint a segment crosses is noted when the segment ends (a rate change, a pause, a kill:
``sim.model.advance``), so the cost is O(1) per change, and nothing happens for a job without
checkpoints.
"""

from __future__ import annotations

import math

from sim.model import Run, advance

_INF = math.inf


def saved_on_kill(run: Run, t: float) -> float:
    """What a kill at ``t`` keeps of this run's progress (full-speed seconds): the progress at
    its last checkpoint, 0 for a job without checkpoints."""
    if run.ckpt_s <= 0 or not run.is_job:
        return 0.0
    advance(run, t)
    return run.saved


def service_ran_s(run: Run, t: float) -> float:
    """How long a service's ``run`` has run by ``t``: since its start, its pauses aside."""
    paused = run.paused_s + (t - run.paused_at if run.paused else 0.0)
    return max(0.0, t - run.start_t - paused)


def pause(run: Run, t: float) -> None:
    """``run`` frozen at ``t`` (DESIGN 3.14)."""
    if run.paused:
        return
    run.paused_at = t
    host = run.host
    if run.is_job:
        advance(run, t)
        run.rate = 0.0
        run.finish_t = _INF
        host.recount = True  # its completion no longer comes: look for the next one
    host.demand -= run.demand
    run.demand = 0.0
    host.booked_cpu -= run.cpu_shares
    run.cpu_shares = 0
    run.paused = True


def resume(run: Run, t: float, cpu_shares: int) -> None:
    """``run`` thawed at ``t`` with ``cpu_shares`` booked: it wants what its profile's current
    step says; a job goes on at full speed until the engine shares the CPU out again."""
    if not run.paused:
        return
    host = run.host
    run.paused = False
    run.paused_s += t - run.paused_at
    if not run.is_job:  # its client's clock stood still while it was paused
        run.stop_t += t - run.paused_at
    run.cpu_shares = cpu_shares
    host.booked_cpu += cpu_shares
    step = run.profile.steps[run.step]
    demand = run.profile.cpu_fraction(step, run.request.request_rate) * run.alloc_cores
    mem_use = step.memory_fraction * run.original_memory
    host.demand += demand
    host.mem_use += mem_use - run.mem_use
    run.demand = demand
    run.mem_use = mem_use
    if run.is_job:
        run.work_t = t
        run.rate = 1.0
        run.finish_t = t + max(0.0, run.work_left)
