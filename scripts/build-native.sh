#!/usr/bin/env bash
# Build the native core (DESIGN 10), reusing a build of the same sources; nothing is written
# into the source tree:
#  - the hot modules of the scheduler and the simulator compiled with mypyc (native/build.py)
#    into /var/cache/greenswarm/native/<key>/ ($GREENSWARM_NATIVE_CACHE overrides it);
#  - the Rust crate native/rust (native/rust_build.py: maturin, offline, Debian's crates) into
#    /var/cache/greenswarm/native/rust/<key>/.
# Extra arguments go to `python -m native.build` (e.g. --jobs 4). Exit status 1 when the mypyc
# build failed, 2 when only the Rust build failed (it says so in one line); the part that
# failed then runs as pure Python.
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
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
status=0
CARGO_BUILD_JOBS=${CARGO_BUILD_JOBS:-1} "$py" -m native.rust_build || status=2
nice -n 10 "$py" -m native.build "$@" || status=1
exit "$status"
