#!/usr/bin/env bash
# Idempotent set-up for a fresh Debian 12 machine (run as root):
#  - Debian packages the project needs (Docker engine, Redis, debootstrap, busybox, iproute2,
#    Prometheus, whose server the metrics test starts on 127.0.0.1 by itself, and the headless
#    Chromium and its driver the dashboard test drives),
#  - a virtual environment in .venv with greenswarm and its dev tools installed in editable mode.
# Safe to run again: it installs only what is missing.
set -euo pipefail
cd "$(dirname "$0")/.."

APT_PACKAGES=(docker.io docker-compose redis-server debootstrap busybox-static iproute2 procps
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
echo "setup: ready (activate with: source .venv/bin/activate)"
