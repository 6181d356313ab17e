"""Validation of ``POST /requests`` bodies (DESIGN 3.1). Pure: every error names its field.

What Docker or the Swarm would refuse later (a NUL byte, a volume at "/", a spec too large for
one raft message) is refused here, so that an accepted request is one the Swarm can run.
"""

from __future__ import annotations

import json
import re
import shlex
import uuid
from typing import Any

from domain.classes import check_class
from domain.constraints import check_constraints, constraint_texts
from domain.errors import ValidationError
from domain.model import MIN_CPU_SHARES, Request, check_int, check_task_id, check_task_type
from domain.units import parse_memory

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
    size = len(json.dumps(spec).encode())
    if size > MAX_SPEC_BYTES:
        raise ValidationError(
            "body", f"the request is {size} bytes as JSON; at most {MAX_SPEC_BYTES} are taken"
        )
    return Request(request_id, cls, kind, cpu_shares, memory, constraints), spec, queue


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
