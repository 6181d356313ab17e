"""The OpenAPI document (manager/openapi.py) is generated from the specs the handlers read
with: every bound and pattern has one source, named schemas are components referred to, and the
request body's spec takes exactly what the document states."""

from __future__ import annotations

import json
import re
from fractions import Fraction
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from domain.classes import CUT_RECEIVED
from domain.constraints import CONSTRAINT_PATTERN, MAX_CONSTRAINT_CHARS, Constraint
from domain.errors import ValidationError
from domain.images import IMAGE_PATTERN, MAX_IMAGE_CHARS
from domain.units import MIN_MEMORY_BYTES, size_pattern
from host_registry.bodies import MAX_POWER_W
from manager.openapi import OPERATIONS, Bounds, document
from manager.spec import SHELL_WORDS, VOLUME_TEXT, parse_spec, request_body
from tests.unit.test_fields import reads, valid

MIB = 2**20

BOUNDS = Bounds(2048, 4 * 2**30, 4096, 8 * 2**30)


def test_the_documents_bounds_and_patterns_are_the_parsers() -> None:
    doc = document(BOUNDS)
    schemas = doc["components"]["schemas"]
    new = schemas["NewRequest"]["properties"]
    assert new["cpu_shares"]["maximum"] == 2048
    memory = new["memory"]["oneOf"]
    assert (memory[0]["minimum"], memory[0]["maximum"]) == (MIN_MEMORY_BYTES, 4 * 2**30)
    assert memory[1]["pattern"] == f"^(?:{size_pattern(MIN_MEMORY_BYTES, 4 * 2**30)})$"
    assert new["image"]["pattern"] == f"^(?:{IMAGE_PATTERN})$"
    assert new["image"]["maxLength"] == MAX_IMAGE_CHARS
    assert new["constraints"]["items"]["pattern"] == f"^(?:{CONSTRAINT_PATTERN})$"
    assert new["volumes"]["items"]["pattern"] == f"^(?:{VOLUME_TEXT})$"
    assert new["command"]["oneOf"][0]["pattern"] == f"^(?:{SHELL_WORDS})$"
    member = schemas["NewDeployment"]["properties"]["requests"]["items"]["properties"]
    assert member["cpu_shares"]["maximum"] == 4096
    assert schemas["HostUtilization"]["properties"]["power_w"]["maximum"] == MAX_POWER_W
    placement = schemas["Placement"]["properties"]
    assert placement["cut_received"]["enum"] == ["0", "1/6", "1/3", "1/2", 0]


def test_every_operation_reads_with_a_spec_and_schemas_are_shared_by_reference() -> None:
    doc = document(BOUNDS)
    text = json.dumps(doc)
    # each named schema is stated once, as a component, and referred to
    for name in doc["components"]["schemas"]:
        assert f'"#/components/schemas/{name}"' in text, name
    assert text.count('"required": ["id", "host", "class", "type", "cpu_shares", "memory"]') == 1
    for operation in OPERATIONS:
        if operation.method in ("post", "put") and operation.path != "/registry/tasks/{task_id}/kill":
            assert operation.body is not None, operation.path


def test_the_request_spec_takes_what_the_document_states() -> None:
    """Bodies at the bounds' edges, read by the parser and judged by the document alike."""
    doc = document(BOUNDS)
    body_schema = {"$ref": "#/components/schemas/NewRequest"}
    base = {"image": "redis:7", "cpu_shares": 2, "memory": "6m", "type": "job", "class": 1}
    changes: list[dict[str, Any]] = [
        {}, {"memory": "0"}, {"memory": 6 * MIB - 1}, {"memory": "4g"}, {"memory": "4.001g"},
        {"cpu_shares": 2049}, {"cpu_shares": 1}, {"image": "NaN"}, {"image": "str"},
        {"command": "echo 'a b'"}, {"command": "echo 'a"}, {"command": "a\\"},
        {"command": ["a\x00"]}, {"env": {"A": 1.5, "B": "x"}},
        {"ports": ["8080:80/tcp"]}, {"ports": ["0:80"]}, {"ports": ["65536:80"]},
        {"ports": [{"published": 1, "target": 2, "protocol": "udp"}]},
        {"volumes": ["/data/"]}, {"volumes": ["/"]}, {"volumes": ["/./"]}, {"volumes": ["/a/.."]},
        {"volumes": ["/.../x"]}, {"volumes": ["data"]},
        {"constraints": ["node.labels.disk == ssd"]}, {"constraints": ["node.name==x"]},
        {"name": "utilization"}, {"name": "a" * 128}, {"name": "a" * 129},
    ]
    for change in changes:
        body = {**base, **change}
        stated = valid(body_schema, body, doc["components"]["schemas"])
        assert reads(request_body(2048, 4 * 2**30), body) is stated, change
    # the rules no schema states: refused by the parser, taken by the document
    for change in ({"env": {"1A": "x"}}, {"ports": ["80:80", "80:81"]},
                   {"volumes": ["/data", "/data/"]}):
        body = {**base, **change}
        assert valid(body_schema, body, doc["components"]["schemas"]), change
        try:
            parse_spec(body, max_cpu_shares=2048, max_memory=4 * 2**30)
            parsed = True
        except ValidationError:
            parsed = False
        assert not parsed, change


def test_constraints_as_a_pattern_are_what_the_parser_takes() -> None:
    pattern = re.compile(CONSTRAINT_PATTERN)
    for text in ("node.labels.disk==ssd", " node.id != x ", "engine.labels.a.b==c", "a==b",
                 "node.labels.==x", "node.hostname==", "node.id==a==b", "node.id!==b",
                 "node.labels.a b==c", "node.platform.arch==x86_64", "node.role=manager",
                 "x" * (MAX_CONSTRAINT_CHARS + 1)):
        try:
            Constraint.parse(text, "c")
            parsed = True
        except ValidationError:
            parsed = False
        stated = len(text) <= MAX_CONSTRAINT_CHARS and pattern.fullmatch(text) is not None
        assert parsed is stated, text


def test_cut_received_takes_the_class_tables_steps_as_exact_fractions() -> None:
    assert CUT_RECEIVED.read("1/6", "c") == Fraction(1, 6)
    assert CUT_RECEIVED.read(0, "c") == 0
    for value in ("", "2/12", "0.5", "1", "1/5", 0.0, None):
        assert not reads(CUT_RECEIVED, value), value


@settings(max_examples=300, deadline=None)
@given(st.one_of(
    st.from_regex(CONSTRAINT_PATTERN, fullmatch=True),
    st.lists(st.sampled_from(["node.", "labels.", "engine.", "id", "hostname", "role", "platform.",
                              "os", "arch", "=", "==", "!=", "!", " ", "a", "x.y", "-", "\n"]),
             max_size=8).map("".join),
))
def test_the_constraint_pattern_takes_exactly_what_the_parser_takes(text: str) -> None:
    try:
        Constraint.parse(text, "c")
        parsed = True
    except ValidationError:
        parsed = False
    stated = len(text) <= MAX_CONSTRAINT_CHARS and re.fullmatch(CONSTRAINT_PATTERN, text)
    assert parsed is bool(stated), text
