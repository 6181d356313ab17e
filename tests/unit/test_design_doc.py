"""docs/DESIGN.md stays true: its worked example of a new policy runs as written."""

from __future__ import annotations

import importlib.util
import json
import re
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest

from cli.main import main
from scheduler import registry

REPO = Path(__file__).resolve().parents[2]
DOC = REPO / "docs" / "DESIGN.md"


def example_module(tmp_path: Path) -> ModuleType:
    text = DOC.read_text(encoding="utf-8")
    section = text[text.index("#### How to add a policy"):]
    code = re.search(r"```python\n(.*?)```", section, re.DOTALL)
    assert code is not None, "the section has no Python example"
    path = tmp_path / "firstfit.py"
    path.write_text(code.group(1), encoding="utf-8")
    spec = importlib.util.spec_from_file_location("doc_firstfit", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def firstfit(tmp_path: Path) -> Iterator[ModuleType]:
    module = example_module(tmp_path)
    registry.register(module.PLUGIN)
    try:
        yield module
    finally:
        registry.unregister("firstfit")
        sys.modules.pop("doc_firstfit", None)


def test_the_documented_policy_decides_through_greenswarm_decide(
    firstfit: ModuleType, capsys: pytest.CaptureFixture[str]
) -> None:
    scenarios = str(REPO / "examples" / "scenarios.json")
    assert main(["decide", "--scenario", scenarios, "--policy", "firstfit"]) == 0
    first = json.loads(capsys.readouterr().out)
    assert main(["decide", "--scenario", scenarios, "--policy", "firstfit", "--reverse"]) == 0
    last = json.loads(capsys.readouterr().out)
    assert any(d["placed"] for d in first)
    hosts = [(a["host"], b["host"]) for a, b in zip(first, last, strict=True) if a["placed"]]
    assert all(a <= b for a, b in hosts) and any(a < b for a, b in hosts)  # first vs last id
    for a, b in zip(first, last, strict=True):
        assert a["placed"] == b["placed"]
        assert a["reason"].startswith("firstfit: ") or not a["placed"]
    assert main(["policies", "--names"]) == 0
    assert "firstfit" in capsys.readouterr().out.split()
