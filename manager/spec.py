"""Validation of ``POST /requests`` bodies (DESIGN 3.1). Pure: every error names its field.

What Docker or the Swarm would refuse later (a NUL byte, a volume at "/", a spec too large for
one raft message) is refused here, so that an accepted request is one the Swarm can run.
"""

from __future__ import annotations

import json
import math
import re
import shlex
import uuid
from typing import Any

from domain.classes import check_class
from domain.constraints import check_constraints, constraint_texts
from domain.errors import ValidationError
from domain.model import (
    MIN_CPU_SHARES,
    Request,
    check_id,
    check_int,
    check_task_id,
    check_task_type,
    checkpoint_of,
)
from domain.units import parse_memory
from federation.deploy import MAX_LINKS, MAX_MEMBERS, DeploymentSpec, Member, request_id
from federation.placement import JobLink

FIELDS = {
    "image",
    "command",
    "env",
    "ports",
    "name",
    "cpu_shares",
    "memory",
    "type",
    "class",
    "queue",
    "volumes",
    "constraints",
    "checkpoint",
    "checkpoint_interval_s",
}
IMAGE = re.compile(r"^[a-z0-9][a-z0-9._/:@-]{0,254}$", re.IGNORECASE)
ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,127}$")
MAX_COMMAND_ITEMS = 256
MAX_ENV = 128
MAX_ENV_VALUE_CHARS = 32_768
MAX_PORTS = 32
MAX_VOLUMES = 16
# The normalised spec as JSON: it becomes a Swarm service (whose raft message is at most
# 1.5 MiB) and a request record, so it stays far below that.
MAX_SPEC_BYTES = 262_144


def parse_spec(
    body: Any, *, max_cpu_shares: int, max_memory: int
) -> tuple[Request, dict[str, Any], bool | None]:
    """The scheduler's Request, the normalised spec to run, and whether to queue."""
    if not isinstance(body, dict):
        raise ValidationError("body", "must be a JSON object")
    unknown = sorted(set(body) - FIELDS)
    if unknown:
        raise ValidationError(unknown[0], "unknown field")
    image = body.get("image")
    if not isinstance(image, str) or not IMAGE.fullmatch(image):
        raise ValidationError("image", "is required: an image reference such as 'redis:7'")
    request_id = body.get("name")
    request_id = (
        check_task_id(request_id, "name")
        if request_id is not None
        else f"r-{uuid.uuid4().hex[:12]}"
    )
    cpu_shares = check_int(body.get("cpu_shares"), "cpu_shares", MIN_CPU_SHARES)
    if cpu_shares > max_cpu_shares:
        raise ValidationError("cpu_shares", f"exceeds the largest host ({max_cpu_shares} shares)")
    if "memory" not in body:
        raise ValidationError("memory", "is required (bytes, or a size such as '512m')")
    memory = parse_memory(body["memory"])
    if memory < 4 * 2**20:
        raise ValidationError("memory", "must be at least 4m (Docker's minimum is 6m)")
    if memory > max_memory:
        raise ValidationError("memory", f"exceeds the largest host ({max_memory} bytes)")
    kind = check_task_type(body.get("type"), "type")
    cls = check_class(body.get("class"), "class")
    constraints = check_constraints(body.get("constraints"), "constraints")
    queue = body.get("queue")  # absent: the policy's habit (qos admits every request)
    if queue is not None and not isinstance(queue, bool):
        raise ValidationError("queue", "must be true or false")
    # a checkpointable job (DESIGN 3.14): a kill loses only its run since its last checkpoint
    checkpoint_s = checkpoint_of(body, kind)
    spec: dict[str, Any] = {
        "image": image,
        "command": _command(body.get("command")),
        "env": _env(body.get("env")),
        "ports": _ports(body.get("ports")),
        "volumes": _volumes(body.get("volumes")),
        "name": request_id,
        "cpu_shares": cpu_shares,
        "memory": memory,
        "type": kind.value,
        "class": cls,
        "constraints": constraint_texts(constraints),
    }
    if checkpoint_s > 0:
        spec["checkpoint"] = True
        spec["checkpoint_interval_s"] = checkpoint_s
    size = len(json.dumps(spec).encode())
    if size > MAX_SPEC_BYTES:
        raise ValidationError(
            "body", f"the request is {size} bytes as JSON; at most {MAX_SPEC_BYTES} are taken"
        )
    return (Request(request_id, cls, kind, cpu_shares, memory, constraints, checkpoint_s), spec,
            queue)


def _no_nul(value: str, field: str) -> str:
    if "\x00" in value:
        raise ValidationError(field, "must not contain a NUL character")
    return value


def _command(value: object) -> list[str]:
    if value is None:
        return []
    if isinstance(value, str):
        try:
            parts = shlex.split(value)
        except ValueError as exc:
            raise ValidationError("command", f"cannot split: {exc}") from None
        _no_nul(value, "command")
    elif isinstance(value, list) and all(isinstance(p, str) for p in value):
        parts = [_no_nul(p, f"command[{i}]") for i, p in enumerate(value)]
    else:
        raise ValidationError("command", "must be a string or a list of strings")
    if len(parts) > MAX_COMMAND_ITEMS or any(len(p) > 4096 for p in parts):
        raise ValidationError("command", "is too long")
    return parts


def _env(value: object) -> dict[str, str]:
    if value is None:
        return {}
    if not isinstance(value, dict) or len(value) > MAX_ENV:
        raise ValidationError("env", f"must be an object of at most {MAX_ENV} names")
    env = {}
    for name, item in value.items():
        if not ENV_NAME.fullmatch(name):
            raise ValidationError(f"env.{name}", "is not a valid variable name")
        if isinstance(item, bool) or not isinstance(item, str | int | float):
            raise ValidationError(f"env.{name}", "must be a string or a number")
        text = _no_nul(str(item), f"env.{name}")
        if len(text) > MAX_ENV_VALUE_CHARS:
            raise ValidationError(f"env.{name}", f"is longer than {MAX_ENV_VALUE_CHARS} characters")
        env[name] = text
    return env


def _ports(value: object) -> list[dict[str, Any]]:
    if value is None:
        return []
    if not isinstance(value, list) or len(value) > MAX_PORTS:
        raise ValidationError("ports", f"must be a list of at most {MAX_PORTS} ports")
    ports, published = [], set()
    for index, item in enumerate(value):
        path = f"ports[{index}]"
        if isinstance(item, str):
            match = re.fullmatch(r"(\d+):(\d+)(?:/(tcp|udp))?", item)
            if match is None:
                raise ValidationError(path, "must be 'published:target[/tcp|udp]'")
            item = {
                "published": int(match[1]),
                "target": int(match[2]),
                "protocol": match[3] or "tcp",
            }
        if not isinstance(item, dict) or set(item) - {"published", "target", "protocol"}:
            raise ValidationError(path, "must be {published, target, protocol}")
        port = {
            "published": check_int(item.get("published"), f"{path}.published", 1, 65535),
            "target": check_int(item.get("target"), f"{path}.target", 1, 65535),
            "protocol": item.get("protocol", "tcp"),
        }
        if port["protocol"] not in {"tcp", "udp"}:
            raise ValidationError(f"{path}.protocol", "must be tcp or udp")
        if port["published"] in published:
            raise ValidationError(f"{path}.published", "is published twice")
        published.add(port["published"])
        ports.append(port)
    return ports


def _volumes(value: object) -> list[str]:
    """Container paths that get an anonymous volume (removed with the container), normalised
    ("/data/" is "/data"). Not "/" (Docker refuses to mount over the root), no ".." (where it
    would land depends on the image), no NUL, no mount point twice."""
    if value is None:
        return []
    if not isinstance(value, list) or len(value) > MAX_VOLUMES:
        raise ValidationError("volumes", f"must be a list of at most {MAX_VOLUMES} absolute paths")
    paths: list[str] = []
    for index, path in enumerate(value):
        field = f"volumes[{index}]"
        if not isinstance(path, str) or not path.startswith("/") or len(path) > 1024:
            raise ValidationError(field, "must be an absolute path")
        parts = [part for part in _no_nul(path, field).split("/") if part not in ("", ".")]
        if not parts:
            raise ValidationError(field, "must not be the root '/'")
        if ".." in parts:
            raise ValidationError(field, "must not contain '..'")
        normal = "/" + "/".join(parts)
        if normal in paths:
            raise ValidationError(field, f"mounts {normal} twice")
        paths.append(normal)
    return paths


DEPLOYMENT_FIELDS = {"name", "requests", "links"}
LINK_FIELDS = {"a", "b", "max_latency_ms", "min_bandwidth_mbit"}


def parse_deployment(body: Any, *, max_cpu_shares: int, max_memory: int) -> DeploymentSpec:
    """A POST /deployments body (DESIGN 12): its name, its requests (each a POST /requests
    body with a ``name`` unique in the deployment; its id becomes ``<deployment>-<name>``, and
    it never queues) and the links between them. Every error names its field."""
    if not isinstance(body, dict):
        raise ValidationError("body", "must be a JSON object")
    unknown = sorted(set(body) - DEPLOYMENT_FIELDS)
    if unknown:
        raise ValidationError(unknown[0], "unknown field")
    name = check_id(body.get("name"), "name")
    raw = body.get("requests")
    if not isinstance(raw, list) or not raw or len(raw) > MAX_MEMBERS:
        raise ValidationError("requests", f"must be a list of 1 to {MAX_MEMBERS} requests")
    members: list[Member] = []
    for index, item in enumerate(raw):
        at = f"requests[{index}]"
        if not isinstance(item, dict):
            raise ValidationError(at, "must be a JSON object (a POST /requests body)")
        member = check_id(item.get("name"), f"{at}.name")
        if any(m.name == member for m in members):
            raise ValidationError(f"{at}.name", f"names {member!r} twice")
        if "queue" in item and item["queue"] is not False:
            raise ValidationError(f"{at}.queue", "a deployment's requests never queue")
        full = request_id(name, member)
        check_task_id(full, f"{at}.name")
        if len(full) > 128:  # check_id's bound, for the joined id
            raise ValidationError(f"{at}.name", "with the deployment's name, longer than 128")
        try:
            request, spec, _ = parse_spec({**item, "name": full},
                                          max_cpu_shares=max_cpu_shares, max_memory=max_memory)
        except ValidationError as exc:
            raise ValidationError(f"{at}.{exc.field}", exc.message) from None
        members.append(Member(member, request, spec))
    names = {m.name for m in members}
    return DeploymentSpec(name, tuple(members), _links(body.get("links", []), names))


def _links(value: object, names: set[str]) -> tuple[JobLink, ...]:
    if not isinstance(value, list) or len(value) > MAX_LINKS:
        raise ValidationError("links", f"must be a list of at most {MAX_LINKS} links")
    links = []
    for index, item in enumerate(value):
        at = f"links[{index}]"
        if not isinstance(item, dict):
            raise ValidationError(at, "must be {a, b, max_latency_ms, min_bandwidth_mbit}")
        unknown = sorted(set(item) - LINK_FIELDS)
        if unknown:
            raise ValidationError(f"{at}.{unknown[0]}", "unknown field")
        ends = []
        for end in ("a", "b"):
            member = item.get(end)
            if not isinstance(member, str) or member not in names:
                raise ValidationError(f"{at}.{end}", "must name a request of the deployment")
            ends.append(member)
        if ends[0] == ends[1]:
            raise ValidationError(f"{at}.b", "must be another request than a")
        latency = _bound(item, "max_latency_ms", at, positive=False)
        bandwidth = _bound(item, "min_bandwidth_mbit", at, positive=True)
        links.append(JobLink(ends[0], ends[1], latency, bandwidth))
    return tuple(links)


def _bound(item: dict[str, Any], name: str, at: str, *, positive: bool) -> float | None:
    if name not in item:
        return None
    value, field = item[name], f"{at}.{name}"
    if isinstance(value, bool) or not isinstance(value, int | float) \
            or not math.isfinite(value) or value < 0 or (positive and value == 0):
        raise ValidationError(field, "must be a finite number " + ("> 0" if positive else ">= 0"))
    return float(value)
