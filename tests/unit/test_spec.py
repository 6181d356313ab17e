"""POST /requests bodies (manager/spec.py): what the Swarm would refuse later is refused up
front with 400 naming the field (the audit's 1 MB env value, volume "/", NUL in a command),
and nothing of it reaches a record or a service."""

from __future__ import annotations

import json
from typing import Any

import pytest

from domain.errors import ValidationError
from domain.model import check_id
from manager.spec import MAX_ENV_VALUE_CHARS, MAX_SPEC_BYTES, parse_spec

LARGEST = {"max_cpu_shares": 4096, "max_memory": 8 * 2**30}


def body(**change: Any) -> dict[str, Any]:
    return {"image": "greenswarm/busybox:latest", "cpu_shares": 100, "memory": "16m",
            "type": "job", "class": 2, "name": "r1", **change}


def refused(change: dict[str, Any]) -> ValidationError:
    with pytest.raises(ValidationError) as caught:
        parse_spec(body(**change), **LARGEST)
    return caught.value


BAD = [
    ("env.BIG", {"env": {"BIG": "v" * 2**20}}),  # the audit's 1 MB value
    ("env.BIG", {"env": {"BIG": "v" * (MAX_ENV_VALUE_CHARS + 1)}}),
    ("env.X", {"env": {"X": "a\x00b"}}),
    ("env.X\n", {"env": {"X\n": "v"}}),
    ("volumes[0]", {"volumes": ["/"]}),
    ("volumes[0]", {"volumes": ["//"]}),
    ("volumes[0]", {"volumes": ["/data/.."]}),
    ("volumes[1]", {"volumes": ["/data", "/data/../etc"]}),
    ("volumes[0]", {"volumes": ["/da\x00ta"]}),
    ("volumes[1]", {"volumes": ["/data", "/data/"]}),  # the same mount point twice
    ("constraints", {"constraints": "node.labels.disk==ssd"}),  # a list, not a string
    ("constraints[1]", {"constraints": ["node.labels.disk==ssd", "node.labels.disk=ssd"]}),
    ("constraints[0]", {"constraints": ["node.name==x"]}),
    ("constraints[0]", {"constraints": ["node.hostname==a b"]}),
    ("command", {"command": "echo a\x00b"}),
    ("command[1]", {"command": ["echo", "a\x00b"]}),
    ("image", {"image": "redis\n"}),
    ("image", {"image": "redis\x00"}),
    ("name", {"name": "r1\n"}),
    ("name", {"name": "utilization"}),  # /registry/tasks/utilization is another route
    ("ports[0]", {"ports": ["80:80\n"]}),
    ("memory", {"memory": "16m\x00"}),
]


@pytest.mark.parametrize(("field", "change"), BAD, ids=[repr(c)[:60] for _, c in BAD])
def test_what_the_swarm_would_refuse_is_refused_naming_the_field(
    field: str, change: dict[str, Any]
) -> None:
    assert refused(change).field == field


def test_the_whole_spec_is_bounded() -> None:
    """Each value within its own bound, together too large for one Swarm service spec."""
    count = MAX_SPEC_BYTES // MAX_ENV_VALUE_CHARS + 1
    env = {f"V{i}": "v" * MAX_ENV_VALUE_CHARS for i in range(count)}
    error = refused({"env": env})
    assert error.field == "body" and str(MAX_SPEC_BYTES) in error.message


def test_what_docker_takes_is_kept_as_given() -> None:
    """The bounds leave ordinary specs alone: long but bounded values, nested volume paths,
    a command with quotes and newlines."""
    value = "v" * MAX_ENV_VALUE_CHARS
    _, spec, _ = parse_spec(body(env={"A": value, "B": 7}, volumes=["/data", "/var/lib/x.d"],
                                 command=["sh", "-c", "echo 'a\nb'"]), **LARGEST)
    assert spec["env"] == {"A": value, "B": "7"}
    assert spec["volumes"] == ["/data", "/var/lib/x.d"]
    assert spec["command"] == ["sh", "-c", "echo 'a\nb'"]
    assert len(json.dumps(spec)) < MAX_SPEC_BYTES


def test_ids_end_where_they_end() -> None:
    """A trailing newline slipped past the id pattern ('$' matches before it)."""
    with pytest.raises(ValidationError):
        check_id("abc\n")
    assert check_id("abc") == "abc"


def test_constraints_reach_the_request_and_the_spec() -> None:
    request, spec, _ = parse_spec(
        body(constraints=["node.labels.disk == ssd", "node.hostname!=gs-node2"]), **LARGEST)
    assert [c.text for c in request.constraints] == ["node.labels.disk==ssd",
                                                     "node.hostname!=gs-node2"]
    assert spec["constraints"] == ["node.labels.disk==ssd", "node.hostname!=gs-node2"]


def test_a_job_may_checkpoint_and_a_service_may_not() -> None:
    """DESIGN 3.14: "checkpoint": true with "checkpoint_interval_s" reaches the request and
    the spec; without the interval, with it alone, or for a service: 400 naming the field."""
    request, spec, _ = parse_spec(body(checkpoint=True, checkpoint_interval_s=60), **LARGEST)
    assert request.checkpoint_interval_s == 60.0
    assert (spec["checkpoint"], spec["checkpoint_interval_s"]) == (True, 60.0)
    plain, plain_spec, _ = parse_spec(body(), **LARGEST)
    assert plain.checkpoint_interval_s == 0.0 and "checkpoint" not in plain_spec
    for change, field in (({"checkpoint": True}, "checkpoint_interval_s"),
                          ({"checkpoint_interval_s": 60}, "checkpoint_interval_s"),
                          ({"checkpoint": 1, "checkpoint_interval_s": 60}, "checkpoint"),
                          ({"checkpoint": True, "checkpoint_interval_s": -1},
                           "checkpoint_interval_s"),
                          ({"checkpoint": True, "checkpoint_interval_s": 60, "type": "service"},
                           "checkpoint_interval_s")):
        assert refused(change).field == field, change
