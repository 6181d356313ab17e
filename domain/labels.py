"""Docker labels and the Docker API version: the contract between the manager (which writes
them on Swarm services and nodes), the node agents and monitors (which read them on
containers), and the local lab (which labels its nodes)."""

from __future__ import annotations

# On every task container (and its service): which request it is, and what it should get.
LABEL_TASK = "greenswarm.task"
LABEL_CLASS = "greenswarm.class"
LABEL_TYPE = "greenswarm.type"
LABEL_CPU = "greenswarm.cpu_shares"  # what the container should get, read by the agent
LABEL_MEMORY = "greenswarm.memory"
LABEL_SPEC = "greenswarm.spec"  # the whole request, JSON, for whoever inspects the service

# On Swarm nodes.
CAPACITY_CPU_LABEL = "greenswarm.capacity.cpu_shares"
CAPACITY_MEMORY_LABEL = "greenswarm.capacity.memory_bytes"
AGENT_URL_LABEL = "greenswarm.agent.url"

DOCKER_API_VERSION = "1.41"  # Docker 20.10 and every later engine speak it
