"""Deep-learning workload: train a two-layer perceptron with NumPy until the makespan is over.

CPU-bound (matrix products) and memory-bound (a synthetic data set of DL_MEMORY_MB MiB, fully
touched). Environment: MAKESPAN_S (seconds, default 60), DL_MEMORY_MB (default 256), DL_HIDDEN
(hidden units, default 512), DL_BATCH (default 256), DL_SEED (default 1). Exits 0 when the
makespan is over, 143 on SIGTERM.
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


def train(makespan_s: float, memory_mb: float, hidden: int, batch: int, seed: int) -> int:
    rng = np.random.default_rng(seed)
    deadline = time.monotonic() + makespan_s
    x, y = make_data(memory_mb, rng)
    w1 = rng.standard_normal((FEATURES, hidden), dtype=np.float32) * np.float32(0.05)
    w2 = rng.standard_normal((hidden, CLASSES), dtype=np.float32) * np.float32(0.05)
    rate = np.float32(0.05)
    print(f"dl: {x.shape[0]} samples ({x.nbytes / 2**20:.0f} MiB), hidden {hidden}, "
          f"for {makespan_s:.0f}s")
    epoch, steps = 0, 0
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
    )


if __name__ == "__main__":
    sys.exit(main())
