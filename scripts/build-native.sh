#!/usr/bin/env bash
# Compile the hot modules of the scheduler and the simulator with mypyc (native/build.py) into
# /var/cache/greenswarm/native/<key>/ ($GREENSWARM_NATIVE_CACHE overrides it), or reuse the
# build for the same sources, Python and mypy. Nothing is written into the source tree.
# Extra arguments go to `python -m native.build` (e.g. --jobs 4). Exit status 1 when the build
# failed; the project then runs as pure Python.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ -n "${PYTHON:-}" ]; then
    py=$PYTHON
elif [ -x .venv/bin/python ]; then
    py=.venv/bin/python
else
    py=python3
fi
# This tree's modules, not those of another checkout the venv may have installed in editable mode.
PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" exec "$py" -m native.build "$@"
