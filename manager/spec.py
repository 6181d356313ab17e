"""``POST /requests`` and ``POST /deployments`` bodies (DESIGN 3.1, 12). Pure: every error
names its field.

Each body is a field spec (domain/fields.py): the parser reads with it, and the OpenAPI document
states it (manager/openapi.py), so the two cannot disagree. What Docker or the Swarm would
refuse later (an image reference it cannot read, memory below its floor, a NUL byte, a volume
at "/", a spec too large for one raft message) is refused here, so that an accepted request is
one the Swarm can run. The few rules no schema can state (a port published twice, a volume
mounted twice, the spec's size as JSON, a link naming a request of its deployment) are checked
after the spec and said in its descriptions.
"""

from __future__ import annotations

import functools
import json
import re
import shlex
import uuid
from typing import Any

from domain.classes import CLASS
from domain.constraints import CONSTRAINTS, constraint_texts
from domain.errors import ValidationError
from domain.fields import (
    Bool,
    Choice,
    Either,
    Fields,
    Int,
    Items,
    Num,
    Query,
    Table,
    Text,
    Then,
)
from domain.images import IMAGE
from domain.lifecycle import RequestStatus
from domain.model import (
    ID,
    MAX_CHECKPOINT_INTERVAL_S,
    MIN_CPU_SHARES,
    TASK_ID,
    TASK_TYPE,
    Request,
    TaskType,
    checkpoint_of,
)
from domain.units import MIN_MEMORY_BYTES, int_range, memory_field
from federation.deploy import MAX_LINKS, MAX_MEMBERS, DeploymentSpec, Member, request_id
from federation.placement import JobLink

MAX_COMMAND_ITEMS = 256
MAX_COMMAND_CHARS = 4096  # an item of the list form, or the whole string form
MAX_ENV = 128
MAX_ENV_VALUE_CHARS = 32_768
MAX_PORTS = 32
MAX_VOLUMES = 16
MAX_VOLUME_CHARS = 1024
# The normalised spec as JSON: it becomes a Swarm service (whose raft message is at most
# 1.5 MiB) and a request record, so it stays far below that.
MAX_SPEC_BYTES = 262_144

NO_NUL = r"[^\x00]*"
# What shlex.split (POSIX) reads without an error: plain characters, a backslash and the one it
# escapes, '...' and "..." (in which a backslash escapes one), each quote closed; no NUL.
SHELL_WORDS = r"""(?:[^'"\\\x00]|\\[^\x00]|'[^'\x00]*'|"(?:[^"\\\x00]|\\[^\x00])*")*"""
ENV_NAME = "[A-Za-z_][A-Za-z0-9_]{0,127}"
_PORT = int_range(1, 65535)
PORT_TEXT = f"({_PORT}):({_PORT})(?:/(tcp|udp))?"
# An absolute path with a component other than "" or "." and none "..": not the root, and
# nowhere that depends on the image. SKIP is "" or "."; NAME any other component but "..".
_NAME = r"(?:[^/.\x00][^/\x00]*|[.][^/.\x00][^/\x00]*|[.][.][^/\x00]+)"
VOLUME_TEXT = rf"/(?:[.]?/)*{_NAME}(?:/(?:[.]?|{_NAME}))*"


def _command_words(text: str, path: str) -> list[str]:
    return shlex.split(text)  # SHELL_WORDS took it: it splits


COMMAND = Either(
    (Then(Text(SHELL_WORDS, max_length=MAX_COMMAND_CHARS,
               message="must be words a POSIX shell can split: each quote closed, no NUL"),
          _command_words),
     Items(Text(NO_NUL, max_length=MAX_COMMAND_CHARS, message="must not contain a NUL"),
           MAX_COMMAND_ITEMS)),
    message="must be a string or a list of strings")
ENV = Table(Either((Text(NO_NUL, max_length=MAX_ENV_VALUE_CHARS,
                         message="must not contain a NUL"), Num(as_float=False)),
                   message="must be a string or a number"),
            ENV_NAME, MAX_ENV)


def _port_of_text(text: str, path: str) -> dict[str, Any]:
    match = re.fullmatch(PORT_TEXT, text)
    assert match is not None  # PORT_TEXT took it
    return {"published": int(match[1]), "target": int(match[2]), "protocol": match[3] or "tcp"}


PORT_NUMBER = Int(1, 65535)
PORTS = Items(
    Either((Then(Text(PORT_TEXT, message="must be 'published:target[/tcp|udp]'",
                      example="8080:80/tcp"), _port_of_text),
            Fields({"published": PORT_NUMBER, "target": PORT_NUMBER,
                    "protocol": Choice(("tcp", "udp"))}, ("published", "target"))),
           message="must be 'published:target[/tcp|udp]' or {published, target, protocol}"),
    MAX_PORTS, description="no port published twice")
VOLUMES = Items(Text(VOLUME_TEXT, max_length=MAX_VOLUME_CHARS,
                     message="must be an absolute path other than '/', without '..' or NUL"),
                MAX_VOLUMES,
                description="container paths that get an anonymous volume; none twice "
                            "('/data/' is '/data')")


@functools.lru_cache(maxsize=16)
def request_body(max_cpu_shares: int | None = None, max_memory: int | None = None) -> Fields:
    """A ``POST /requests`` body, with CPU shares and memory up to the largest host's (no
    bound when not given: no host is known)."""
    return Fields(
        {
            "image": IMAGE,
            "command": COMMAND,
            "env": ENV,
            "ports": PORTS,
            "volumes": VOLUMES,
            "name": TASK_ID,
            "cpu_shares": Int(MIN_CPU_SHARES, max_cpu_shares,
                              description="1024 = one core; at most the largest host's"),
            "memory": memory_field(MIN_MEMORY_BYTES, max_memory, "the largest host"),
            "type": TASK_TYPE,
            "class": CLASS,
            "queue": Bool(description="wait in the pending queue if nothing fits"),
            "checkpoint": Bool(description="a job that saves its progress in /checkpoint and "
                               "resumes from it when restarted (DESIGN 3.14): a kill loses "
                               "only its run since its last checkpoint"),
            "checkpoint_interval_s": Num(0, MAX_CHECKPOINT_INTERVAL_S, above=True,
                                         description="how often it checkpoints; required with "
                                         "checkpoint: true, refused without it (a job's only)"),
            "constraints": CONSTRAINTS,
            "forwarded_from": ID.but_described(
                "set by a peer cluster that forwards the request (DESIGN 12): it is placed "
                "here and never forwarded again"),
        },
        ("image", "cpu_shares", "memory", "type", "class"),
        description=f"at most {MAX_SPEC_BYTES} bytes as JSON once normalised",
    )


def parse_spec(
    body: Any, *, max_cpu_shares: int, max_memory: int
) -> tuple[Request, dict[str, Any], bool | None]:
    """The scheduler's Request, the normalised spec to run, and whether to queue."""
    read = request_body(max_cpu_shares, max_memory).read(body, "")
    request_id = read.get("name") or f"r-{uuid.uuid4().hex[:12]}"
    kind = TaskType(read["type"])
    constraints = tuple(dict.fromkeys(read.get("constraints", ())))  # twice is once
    # a checkpointable job (DESIGN 3.14): a kill loses only its run since its last checkpoint
    checkpoint_s = checkpoint_of(read, kind)
    spec: dict[str, Any] = {
        "image": read["image"],
        "command": read.get("command", []),
        "env": {name: str(value) for name, value in read.get("env", {}).items()},
        "ports": _ports(read.get("ports", [])),
        "volumes": _volumes(read.get("volumes", [])),
        "name": request_id,
        "cpu_shares": read["cpu_shares"],
        "memory": read["memory"],
        "type": kind.value,
        "class": read["class"],
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
    request = Request(request_id, read["class"], kind, read["cpu_shares"], read["memory"],
                      constraints, checkpoint_s)
    return request, spec, read.get("queue")  # no queue: the policy's habit (qos admits all)


def _ports(ports: list[dict[str, Any]]) -> list[dict[str, Any]]:
    published: set[int] = set()
    for index, port in enumerate(ports):
        port.setdefault("protocol", "tcp")
        if port["published"] in published:
            raise ValidationError(f"ports[{index}].published", "is published twice")
        published.add(port["published"])
    return ports


def _volumes(paths: list[str]) -> list[str]:
    """Normalised ("/data/" is "/data"; VOLUME_TEXT took "/", ".." and NUL out), none twice."""
    normal: list[str] = []
    for index, path in enumerate(paths):
        volume = "/" + "/".join(part for part in path.split("/") if part not in ("", "."))
        if volume in normal:
            raise ValidationError(f"volumes[{index}]", f"mounts {volume} twice")
        normal.append(volume)
    return normal


LINK = Fields({"a": ID.but_described("a request's name in the deployment"),
               "b": ID.but_described("another request's name"),
               "max_latency_ms": Num(0.0), "min_bandwidth_mbit": Num(0.0, above=True)},
              ("a", "b"))


@functools.lru_cache(maxsize=16)
def deployment_body(max_cpu_shares: int | None = None, max_memory: int | None = None) -> Fields:
    """A ``POST /deployments`` body: its requests are ``POST /requests`` bodies, each with a
    name, never queued."""
    member = request_body(max_cpu_shares, max_memory).but(
        required=("name",), forwarded_from=None, name=ID,
        queue=Choice((False,), description="a deployment's requests never queue"),
        description="a POST /requests body with a name unique in the deployment; its id is "
                    "'<deployment>-<name>' (at most 128 characters)")
    return Fields({"name": ID, "requests": Items(member, MAX_MEMBERS, 1),
                   "links": Items(LINK, MAX_LINKS, description="each between two requests "
                                                               "of the deployment")},
                  ("name", "requests"))


def parse_deployment(body: Any, *, max_cpu_shares: int, max_memory: int) -> DeploymentSpec:
    """A POST /deployments body (DESIGN 12): its name, its requests (each a POST /requests
    body with a ``name`` unique in the deployment; its id becomes ``<deployment>-<name>``, and
    it never queues) and the links between them. Every error names its field."""
    read = deployment_body(max_cpu_shares, max_memory).read(body, "")
    name = read["name"]
    members: list[Member] = []
    for index, item in enumerate(body["requests"]):
        at = f"requests[{index}]"
        member = item["name"]
        if any(m.name == member for m in members):
            raise ValidationError(f"{at}.name", f"names {member!r} twice")
        full = request_id(name, member)
        if len(full) > 128:  # ID's bound, for the joined id
            raise ValidationError(f"{at}.name", "with the deployment's name, longer than 128")
        try:
            request, spec, _ = parse_spec({**item, "name": full},
                                          max_cpu_shares=max_cpu_shares, max_memory=max_memory)
        except ValidationError as exc:
            raise ValidationError(f"{at}.{exc.field}", exc.message) from None
        members.append(Member(member, request, spec))
    names = {m.name for m in members}
    return DeploymentSpec(name, tuple(members), _links(read.get("links", []), names))


def _links(links: list[dict[str, Any]], names: set[str]) -> tuple[JobLink, ...]:
    out = []
    for index, link in enumerate(links):
        at = f"links[{index}]"
        for end in ("a", "b"):
            if link[end] not in names:
                raise ValidationError(f"{at}.{end}", "must name a request of the deployment")
        if link["a"] == link["b"]:
            raise ValidationError(f"{at}.b", "must be another request than a")
        out.append(JobLink(link["a"], link["b"], link.get("max_latency_ms"),
                           link.get("min_bandwidth_mbit")))
    return tuple(out)


# The manager's query strings: GET /requests, /deployments and /events (every other GET of
# the manager takes none: domain.fields.NO_QUERY).
LIMIT = Int(1, 10_000, description="at most this many, the newest")
REQUEST_LIST = Query({"status": Choice(tuple(s.value for s in RequestStatus)), "limit": LIMIT})
DEPLOYMENT_LIST = Query({"limit": LIMIT})
EVENT_LIST = Query({
    "since": Text("0|[$]|[0-9]{1,20}-[0-9]{1,20}",
                  message="must be a cursor that GET /events gave, 0 or $",
                  description="0: from the oldest kept; $: only the cursor of now; else "
                              "after this cursor"),
    "limit": Int(1, 1000),
})
HISTORY_LIST = Query({
    "since": Text("0|[0-9]{1,20}-[0-9]{1,20}",
                  message="must be a cursor that GET /history gave, or 0",
                  description="0: from the oldest kept; else after this cursor"),
    "limit": Int(1, 10_000),
})
