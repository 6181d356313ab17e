"""The QoS-driven paper's two validation tests as workloads (DESIGN 7.5), as seeded traces.

What the paper fixes ("Experimental design of the validation tests"), and this follows:

* 20 hosts of 4 vCPUs and 4 GB, of which Kubernetes used about 0.25 GB: here 4 cores (4096
  shares) and 3.75 GiB each (``20x4c3.75g``);
* every request asks for 0.375 vCPU and 0.375 GB: here 384 shares and 384 MiB, so that exactly
  ten fit on a host, as in the paper (200 at once on the cluster);
* all requests are submitted at the beginning, one per second, and stay active until the end of
  the one-hour test, when availabilities are computed: services whose makespan is the test's
  duration (a service preempted and started again is still running when the test ends);
* test 1: 256 requests in a random order, 80 gold, 80 silver and 96 bronze (56 more than the
  cluster holds); test 2: 221 silver (21 more).

Mapping, as DESIGN 7.5 says: gold is class 1 (SLO 1), silver class 2 (SLO 0.9), bronze class 4
(SLO 0.5); run them with ``--overbooking-model none --slo 1=1,2=0.9,4=0.5``, as the paper's
schedulers do not overbook. The paper's pods ran nginx, an idle web server: here the idle time
server's usage profile, with no client rounds (``request_rate`` 0).

What the paper leaves open: the random order of test 1 is a seeded shuffle (``random.Random
(seed).shuffle`` of the 80 + 80 + 96 classes in that order); test 2 has no randomness (its seed
is only recorded). Ids are ``r0001``, ``r0002``, ... in submission order.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from dataclasses import dataclass, field
from enum import StrEnum

from domain.model import HostSpec, TaskType
from workloads.cluster import MIB, parse_hosts_spec
from workloads.trace import TraceHeader, TraceRequest, Workload

QOS_VALIDATION_HOSTS_SPEC = "20x4c3.75g"
REQUEST_CPU_SHARES = 384  # 0.375 vCPU
REQUEST_MEMORY_BYTES = 384 * MIB  # 0.375 GB
GOLD, SILVER, BRONZE = 1, 2, 4  # the paper's classes as ours (DESIGN 7.5)
SUBMIT_INTERVAL_S = 1.0


class QosValidationTest(StrEnum):
    MULTIPLE_CLASSES = "qos-validation-1"  # 80 gold, 80 silver, 96 bronze, in random order
    SINGLE_CLASS = "qos-validation-2"  # 221 silver


# The classes of each test's requests, before test 1's shuffle.
CLASS_COUNTS: dict[QosValidationTest, tuple[tuple[int, int], ...]] = {
    QosValidationTest.MULTIPLE_CLASSES: ((GOLD, 80), (SILVER, 80), (BRONZE, 96)),
    QosValidationTest.SINGLE_CLASS: ((SILVER, 221),),
}


def qos_validation_hosts() -> tuple[HostSpec, ...]:
    return parse_hosts_spec(QOS_VALIDATION_HOSTS_SPEC)


@dataclass(frozen=True)
class QosValidationConfig:
    test: QosValidationTest
    hosts: tuple[HostSpec, ...] = field(default_factory=qos_validation_hosts)
    duration_s: float = 3600.0


def qos_validation_header(config: QosValidationConfig, seed: int) -> TraceHeader:
    counts = ", ".join(f"{n} of class {c}" for c, n in CLASS_COUNTS[config.test])
    number = "1" if config.test is QosValidationTest.MULTIPLE_CLASSES else "2"
    order = " in a random order (seeded)" if number == "1" else ""
    notes = (
        f"DESIGN 7.5: the QoS-driven paper's validation test {number}: {counts}{order}, one "
        f"per second from 0 s, each {REQUEST_CPU_SHARES} shares and "
        f"{REQUEST_MEMORY_BYTES // MIB} MiB, services until the end; gold = class 1, silver = "
        "class 2, bronze = class 4; run with --overbooking-model none --slo 1=1,2=0.9,4=0.5"
    )
    return TraceHeader(source=config.test.value, seed=seed, duration_s=float(config.duration_s),
                       hosts=config.hosts, notes=notes)


def validation_classes(test: QosValidationTest, seed: int) -> list[int]:
    """Each request's class, in submission order."""
    classes = [cls for cls, count in CLASS_COUNTS[test] for _ in range(count)]
    if test is QosValidationTest.MULTIPLE_CLASSES:
        random.Random(seed).shuffle(classes)
    return classes


def iter_qos_validation_requests(seed: int, config: QosValidationConfig) -> Iterator[TraceRequest]:
    classes = validation_classes(config.test, seed)
    width = max(4, len(str(len(classes))))
    for index, cls in enumerate(classes):
        t = index * SUBMIT_INTERVAL_S
        if t >= config.duration_s:
            return
        yield TraceRequest(
            t_s=t, id=f"r{index + 1:0{width}d}", request_class=cls, type=TaskType.SERVICE,
            workload=Workload.TIMESERVER, cpu_shares=REQUEST_CPU_SHARES,
            memory_bytes=REQUEST_MEMORY_BYTES, makespan_s=float(config.duration_s),
            request_rate=0,
        )
