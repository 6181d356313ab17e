"""Preemption that keeps work, the manager's settings and checkpoint directories (DESIGN 3.14):
pausing is the live default, and a checkpointing job's directory is made before its start,
mounted at /checkpoint, and swept once its request has ended."""

from __future__ import annotations

from pathlib import Path

import pytest

from domain.errors import UnavailableError, ValidationError
from manager.checkpoints import CheckpointDirs, checkpointing, job_env
from manager.settings import ManagerSettings

TOKEN = {"GREENSWARM_TOKEN": "t"}


@pytest.mark.parametrize("policy", ["energy", "qos"])
def test_victims_are_paused_by_default_live_and_killed_when_asked(policy: str) -> None:
    env = {**TOKEN, "GREENSWARM_POLICY": policy}
    assert ManagerSettings.from_env(env).options.suspend is True
    assert ManagerSettings.from_env({**env, "GREENSWARM_SUSPEND": "false"}).options.suspend \
        is False
    asked = {**env, "GREENSWARM_POLICY_OPTIONS": "suspend=false"}
    assert ManagerSettings.from_env(asked).options.suspend is False


def test_the_checkpoint_root_is_an_absolute_path_or_nothing() -> None:
    assert ManagerSettings.from_env(TOKEN).checkpoint_dir == "/var/lib/greenswarm/checkpoints"
    assert ManagerSettings.from_env({**TOKEN, "GREENSWARM_CHECKPOINT_DIR": ""}).checkpoint_dir \
        == ""
    with pytest.raises(ValidationError, match="GREENSWARM_CHECKPOINT_DIR"):
        ManagerSettings.from_env({**TOKEN, "GREENSWARM_CHECKPOINT_DIR": "relative/dir"})


def test_a_directory_is_made_once_kept_for_a_restart_and_swept_when_its_request_ended(
    tmp_path: Path,
) -> None:
    dirs = CheckpointDirs(str(tmp_path / "gs"))
    path = Path(dirs.prepare("learner"))
    assert path == tmp_path / "gs" / "learner" and path.is_dir()
    (path / "state.npz").write_bytes(b"saved")
    assert Path(dirs.prepare("learner")) == path  # placed again: what it saved is kept
    assert (path / "state.npz").read_bytes() == b"saved"
    dirs.prepare("other")
    assert dirs.sweep(lambda name: name == "learner") == ["learner"]
    assert not path.exists() and (tmp_path / "gs" / "other").is_dir()
    assert CheckpointDirs(str(tmp_path / "none")).sweep(lambda name: True) == []


def test_a_root_that_cannot_take_a_directory_is_unavailable_and_a_bad_id_refused(
    tmp_path: Path,
) -> None:
    (tmp_path / "file").write_text("not a directory")
    with pytest.raises(UnavailableError, match="GREENSWARM_CHECKPOINT_DIR"):
        CheckpointDirs(str(tmp_path / "file")).prepare("learner")
    with pytest.raises(ValidationError):
        CheckpointDirs(str(tmp_path)).prepare("../escape")


def test_a_checkpointing_job_is_told_where_and_how_often() -> None:
    spec = {"checkpoint": True, "checkpoint_interval_s": 30.0}
    assert checkpointing(spec) and not checkpointing({"checkpoint_interval_s": 30.0})
    assert job_env(spec) == {"CHECKPOINT_DIR": "/checkpoint", "CHECKPOINT_INTERVAL_S": "30"}
