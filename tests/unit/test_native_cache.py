"""The compiled core's cache (native/): which build the loader takes, and pruning. No compiler
needed: the builds here are fakes, empty files where the extensions would be."""

from __future__ import annotations

import json
import os
import sysconfig
from pathlib import Path

import pytest

from native import build, loader

SUFFIX = str(sysconfig.get_config_var("EXT_SUFFIX"))


def fake_build(cache: Path, name: str, sources: str, mtime: float,
               modules: tuple[str, ...] = loader.MODULES) -> Path:
    entry = cache / name
    for module in modules:
        *package, leaf = module.split(".")
        target = entry.joinpath("lib", *package, leaf + SUFFIX)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.touch()
    manifest = entry / loader.MANIFEST
    manifest.write_text(json.dumps({"sources": sources, "python": loader.python_tag(),
                                    "modules": list(loader.MODULES)}))
    os.utime(manifest, (mtime, mtime))
    return entry


def test_the_loader_takes_the_newest_complete_build_of_these_sources(tmp_path: Path) -> None:
    sources = loader.source_hash()
    fake_build(tmp_path, "old", sources, 1000.0)
    newest = fake_build(tmp_path, "new", sources, 2000.0)
    fake_build(tmp_path, "other", "f" * 64, 3000.0)  # other sources
    fake_build(tmp_path, "incomplete", sources, 4000.0, loader.MODULES[1:])
    fake_build(tmp_path, ".under-way", sources, 5000.0)
    assert loader.find_build(tmp_path, sources, loader.python_tag()) == newest
    assert loader.find_build(tmp_path, sources, "another python") is None
    choice = loader.decide("1", cache=tmp_path)
    assert choice.core == "compiled" and choice.build == newest


def test_a_build_of_other_sources_is_stale_only_for_the_tree_that_built_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str],
) -> None:
    fake_build(tmp_path, "other", "f" * 64, 1000.0)
    assert loader.decide("auto", cache=tmp_path).reason == "not built"
    assert capsys.readouterr().err == ""
    marker = loader.root_marker(tmp_path)
    marker.parent.mkdir()
    marker.write_text("{}\n")
    assert loader.decide("auto", cache=tmp_path).reason == "stale"
    err = capsys.readouterr().err
    assert "compiled core is stale" in err and "build-native.sh" in err
    with pytest.raises(loader.NativeCoreError, match="is stale"):
        loader.decide("1", cache=tmp_path)


def test_pruning_keeps_the_newest_builds(tmp_path: Path) -> None:
    entries = [fake_build(tmp_path, f"b{i}", str(i), 1000.0 + i) for i in range(5)]
    (tmp_path / "b0.log").write_text("log")
    (tmp_path / ".lock").touch()
    removed = build.prune(tmp_path, keep=3)
    assert sorted(removed) == entries[:2]
    assert sorted(p.name for p in tmp_path.iterdir()) == [".lock", "b2", "b3", "b4"]


def test_a_build_is_not_used_after_a_module_of_the_core_was_imported(
    tmp_path: Path, capsys: pytest.CaptureFixture[str],
) -> None:
    """All or nothing: a module imported from its source before ``enable`` keeps the whole
    core pure, saying so in one line (auto), or is an error (1)."""
    fake_build(tmp_path, "built", loader.source_hash(), 1000.0)
    assert loader.decide("auto", cache=tmp_path).core == "compiled"
    late = loader.decide("auto", cache=tmp_path, imported=["sim.engine", "domain.units"])
    assert late.core == "pure" and late.reason == "imported before enable"
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "domain.units, sim.engine imported before" in err
    with pytest.raises(loader.NativeCoreError, match=r"=1 but domain\.units imported before"):
        loader.decide("1", cache=tmp_path, imported=["domain.units"])
    assert loader.decide("0", cache=tmp_path, imported=["domain.units"]).reason.endswith("=0")


def test_the_finder_serves_the_builds_modules_and_nothing_else(tmp_path: Path) -> None:
    entry = fake_build(tmp_path, "built", loader.source_hash(), 1000.0)
    lib = entry / "lib"
    (lib / f"0123abcd__mypyc{SUFFIX}").touch()  # the group's shared library
    finder = loader.CompiledCore(lib)
    spec = finder.find_spec("domain.units")
    assert spec is not None and spec.origin == str(lib / "domain" / f"units{SUFFIX}")
    shared = finder.find_spec("0123abcd__mypyc")
    assert shared is not None and shared.origin == str(lib / f"0123abcd__mypyc{SUFFIX}")
    for interpreted in ("domain", "domain.store", "scheduler.registry", "sim.profiles", "json"):
        assert finder.find_spec(interpreted) is None, interpreted


def test_the_command_line_names_a_bad_setting(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
) -> None:
    from cli.main import main

    monkeypatch.setattr(loader, "_choice", None)  # as in a fresh process
    monkeypatch.setenv(loader.ENV, "yes")
    assert main(["policies"]) == 2
    err = capsys.readouterr().err
    assert "greenswarm: error: GREENSWARM_NATIVE='yes'" in err and "Traceback" not in err


def test_a_changed_stub_makes_the_compiled_core_stale(tmp_path: Path) -> None:
    """A compiled module checks what a call into the Rust core returns against its stub
    (stubs/greenswarm_core.pyi): a build made against another stub would refuse the Rust
    core's answers (a record() that had returned a float returned None: `TypeError: float
    object expected; got None`), so the stub is part of what a build is of."""
    root = tmp_path / "tree"
    for module in loader.MODULES:
        target = loader.module_path(module, root)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(loader.module_path(module).read_bytes())
    stub = root / "stubs" / "greenswarm_core.pyi"
    stub.parent.mkdir()
    stub.write_text("def record() -> float: ...\n")
    before = loader.source_hash(root)
    stub.write_text("def record() -> None: ...\n")
    assert loader.source_hash(root) != before
