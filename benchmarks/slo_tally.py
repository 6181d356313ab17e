"""What the per-class SLO tally (manager/slo_tally.py) costs and saves, on a redis-server of its
own on the loopback (stopped by pid at the end).

Writes ``--requests`` records, each with ``--events`` history events (placed, started, then
cuts and restores), once without the tally and once with it, and prints the time per record
write; then how long reading every class's fulfilment takes from the tally, and from replaying
every history as a scrape would have to without it.

    python -m benchmarks.slo_tally --requests 4000 --events 10
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import redis

from domain.events import Cut, Placed, Restored, Started
from domain.lifecycle import RequestStatus
from domain.service_history import service_level
from domain.slo import DEFAULT_ALLOCATION_S, SloTable
from lab.processes import redis_server
from manager.records import RequestRecords
from manager.slo_tally import SloTally


def spec(name: str, cls: int) -> dict[str, object]:
    return {"image": "busybox", "cpu_shares": 256, "memory": 2**26, "type": "service",
            "class": cls, "command": [], "env": {}, "ports": [], "volumes": [], "name": name}


def write(records: RequestRecords, prefix: str, count: int, events: int) -> float:
    """Seconds per record write (create and updates alike)."""
    writes = 0
    started = time.perf_counter()
    for i in range(count):
        name = f"{prefix}{i}"
        records.create(name, spec(name, 1 + i % 4))
        records.update(name, Placed("placed", host="h"), status=RequestStatus.RUNNING, host="h")
        records.update(name, Started("runs"))
        writes += 3
        for k in range(events - 3):
            change = Cut if k % 2 == 0 else Restored
            records.update(name, change("cut or given back", host="h"))
            writes += 1
    return (time.perf_counter() - started) / writes


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=4000)
    parser.add_argument("--events", type=int, default=10, help="history events per request")
    args = parser.parse_args(argv)
    slo = SloTable()
    with tempfile.TemporaryDirectory() as work, redis_server(Path(work)) as server:
        client = redis.Redis.from_url(server.url, decode_responses=True)
        plain = RequestRecords(client, "plain")
        per_write_plain = write(plain, "p", args.requests, args.events)
        tallied = RequestRecords(client, "tallied")
        tally = SloTally(client, "tallied", slo, DEFAULT_ALLOCATION_S)
        tallied.keep_tally(tally)
        per_write_tally = write(tallied, "t", args.requests, args.events)
        print(f"{args.requests} requests x {args.events} events")
        print(f"record write, without the tally: {per_write_plain * 1000:.3f} ms")
        print(f"record write, with the tally:    {per_write_tally * 1000:.3f} ms")
        started = time.perf_counter()
        rounds = 20
        for _ in range(rounds):
            tally.classes(time.time())
        print(f"fulfilment of every class from the tally: "
              f"{(time.perf_counter() - started) / rounds * 1000:.3f} ms")
        started = time.perf_counter()
        now = time.time()
        for request_id in tallied.ids(limit=args.requests):
            record = tallied.get(request_id)
            cls = int(record.spec["class"])
            service_level(record.history, now=now, objective=slo.objective(cls),
                          alpha_s=DEFAULT_ALLOCATION_S, is_job=False)
        print(f"the same by replaying every history:  "
              f"{(time.perf_counter() - started) * 1000:.1f} ms")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
