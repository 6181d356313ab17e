"""A fuzz run against the OpenAPI document of a live manager (DESIGN 9): schemathesis
generates requests for every operation, valid and invalid, and no answer may be a 5xx.

The manager is the real one, on a single-node swarm with a real Redis; requests it accepts
become real Swarm services, removed again by the fixture. (schemathesis's own pytest plugin
does not run under pytest 9, so its strategies are driven with hypothesis here.)"""

from __future__ import annotations

import itertools

import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from hypothesis.errors import Unsatisfiable
from schemathesis.checks import not_a_server_error
from schemathesis.generation import GenerationMode

from tests.support.live import TOKEN, Live

pytestmark = [pytest.mark.docker, pytest.mark.redis]
EXAMPLES_PER_OPERATION = 60  # per generation mode


def test_no_operation_answers_a_server_error(live: Live) -> None:
    document = live.get("/openapi.json")
    schema = schemathesis.openapi.from_dict(document)
    operations = [result.ok() for result in schema.get_all_operations()]
    assert len(operations) == sum(len(methods) for methods in document["paths"].values())
    calls = {"count": 0}
    for operation, mode in itertools.product(operations, GenerationMode):
        strategy = operation.as_strategy(generation_mode=mode)

        @given(case=strategy)
        @settings(
            max_examples=EXAMPLES_PER_OPERATION,
            deadline=None,
            database=None,
            suppress_health_check=list(HealthCheck),
        )
        def fuzz(case: schemathesis.Case) -> None:
            calls["count"] += 1
            case.call_and_validate(
                base_url=live.url,
                checks=[not_a_server_error],
                headers={"Authorization": f"Bearer {TOKEN}"},
            )

        try:
            fuzz()
        except Unsatisfiable:
            assert mode is GenerationMode.NEGATIVE  # nothing to make invalid (no parameters)
    assert calls["count"] >= len(operations) * 20
    assert live.get("/healthz")["status"] == "ok"
