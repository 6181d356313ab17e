"""Failover of the highly available manager on the lab, N times (DESIGN 13, issue 32 item 4).

    python scripts/bench_ha_failover.py [--runs 5] [--faults leader-container,...]
        [--heartbeat-s 1] [--beside-primary]

Each run takes the machine's lab lock (/tmp/gs-lab.lock) for itself only, so that others can
use the lab between runs: `lab up --nodes 3 --managers 3`, docker-stack.ha.yml deployed, each
fault in turn during a stream of submissions (tests/e2e/ha.py), the stack and the lab taken
down. Prints each fault's outcome as it happens, then per fault the median and worst time from
the fault to the next placement on a running node, and the requests accepted, lost and
duplicated over all runs, and those recorded though their client never saw the 201 ("no
201": the answer was lost, e.g. with the leader that was stopping; a retry under the same name
gets 409). Needs root and the lab's tools (scripts/setup.sh).
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import json
import statistics
import sys
import time
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from lab.settings import settings_from_env  # noqa: E402
from tests.e2e.conftest import Lab, lab_cli  # noqa: E402
from tests.e2e.ha import ALL_FAULTS, LAB_UP_ARGS, Fault, HaStack, Outcome, run_fault  # noqa: E402

LOCK = Path("/tmp/gs-lab.lock")


@contextlib.contextmanager
def lab_lock() -> Iterator[None]:
    with LOCK.open("a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def one_run(index: int, faults: list[str], heartbeat_s: float | None,
            beside_primary: bool = False) -> list[Outcome]:
    settings = settings_from_env()
    outcomes: list[Outcome] = []
    with lab_lock():
        print(f"run {index}: lab up", flush=True)
        try:
            done = lab_cli(*LAB_UP_ARGS, timeout_s=1800)
            if done.returncode != 0:
                raise SystemExit(f"lab up failed:\n{done.stdout}\n{done.stderr}")
            lab = Lab(settings, json.loads(settings.paths.state_file.read_text()), done.stdout)
            stack = HaStack(lab, heartbeat_s=heartbeat_s)
            try:
                print(f"run {index}: deployed and healthy in {stack.up():.1f} s", flush=True)
                for fault in faults:
                    if beside_primary and fault == Fault.LEADER_ENGINE:
                        print(f"run {index}: the leader beside the primary, on "
                              f"{stack.lead_beside_the_primary()}", flush=True)
                    outcomes.append(run_fault(stack, fault, f"r{index}-{fault}",
                                              report=lambda line: print(line, flush=True)))
            finally:
                stack.down()
        finally:
            lab_cli("down", timeout_s=600)
    return outcomes


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--faults", default=",".join(ALL_FAULTS),
                        help="comma-separated, in order: " + ", ".join(ALL_FAULTS))
    parser.add_argument("--heartbeat-s", type=float, default=None,
                        help="Swarm's node heartbeat for the runs (`docker swarm update "
                             "--dispatcher-heartbeat`; default: Swarm's, 5 s)")
    parser.add_argument("--beside-primary", action="store_true",
                        help="before the leader-engine fault, put the leader on the Redis "
                             "primary's node (its worst case; the CI test does)")
    args = parser.parse_args()
    faults = [f for f in args.faults.split(",") if f]
    unknown = set(faults) - set(ALL_FAULTS)
    if unknown or not 1 <= args.runs <= 20:
        parser.error(f"unknown faults {sorted(unknown)}" if unknown else "--runs: 1..20")
    started = time.monotonic()
    outcomes: list[Outcome] = []
    for index in range(1, args.runs + 1):
        try:
            outcomes += one_run(index, faults, args.heartbeat_s, args.beside_primary)
        except AssertionError as exc:  # a run that could not complete is reported, not hidden
            print(f"run {index} FAILED: {exc}", flush=True)
    print(f"\n{args.runs} run(s) in {time.monotonic() - started:.0f} s")
    print(f"{'fault':<18} {'runs':>4} {'median s':>9} {'worst s':>8} {'accepted':>9} "
          f"{'lost':>5} {'dup':>4} {'refused':>8} {'no answer':>9} {'no 201':>7}")
    for fault in faults:
        mine = [o for o in outcomes if o.fault == fault]
        times = [o.live_failover_s for o in mine if o.live_failover_s is not None]
        never = len(mine) - len(times)
        median = f"{statistics.median(times):.1f}" if times else "-"
        worst = "never" if never else (f"{max(times):.1f}" if times else "-")
        print(f"{fault:<18} {len(mine):>4} {median:>9} {worst:>8} "
              f"{sum(o.accepted for o in mine):>9} {sum(len(o.lost) for o in mine):>5} "
              f"{sum(len(o.duplicated) for o in mine):>4} {sum(o.refused for o in mine):>8} "
              f"{sum(o.no_answer for o in mine):>9} {sum(len(o.phantoms) for o in mine):>7}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
