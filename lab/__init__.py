"""The local lab (DESIGN 6): a real multi-node Docker Swarm on one machine, and its offline images.

Layout of the package:

* ``settings``, ``model``, ``plan``, ``catalog``: pure values and decisions;
* ``proc``, ``network``, ``cgroups``, ``mounts``, ``daemons``, ``engine``, ``images``, ``store``:
  the I/O edges (processes, ip/iptables, cgroup files, mounts, dockerd, Docker SDK, state file);
* ``lab`` (up, images), ``down``, ``status`` and ``cli``: the commands.
"""
