"""A fuzz run against the OpenAPI document of a live manager (DESIGN 9): schemathesis, as its
users run it (``schemathesis run``: the examples, coverage, fuzzing and stateful phases),
generates requests for every operation, valid and invalid, and every answer must be what the
document says: no 5xx; a documented status, content type, headers and body; invalid data
refused and valid data taken (the document is generated from the specs the server reads with);
an undocumented method answered 405 with ``Allow``; OPTIONS listing exactly the documented
methods; no call served without the token. The stateful phase chains calls along the links it
infers from the answers (a created resource is found, a deleted one is gone).

The manager is the real one, on a single-node swarm with a real Redis; requests it accepts
become real Swarm services, removed again by the fixture. schemathesis reuses the ids it reads
in answers, so it also removes the one host (DELETE /registry/hosts/{id}); until the manager's
next sync finds the node again, a submission answers 503 "no host is known yet", as
documented. So 503, the documented "a backend is unavailable", is no failure here; any other
5xx is."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.live import TOKEN, Live

pytestmark = [pytest.mark.docker, pytest.mark.redis]
MAX_EXAMPLES = 60  # per operation and phase (and stateful scenarios): about two minutes here
# The generation's seed: fixed, so that a CI run can be repeated case for case (a failure seen
# once, with hypothesis's random seed, could not be: its output was cut to the tail of a 6 MB
# body). GREENSWARM_FUZZ_SEED=random explores new cases; any number replays that run.
SEED = os.environ.get("GREENSWARM_FUZZ_SEED", "20261126")
PHASES = "examples,coverage,fuzzing,stateful"
# A body over the size limit is refused with 413 before it is parsed: for invalid data that is
# a rejection too (schemathesis's default list leaves 413 out; a deployment of 100 requests can
# be schema-valid in size and still over the limit). Valid data may still meet the state: 404
# (an id that names nothing), 409 (a name taken, a host that is no Swarm node) and 503 (no host
# known while the removed one is found again).
#
# Valid data is held to being taken everywhere but POST /requests and POST /deployments: there
# the few rules no schema can state stay a 400 naming the field (a port published twice, a
# volume mounted twice, a request over 256 KiB as JSON, a link naming no request of the
# deployment, an env name: OpenAPI 3.0 has no patternProperties; manager/spec.py). And a
# stopped request stays readable: DELETE /requests/{id} stops it, its record and history are
# kept (GET answers it, status "stopped"), unlike a deployment, which DELETE forgets.
CHECKS = {
    "not_a_server_error": 'expected-statuses = ["2xx", "3xx", "4xx", "503"]',
    "status_code_conformance": "",
    "content_type_conformance": "",
    "response_schema_conformance": "",
    "response_headers_conformance": "",
    "negative_data_rejection": 'expected-statuses = ["400", "401", "403", "404", "405", "406", '
                               '"409", "413", "415", "422", "428", "429", "5xx"]',
    "positive_data_acceptance": 'expected-statuses = ["2xx", "401", "403", "404", "409", "503"]',
    "unsupported_method": "",
    "allow_header_conformance": "",
    "ignored_auth": "",
    "use_after_free": "",
    "ensure_resource_availability": "",
}
# The checks are chosen here, not with --checks: given on the command line, they override an
# operation's own switches below.
CONFIG = "[checks]\nenabled = false\n" + "".join(
    f"\n[checks.{name}]\nenabled = true\n{options}\n" for name, options in CHECKS.items()) + """
[[operations]]
include-name = ["POST /requests", "POST /deployments"]
checks.positive_data_acceptance.enabled = false

[[operations]]
include-name = "GET /requests/{request_id}"
checks.use_after_free.enabled = false
"""


def test_every_operation_answers_as_its_document_says(live: Live, tmp_path: Path) -> None:
    document = live.get("/openapi.json")
    schema_file = tmp_path / "openapi.json"
    schema_file.write_text(json.dumps(document))
    config = tmp_path / "schemathesis.toml"
    config.write_text(CONFIG)
    # One worker: with several, CPython 3.11's ast (hypothesis describing a lambda) can fail
    # with "AST constructor recursion depth mismatch", a runtime error of the run itself.
    done = subprocess.run(
        [sys.executable, "-m", "schemathesis.cli", "--no-color", "--config-file", str(config),
         "run", str(schema_file), "--url", live.url,
         "--header", f"Authorization: Bearer {TOKEN}",
         "--phases", PHASES, "--max-examples", str(MAX_EXAMPLES),
         "--workers", "1", "--continue-on-failure", "--generation-database", "none",
         "--request-timeout", "60", *([] if SEED == "random" else ["--seed", SEED])],
        capture_output=True, text=True, timeout=900, check=False)
    summary = done.stdout[done.stdout.rfind("SUMMARY"):]
    phases = done.stdout[done.stdout.find("Examples ("):done.stdout.find("FAILURES")
                         if "FAILURES" in done.stdout else done.stdout.find("SUMMARY")]
    print(phases + summary)  # each phase's cases and scenarios, the number of cases
    found = done.stdout[done.stdout.find("FAILURES"):] if "FAILURES" in done.stdout else ""
    # the head of the failures (each names its operation and check; a body may be huge)
    assert done.returncode == 0, ((found or done.stdout)[:8000] + "\n...\n" + summary[-4000:]
                                  + done.stderr[-3000:])
    assert "Tested: " in summary and "generated" in summary
    assert live.get("/healthz")["status"] == "ok"
