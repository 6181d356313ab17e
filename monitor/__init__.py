"""The per-node monitor (design section 5, thesis 4.2.3).

Layers, from pure to I/O:

- ``core``: utilization arithmetic from two counter readings, window averages and schedules,
  threshold decisions (``HostUpdate``, ``TaskBatch``) and their trackers, RAPL arithmetic,
  back-off. No I/O, no clock.
- ``cgroups`` (file readers), ``host_sources`` (psutil or a cgroup subtree), ``tasks`` (our
  containers: cgroup files, else the Docker stats API), ``rapl`` (powercap files).
- ``client``: the registries over REST (messages 11-13) and a dry-run stand-in.
- ``service``: the loop that ties them (stoppable with a ``threading.Event``).
- ``settings`` and ``cli``: the edge (environment and command line).
"""
