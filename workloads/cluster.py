"""Cluster specifications on the command line: ``--hosts 5x8c12g``.

Grammar (case-insensitive, no spaces)::

    SPEC   := GROUP ("+" GROUP)*
    GROUP  := [COUNT "x"] CORES "c" MEMORY UNIT
    UNIT   := "m" | "g" | "t"          (MiB, GiB, TiB; binary, as Docker's --memory)

``5x8c12g`` is five hosts of 8 cores (8192 shares) and 12 GiB (the thesis cluster);
``2x0.5c2g`` two lab nodes of half a core and 2 GiB; ``4x8c16g+1x32c128g`` a mixed cluster.
Cores may be fractional; shares = round(cores x 1024). Hosts are named ``host-1`` ..
``host-N`` in order, zero-padded to the width of N (``host-0001`` for 1,000 hosts).
"""

from __future__ import annotations

import random
import re

from domain.errors import ValidationError
from domain.model import HostSpec

SHARES_PER_CORE = 1024
MIB = 1024**2
GIB = 1024**3
_UNIT_BYTES = {"m": MIB, "g": GIB, "t": 1024**4}
_GROUP = re.compile(
    r"^(?:(?P<count>\d+)x)?(?P<cores>\d+(?:\.\d+)?)c(?P<memory>\d+(?:\.\d+)?)(?P<unit>[mgt])$",
    re.IGNORECASE,
)
MAX_HOSTS = 100_000

THESIS_HOSTS_SPEC = "5x8c12g"


def parse_hosts_spec(spec: str, field: str = "hosts") -> tuple[HostSpec, ...]:
    """The hosts a SPEC such as ``5x8c12g`` describes; ValidationError names ``field``."""
    if not isinstance(spec, str) or not spec.strip():
        raise ValidationError(field, "empty; expected e.g. '5x8c12g' (5 hosts, 8 cores, 12 GiB)")
    groups: list[tuple[int, int, int]] = []
    for part in spec.strip().split("+"):
        match = _GROUP.match(part)
        if match is None:
            raise ValidationError(
                field,
                f"cannot read {part!r}: expected [COUNTx]CORESc MEMORY(m|g|t) without spaces, "
                "e.g. '5x8c12g' or '2x0.5c512m'",
            )
        count = int(match["count"]) if match["count"] is not None else 1
        if count < 1:
            raise ValidationError(field, f"{part!r}: the host count must be at least 1")
        shares = round(float(match["cores"]) * SHARES_PER_CORE)
        if shares < 1:
            raise ValidationError(field, f"{part!r}: a host needs more than 0 cores")
        memory = round(float(match["memory"]) * _UNIT_BYTES[match["unit"].lower()])
        if memory < 1:
            raise ValidationError(field, f"{part!r}: a host needs more than 0 memory")
        groups.append((count, shares, memory))
    total = sum(count for count, _, _ in groups)
    if total > MAX_HOSTS:
        raise ValidationError(field, f"{total} hosts is more than the {MAX_HOSTS} supported")
    width = len(str(total))
    hosts: list[HostSpec] = []
    for count, shares, memory in groups:
        for _ in range(count):
            hosts.append(HostSpec(f"host-{len(hosts) + 1:0{width}d}", shares, memory))
    return tuple(hosts)


def format_hosts_spec(hosts: tuple[HostSpec, ...]) -> str:
    """The shortest SPEC for ``hosts`` (consecutive equal hosts grouped); names are not kept."""
    groups: list[list[int]] = []
    for host in hosts:
        key = [host.cpu_capacity, host.memory_capacity]
        if groups and groups[-1][1:] == key:
            groups[-1][0] += 1
        else:
            groups.append([1, *key])
    return "+".join(f"{n}x{_cores(s)}c{_memory(m)}" for n, s, m in groups)


def _cores(shares: int) -> str:
    cores = shares / SHARES_PER_CORE
    return f"{cores:g}"


def _memory(memory: int) -> str:
    if memory % GIB == 0:
        return f"{memory // GIB}g"
    return f"{memory / MIB:g}m"


def thesis_hosts() -> tuple[HostSpec, ...]:
    """The thesis cluster: 5 workers of 8 cores (8192 shares) and 12 GiB."""
    return parse_hosts_spec(THESIS_HOSTS_SPEC)


def sample_hosts(hosts: tuple[HostSpec, ...], count: int, seed: int) -> tuple[HostSpec, ...]:
    """``count`` of ``hosts`` drawn at random without replacement (seeded: the same sample for
    the same seed), in their original order."""
    if count < 1:
        raise ValidationError("nodes_sample", f"must be at least 1, got {count}")
    if count > len(hosts):
        raise ValidationError("nodes_sample", f"{count} is more than the {len(hosts)} hosts")
    chosen = set(random.Random(seed).sample(range(len(hosts)), count))
    return tuple(h for i, h in enumerate(hosts) if i in chosen)
