#!/usr/bin/env bash
# Idempotent set-up for a fresh Debian 12 machine (run as root):
#  - Debian packages the project needs (Docker engine, Redis, debootstrap, busybox, iproute2,
#    Prometheus, whose server the metrics test starts on 127.0.0.1 by itself, and the headless
#    Chromium and its driver the dashboard test drives),
#  - a virtual environment in .venv with greenswarm and its dev tools installed in editable mode,
#  - the native core (scripts/build-native.sh: the hot modules compiled with mypyc into
#    /var/cache/greenswarm/native, and the Rust crate native/rust built offline with maturin
#    into /var/cache/greenswarm/native/rust, each reused while its sources stay the same), with
#    Debian's gcc (and python3-dev, if this Python's headers are missing), cargo (when no cargo
#    is on the PATH) and librust-pyo3-dev (PyO3 0.17 and the crates it needs, in
#    /usr/share/cargo/registry) installed for it; maturin comes with the dev tools. A failed
#    build only warns, in one line: its part then runs as pure Python.
# Safe to run again: it installs only what is missing.
set -euo pipefail
cd "$(dirname "$0")/.."

APT_PACKAGES=(docker.io docker-compose redis-server redis-sentinel debootstrap busybox-static iproute2 procps
              prometheus chromium chromium-driver)

missing=()
for pkg in "${APT_PACKAGES[@]}"; do
    dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || missing+=("$pkg")
done
if [ ${#missing[@]} -gt 0 ]; then
    if [ "$(id -u)" -ne 0 ]; then
        echo "setup: missing Debian packages: ${missing[*]}; run this script as root" >&2
        exit 1
    fi
    echo "setup: installing ${missing[*]}"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -q >/dev/null
    apt-get install -y -q "${missing[@]}" >/dev/null
fi

PYTHON=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
    echo "setup: creating .venv"
    "$PYTHON" -m venv .venv
fi
stamp=.venv/.greenswarm-installed
want=$(sha256sum pyproject.toml | cut -d' ' -f1)
if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$want" ]; then
    echo "setup: installing greenswarm and its dev tools into .venv"
    .venv/bin/pip install -q --disable-pip-version-check -e '.[dev]'
    echo "$want" > "$stamp"
fi
native_warning() {
    echo "setup: WARNING: $1; the compiled core is not built and greenswarm runs as pure" \
         "Python (slower simulations). Retry with: bash scripts/build-native.sh" >&2
}
native_packages=()
command -v gcc >/dev/null 2>&1 || native_packages+=(gcc)
headers=$(.venv/bin/python -c 'import sysconfig; print(sysconfig.get_paths()["include"])')
[ -f "$headers/Python.h" ] || native_packages+=(python3-dev)
command -v cargo >/dev/null 2>&1 || native_packages+=(cargo)
compgen -G "/usr/share/cargo/registry/pyo3-0.17.*" >/dev/null || native_packages+=(librust-pyo3-dev)
if [ ${#native_packages[@]} -gt 0 ]; then
    if [ "$(id -u)" -ne 0 ]; then
        native_warning "${native_packages[*]} missing (run this script as root to install)"
    else
        echo "setup: installing ${native_packages[*]} for the compiled core"
        export DEBIAN_FRONTEND=noninteractive
        { apt-get update -q && apt-get install -y -q "${native_packages[@]}"; } >/dev/null \
            || native_warning "apt-get could not install ${native_packages[*]}"
    fi
fi
if command -v gcc >/dev/null 2>&1 && [ -f "$headers/Python.h" ]; then
    # exit 2: only the Rust part failed, and said so in its one line
    status=0
    PYTHON=.venv/bin/python bash scripts/build-native.sh || status=$?
    [ "$status" -eq 0 ] || [ "$status" -eq 2 ] || native_warning "the build failed"
fi
echo "setup: ready (activate with: source .venv/bin/activate)"
