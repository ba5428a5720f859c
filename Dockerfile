# runonce's image: the stream worker, the executors, the gateway and every command, as one
# image whose command picks the part (docker-compose.yml, deploy/helm/runonce).
#
# BASE: any Debian-family image with Python 3.11+ and its venv module: the official
# python:3.11-slim-bookworm by default; scripts/image.sh builds one from Debian's packages
# (mmdebstrap) where no registry is reached. Build: bash scripts/image.sh (podman), or
#   docker build -t runonce .
ARG BASE=python:3.11-slim-bookworm

# -- build: runonce's wheel and every dependency of [all], installed into a venv of their own --
FROM ${BASE} AS build
# where the builder's pip must trust another CA (a proxy's) or use a mirror: build arguments, so
# neither is kept in the image (scripts/image.sh passes the host's pip settings on)
ARG PIP_CERT=""
ARG PIP_INDEX_URL=""
# the service's parts; `export` (Parquet, pyarrow: 165 MB of a 450 MB image) is an analyst's
# command, left out unless asked for: --build-arg EXTRAS=all
ARG EXTRAS=worker,faust,gateway,sandbox,postgres,google,kubernetes
ENV PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_CACHE_DIR=1 PIP_ROOT_USER_ACTION=ignore
WORKDIR /src
# only what the wheel is built from (.dockerignore keeps tests, bench, docs and .venv out)
COPY pyproject.toml setup.py README.md ./
COPY runonce ./runonce
COPY streams ./streams
COPY connectors ./connectors
COPY schemas ./schemas
RUN [ -n "$PIP_CERT" ] || unset PIP_CERT; [ -n "$PIP_INDEX_URL" ] || unset PIP_INDEX_URL; \
    python3 -m venv /opt/runonce \
 && /opt/runonce/bin/pip install --quiet --upgrade pip \
 && /opt/runonce/bin/pip wheel --quiet --no-deps --wheel-dir /wheels . \
 && /opt/runonce/bin/pip install --quiet "$(ls /wheels/runonce-*.whl)[$EXTRAS]" \
 && /opt/runonce/bin/pip uninstall --quiet --yes pip \
 && find /opt/runonce -name '__pycache__' -prune -exec rm -rf {} +

# -- runtime: the venv, a user of its own, a volume for state, nothing else --------------------
FROM ${BASE}
LABEL org.opencontainers.image.title="runonce" \
      org.opencontainers.image.description="Makes 'run twice' impossible for the actions AI agents take, on Kafka" \
      org.opencontainers.image.licenses="Apache-2.0"
RUN groupadd --system --gid 10001 runonce \
 && useradd --system --uid 10001 --gid runonce --home-dir /var/lib/runonce --no-create-home --shell /usr/sbin/nologin runonce \
 && install -d -o runonce -g runonce /var/lib/runonce /run/runonce
COPY --from=build /opt/runonce /opt/runonce
ENV PATH=/opt/runonce/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    PYTHONUNBUFFERED=1 PYTHONDONTWRITEBYTECODE=1 \
    RUNONCE_HOME=/var/lib/runonce \
    RUNONCE_METRICS_HOST=0.0.0.0 \
    RUNONCE_METRICS_PORT=9464
# RocksDB (the stream worker's state), an executor's results index, the gateway's tokens file
VOLUME ["/var/lib/runonce"]
WORKDIR /var/lib/runonce
USER 10001:10001
EXPOSE 9464
# the worker and the executors end their transaction on SIGTERM and exit 0; the gateway drains
STOPSIGNAL SIGTERM
# live: the process's own /healthz on its metrics port (the gateway answers on its own port)
HEALTHCHECK --interval=10s --timeout=3s --start-period=60s --retries=3 \
  CMD ["python3", "-c", "import os, sys, urllib.request; sys.exit(0 if urllib.request.urlopen('http://127.0.0.1:' + os.environ.get('RUNONCE_METRICS_PORT', '9464') + '/healthz', timeout=2).status == 200 else 1)"]
ENTRYPOINT ["runonce"]
CMD ["--help"]
