"""Checkpoint directories (DESIGN 3.14): one per checkpointing job, mounted at ``/checkpoint``.

A request with ``checkpoint: true`` saves its progress there and resumes from it when it is
started again, on any node. The directories live under one root, the same path on the manager
and on every node (NFS on a real cluster, a host directory in the lab, where every node's
engine sees the host's files): the manager makes a request's directory before it starts the
job (Swarm refuses a bind mount whose source is missing) and removes it once the request has
ended. The job is told where and how often in its environment (``CHECKPOINT_DIR``,
``CHECKPOINT_INTERVAL_S``).
"""

from __future__ import annotations

import logging
import shutil
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from domain.errors import UnavailableError
from domain.model import check_id

log = logging.getLogger(__name__)
MOUNT_TARGET = "/checkpoint"


def checkpointing(spec: Mapping[str, Any]) -> bool:
    """Whether a request's spec asks for checkpoints."""
    return spec.get("checkpoint") is True


def job_env(spec: Mapping[str, Any]) -> dict[str, str]:
    """What a checkpointing job is told: where its directory is, and how often to save."""
    return {"CHECKPOINT_DIR": MOUNT_TARGET,
            "CHECKPOINT_INTERVAL_S": f"{float(spec['checkpoint_interval_s']):g}"}


@dataclass(frozen=True)
class CheckpointDirs:
    """The root of the requests' checkpoint directories (an absolute path, the same on the
    manager and every node)."""

    root: str

    def path(self, request_id: str) -> Path:
        return Path(self.root) / check_id(request_id, "request")

    def prepare(self, request_id: str) -> str:
        """The request's directory, made if missing (kept if there: a restart resumes from
        what it holds); UnavailableError when the root cannot take it."""
        path = self.path(request_id)
        try:
            path.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise UnavailableError(f"cannot make the checkpoint directory {path} ({exc}): "
                                   "GREENSWARM_CHECKPOINT_DIR must be storage the manager "
                                   "and every node mount at the same path") from exc
        return str(path)

    def sweep(self, ended: Callable[[str], bool]) -> list[str]:
        """Remove the directories of the requests that ``ended`` says are over (no record, or a
        final status); the names removed."""
        root = Path(self.root)
        try:
            names = sorted(entry.name for entry in root.iterdir() if entry.is_dir())
        except OSError:
            return []  # no root (yet): nothing checkpointed here
        removed = []
        for name in names:
            if ended(name):
                shutil.rmtree(root / name, ignore_errors=True)
                removed.append(name)
        if removed:
            log.info("checkpoint directories of ended requests removed: %s", ", ".join(removed))
        return removed
