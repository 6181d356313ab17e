# greenswarm/greenswarm: the project's own components (manager, agent, monitor) in one image.
#
# Offline (the local lab, no registry, maybe no PyPI): `greenswarm lab images` builds it FROM
# greenswarm/python:bookworm (debootstrap + python3-venv/pip) with a context that carries the
# wheels of every dependency in .wheels/, downloaded once on the host; pip then installs with
# --no-index.
# Elsewhere (public base image, PyPI reachable), from the repository root:
#   docker build --build-arg BASE_IMAGE=python:3.11-slim -t greenswarm/greenswarm:latest .
ARG BASE_IMAGE=greenswarm/python:bookworm
FROM ${BASE_IMAGE}

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_NO_CACHE_DIR=1 \
    PATH=/opt/greenswarm/bin:$PATH

COPY . /src
RUN set -e; \
    python3 -m venv /opt/greenswarm; \
    if ls /src/.wheels/*.whl >/dev/null 2>&1; then \
        set -- --no-index --find-links /src/.wheels; \
    fi; \
    /opt/greenswarm/bin/pip install "$@" /src; \
    /opt/greenswarm/bin/greenswarm --help >/dev/null

WORKDIR /srv/greenswarm
ENTRYPOINT ["greenswarm"]
CMD ["--help"]
