"""The simulator's books against the stores' (a test aid: ``SimConfig.check_invariants`` runs
it after every event). Pure: no I/O."""

from __future__ import annotations

from collections.abc import Mapping

from sim.model import Host, Run
from sim.routing import Clusters


def check_books(clusters: Clusters, runs: Mapping[str, Run], hosts: Mapping[str, Host]) -> None:
    """The simulator's tasks are exactly the stores', with the same resources, and every
    host's allocation is the sum of its tasks' (raises RuntimeError otherwise). With several
    clusters, no task is in two of their stores (never placed twice)."""
    store_tasks = {}
    for cluster in clusters.all:
        for task in cluster.store.tasks():
            if task.id in store_tasks:
                raise RuntimeError(f"task {task.id} is placed in two clusters")
            store_tasks[task.id] = task
    if set(store_tasks) != set(runs):
        only_sim = sorted(set(runs) - set(store_tasks))[:5]
        only_store = sorted(set(store_tasks) - set(runs))[:5]
        raise RuntimeError(f"tasks differ: simulator only {only_sim}, store only {only_store}")
    for run in runs.values():
        task = store_tasks[run.id]
        if (task.host, task.cpu_shares, task.memory) != (run.host.id, run.cpu_shares,
                                                         run.memory):
            raise RuntimeError(f"task {run.id} booked differently")
    for host in hosts.values():
        view = clusters.of_host[host.id].store.host(host.id)
        cpu = sum(r.cpu_shares for r in host.runs.values())
        memory = sum(r.memory for r in host.runs.values())
        if (view.cpu_allocated, view.memory_allocated, view.task_count) != (
            cpu, memory, len(host.runs)
        ) or (host.booked_cpu, host.booked_mem) != (cpu, memory):
            raise RuntimeError(f"host {host.id}: allocations differ")
        if host.mem_use > host.cap_mem * (1 + 1e-9):
            raise RuntimeError(f"host {host.id} uses more memory than it has")
        if host.served > host.cap_cores * (1 + 1e-9):
            raise RuntimeError(f"host {host.id} serves more CPU than it has")
    for cluster in clusters.all:
        pending = {entry.request.id for entry in cluster.store.pending()}
        if pending != cluster.pending:
            raise RuntimeError("pending queues differ")
