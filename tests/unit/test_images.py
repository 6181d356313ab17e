"""Image references as Docker reads them (domain/images.py): a table of valid and invalid
names with Docker's reasons, and the one pattern the OpenAPI document states held to the
parser. The audit's case: ``image: "NaN"`` was accepted, then Swarm failed it "not a valid
repository/tag"."""

from __future__ import annotations

import re

import jsonschema_rs
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from domain.errors import ValidationError
from domain.images import (
    IMAGE,
    IMAGE_ID_PATTERN,
    IMAGE_PATTERN,
    MAX_IMAGE_CHARS,
    NAME_TOTAL_MAX_CHARS,
    ImageReference,
    parse_image,
)

HEX64 = "0123456789abcdef" * 4

VALID = [
    # (reference, domain, path, tag, digest) as Docker normalises it
    ("redis", "docker.io", "library/redis", None, None),
    ("redis:7", "docker.io", "library/redis", "7", None),
    ("str", "docker.io", "library/str", None, None),  # valid; whether it exists is not ours
    ("greenswarm/busybox:latest", "docker.io", "greenswarm/busybox", "latest", None),
    ("library/ubuntu:22.04", "docker.io", "library/ubuntu", "22.04", None),
    ("index.docker.io/redis", "docker.io", "library/redis", None, None),  # the legacy host
    ("docker.io/a/b/c", "docker.io", "a/b/c", None, None),
    ("localhost/app", "localhost", "app", None, None),
    ("localhost:5000/team/app:v1.2_rc-3", "localhost:5000", "team/app", "v1.2_rc-3", None),
    ("registry.example.com:443/x", "registry.example.com:443", "x", None, None),
    ("Registry.Example/x", "Registry.Example", "x", None, None),  # a host may be uppercase
    ("Upper/x", "Upper", "x", None, None),  # uppercase first part: a host, as Docker reads it
    ("[::1]:5000/app", "[::1]:5000", "app", None, None),
    ("[::1]/app", "[::1]", "app", None, None),
    ("[ab]:5000/app", "[ab]:5000", "app", None, None),
    ("a-b/c__d/e.f/g_h/i--j", "docker.io", "a-b/c__d/e.f/g_h/i--j", None, None),
    ("my-registry-1/app", "docker.io", "my-registry-1/app", None, None),
    ("a", "docker.io", "library/a", None, None),
    ("app@sha256:" + HEX64, "docker.io", "library/app", None, "sha256:" + HEX64),
    ("app:1@sha256:" + HEX64, "docker.io", "library/app", "1", "sha256:" + HEX64),
    ("app@sha512:" + HEX64 * 2, "docker.io", "library/app", None, "sha512:" + HEX64 * 2),
    ("app:" + "T" * 128, "docker.io", "library/app", "T" * 128, None),  # the longest tag
    ("x0/y", "docker.io", "x0/y", None, None),
    ("a" * MAX_IMAGE_CHARS, "docker.io", "library/" + "a" * MAX_IMAGE_CHARS, None, None),
]

INVALID = [
    ("", "is required"),
    ("NaN", "must be lowercase"),  # the audit's: the repository is library/NaN
    ("Redis:7", "must be lowercase"),
    ("user/Repo", "must be lowercase"),
    (HEX64, "image id"),
    ("redis:", "Docker can read"),
    (":7", "Docker can read"),
    ("redis::7", "Docker can read"),
    ("redis:7:8", "Docker can read"),
    ("redis:-7", "Docker can read"),  # a tag starts with a word character
    ("redis:" + "t" * 129, "Docker can read"),  # tags are at most 128
    ("-redis", "Docker can read"),
    ("redis-", "Docker can read"),
    ("re..dis", "Docker can read"),
    ("re___dis", "Docker can read"),
    ("a//b", "Docker can read"),
    ("a/b/", "Docker can read"),
    ("/a", "Docker can read"),
    ("_/x", "Docker can read"),
    ("[ab]/app", "Docker can read"),  # no '.' or ':': a path, and not one
    ("[]/app", "Docker can read"),
    ("host:port/app", "Docker can read"),  # a port is digits
    ("-host.example/app", "Docker can read"),
    ("host-.example/app", "Docker can read"),
    ("app@sha256:" + HEX64[:63], "Docker can read"),
    ("app@sha256:" + HEX64.upper(), "Docker can read"),  # go-digest: lowercase hex
    ("app@md5:" + HEX64[:32], "Docker can read"),  # Docker knows sha256, sha384, sha512
    ("app@sha256", "Docker can read"),
    ("redis\n", "Docker can read"),
    ("redis\x00", "Docker can read"),
    ("re dis", "Docker can read"),
    ("rédis", "Docker can read"),
    ("a" * (MAX_IMAGE_CHARS + 1), "longer than"),
]


@pytest.mark.parametrize(("text", "domain", "path", "tag", "digest"), VALID,
                         ids=[v[0][:40] for v in VALID])
def test_docker_reads_these(text: str, domain: str, path: str, tag: str | None,
                            digest: str | None) -> None:
    assert parse_image(text) == ImageReference(domain, path, tag, digest)
    assert IMAGE.read(text, "image") == text
    assert re.fullmatch(IMAGE_PATTERN, text) and not re.fullmatch(IMAGE_ID_PATTERN, text)


@pytest.mark.parametrize(("text", "why"), INVALID, ids=[i[0][:40] for i in INVALID])
def test_docker_refuses_these_and_so_does_the_door(text: str, why: str) -> None:
    with pytest.raises(ValidationError) as caught:
        IMAGE.read(text, "image")
    assert caught.value.field == "image" and why in caught.value.message
    assert not stated_valid(text)


def test_the_name_length_is_dockers_once_normalised() -> None:
    # a reference of MAX_IMAGE_CHARS normalises to at most Docker's 255 characters
    longest = parse_image("a" * MAX_IMAGE_CHARS)
    assert len(longest.name) == NAME_TOTAL_MAX_CHARS


STATED = jsonschema_rs.Draft4Validator(IMAGE.schema())  # as schemathesis reads the document


def stated_valid(text: str) -> bool:
    """What the OpenAPI document says of ``text`` (its pattern, maxLength and not), read by
    the JSON Schema validator schemathesis uses (ECMA-262 patterns)."""
    return bool(STATED.is_valid(text))


REFERENCE_CHARS = "ab0-_.:/@[]AZ"


@settings(max_examples=250, deadline=None)
@given(st.one_of(
    st.from_regex(IMAGE_PATTERN, fullmatch=True),
    st.text(REFERENCE_CHARS, max_size=30),
    st.lists(st.sampled_from(["a", "b0", "x-y", "X", "local", "host.io", "h:5000", "[::1]",
                              "__", ".", "-", "0"]), min_size=1, max_size=5).map("/".join),
))
def test_the_stated_pattern_takes_exactly_what_the_parser_takes(text: str) -> None:
    try:
        IMAGE.read(text, "image")
        parsed = True
    except ValidationError:
        parsed = False
    assert stated_valid(text) is parsed, text
