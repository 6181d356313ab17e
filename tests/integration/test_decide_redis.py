"""``greenswarm decide --store redis`` gives the decisions of the in-memory store and leaves
nothing behind in Redis."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import redis

from cli.main import main
from lab.processes import RedisServer

pytestmark = pytest.mark.redis
EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


@pytest.mark.parametrize("policy", ["energy", "spread", "binpack"])
def test_redis_store_decides_like_the_memory_store(
    redis_srv: RedisServer, capsys: pytest.CaptureFixture[str], policy: str
) -> None:
    scenarios = str(EXAMPLES / "scenarios.json")
    assert main(["decide", "--scenario", scenarios, "--policy", policy, "--explain"]) == 0
    from_memory = json.loads(capsys.readouterr().out)
    keys_before = set(redis.Redis.from_url(redis_srv.url).keys("decide-*"))
    assert main(["decide", "--scenario", scenarios, "--policy", policy, "--explain",
                 "--store", "redis", "--redis-url", redis_srv.url]) == 0
    from_redis = json.loads(capsys.readouterr().out)
    assert from_redis == from_memory
    assert set(redis.Redis.from_url(redis_srv.url).keys("decide-*")) == keys_before
