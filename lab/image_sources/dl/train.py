"""Deep-learning workload: train a two-layer perceptron with NumPy until the makespan is over.

CPU-bound (matrix products) and memory-bound (a synthetic data set of DL_MEMORY_MB MiB, fully
touched). Environment: MAKESPAN_S (seconds, default 60), DL_MEMORY_MB (default 256), DL_HIDDEN
(hidden units, default 512), DL_BATCH (default 256), DL_SEED (default 1). Exits 0 when the
makespan is over, 143 on SIGTERM.

Checkpoints (DESIGN 3.14): with CHECKPOINT_DIR and CHECKPOINT_INTERVAL_S (set by the manager for
a request with ``checkpoint: true``, the directory mounted at /checkpoint), it saves its weights,
its step count and the training time it has done every interval, and a new start resumes from
the last one ("dl: resumed from step N"): it trains only what its makespan has left.
"""

from __future__ import annotations

import os
import signal
import sys
import time
from types import FrameType

import numpy as np

FEATURES = 256
CLASSES = 10


def _env_number(name: str, default: float) -> float:
    try:
        return float(os.environ.get(name, default))
    except ValueError:
        print(f"dl: {name} must be a number", file=sys.stderr)
        raise SystemExit(2) from None


def _stop(signum: int, _frame: FrameType | None) -> None:
    print(f"dl: stopped by signal {signum}")
    raise SystemExit(128 + signum)


def make_data(memory_mb: float, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    samples = max(1024, int(memory_mb * 1024 * 1024) // (FEATURES * 4))
    x = rng.standard_normal((samples, FEATURES), dtype=np.float32)
    teacher = rng.standard_normal((FEATURES, CLASSES), dtype=np.float32)
    y = np.argmax(x @ teacher, axis=1)
    return x, y


class Checkpoints:
    """The last checkpoint in ``directory`` (one file, replaced whole: a kill mid-save leaves
    the previous one), saved every ``interval_s`` of training."""

    def __init__(self, directory: str, interval_s: float) -> None:
        self.path = os.path.join(directory, "state.npz") if directory else ""
        self.interval_s = interval_s if self.path else 0.0
        self.saved_at = time.monotonic()

    def load(self) -> dict[str, np.ndarray] | None:
        if not self.path or not os.path.exists(self.path):
            return None
        with np.load(self.path) as saved:
            return {name: saved[name] for name in saved.files}

    def due(self) -> bool:
        return self.interval_s > 0 and time.monotonic() - self.saved_at >= self.interval_s

    def save(self, **state: np.ndarray | float | int) -> None:
        partial = self.path + ".partial.npz"
        np.savez(partial, **state)  # type: ignore[arg-type]
        os.replace(partial, self.path)
        self.saved_at = time.monotonic()


def train(makespan_s: float, memory_mb: float, hidden: int, batch: int, seed: int,
          checkpoints: Checkpoints) -> int:
    rng = np.random.default_rng(seed)
    x, y = make_data(memory_mb, rng)
    w1 = rng.standard_normal((FEATURES, hidden), dtype=np.float32) * np.float32(0.05)
    w2 = rng.standard_normal((hidden, CLASSES), dtype=np.float32) * np.float32(0.05)
    rate = np.float32(0.05)
    epoch, steps, done_s = 0, 0, 0.0
    saved = checkpoints.load()
    if saved is not None:
        w1, w2 = saved["w1"], saved["w2"]
        epoch, steps, done_s = int(saved["epoch"]), int(saved["steps"]), float(saved["done_s"])
        print(f"dl: resumed from step {steps} ({done_s:.1f}s of training kept)")
    elif checkpoints.path:
        print("dl: no checkpoint yet, starting from step 0")
    began = time.monotonic()
    deadline = began + makespan_s - done_s
    print(f"dl: {x.shape[0]} samples ({x.nbytes / 2**20:.0f} MiB), hidden {hidden}, "
          f"for {makespan_s - done_s:.0f}s of {makespan_s:.0f}s")
    while time.monotonic() < deadline:
        losses = []
        for start in range(0, x.shape[0], batch):
            if time.monotonic() >= deadline:
                break
            xb, yb = x[start:start + batch], y[start:start + batch]
            h = np.maximum(xb @ w1, 0)
            logits = h @ w2
            logits -= logits.max(axis=1, keepdims=True)
            p = np.exp(logits)
            p /= p.sum(axis=1, keepdims=True)
            losses.append(float(-np.log(p[np.arange(len(yb)), yb] + 1e-9).mean()))
            p[np.arange(len(yb)), yb] -= 1
            p /= len(yb)
            grad_w2 = h.T @ p
            grad_h = (p @ w2.T) * (h > 0)
            w1 -= rate * (xb.T @ grad_h)
            w2 -= rate * grad_w2
            steps += 1
            if checkpoints.due():
                checkpoints.save(w1=w1, w2=w2, epoch=epoch, steps=steps,
                                 done_s=done_s + time.monotonic() - began)
                print(f"dl: checkpoint at step {steps}")
        epoch += 1
        print(f"dl: epoch {epoch} loss {np.mean(losses) if losses else float('nan'):.4f}")
    print(f"dl: done, {steps} steps in {epoch} epoch(s)")
    return 0


def main() -> int:
    signal.signal(signal.SIGTERM, _stop)
    signal.signal(signal.SIGINT, _stop)
    return train(
        makespan_s=_env_number("MAKESPAN_S", 60),
        memory_mb=_env_number("DL_MEMORY_MB", 256),
        hidden=int(_env_number("DL_HIDDEN", 512)),
        batch=int(_env_number("DL_BATCH", 256)),
        seed=int(_env_number("DL_SEED", 1)),
        checkpoints=Checkpoints(os.environ.get("CHECKPOINT_DIR", ""),
                                _env_number("CHECKPOINT_INTERVAL_S", 0)),
    )


if __name__ == "__main__":
    sys.exit(main())
