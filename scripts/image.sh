#!/usr/bin/env bash
# Build runonce's image with podman, on a machine with no Docker and no image registry:
#   bash scripts/image.sh                 # localhost/runonce:<version> and :latest
#   bash scripts/image.sh --base IMAGE    # FROM another base (python:3.11-slim-bookworm where a registry is reached)
#   bash scripts/image.sh --save FILE     # also write the image as a docker-archive (podman save)
#
# The base, unless --base names one: a Debian bookworm root file system with Python 3.11 and its
# venv module, from Debian's packages (mmdebstrap, ~40 s), imported as localhost/runonce-base:bookworm
# (built once; RUNONCE_REBUILD_BASE=1 builds it again). Installs podman, runc and mmdebstrap from
# Debian's packages if missing (as root). Podman's settings for this machine: deploy/podman/containers.conf.
set -euo pipefail
cd "$(dirname "$0")/.."
base="" save=""
while [ $# -gt 0 ]; do
  case "$1" in
    --base) base=$2; shift 2 ;;
    --save) save=$2; shift 2 ;;
    -h|--help) sed -n '2,10p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "image.sh: unknown argument $1 (--base IMAGE, --save FILE)" >&2; exit 2 ;;
  esac
done
export CONTAINERS_CONF="$PWD/deploy/podman/containers.conf"

need=()
command -v podman >/dev/null 2>&1 || need+=(podman)
command -v runc >/dev/null 2>&1 || need+=(runc)
# podman builds the pause image of a pod (kube play) from catatonit
command -v catatonit >/dev/null 2>&1 || [ -x /usr/libexec/podman/catatonit ] || need+=(catatonit)
[ -n "$base" ] || command -v mmdebstrap >/dev/null 2>&1 || need+=(mmdebstrap)
if [ ${#need[@]} -gt 0 ]; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "image: installing ${need[*]} (Debian packages)"
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
      "${need[@]}" containernetworking-plugins >/dev/null
  else
    echo "image: missing ${need[*]}: install them (Debian packages), then run this again" >&2
    exit 2
  fi
fi

if [ -z "$base" ]; then
  base=localhost/runonce-base:bookworm
  if [ "${RUNONCE_REBUILD_BASE:-0}" = 1 ] || ! podman image exists "$base"; then
    work=$(mktemp -d)
    trap 'rm -rf "$work"' EXIT
    echo "image: building $base from Debian's packages (mmdebstrap: python3, python3-venv, ca-certificates) ..."
    start=$SECONDS
    mmdebstrap --variant=minbase --include=python3,python3-venv,ca-certificates \
      --dpkgopt='path-exclude=/usr/share/man/*' --dpkgopt='path-exclude=/usr/share/doc/*' \
      --dpkgopt='path-exclude=/usr/share/locale/*' --quiet bookworm "$work/rootfs.tar"
    # an imported file system has no environment: the PATH a Containerfile's RUN needs
    podman import --quiet --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
      --change 'CMD ["/bin/bash"]' "$work/rootfs.tar" "$base" >/dev/null
    echo "image: $base in $((SECONDS - start)) s"
  fi
fi

version=$(sed -n 's/^version = "\(.*\)"/\1/p' pyproject.toml | head -n 1)
start=$SECONDS
echo "image: building localhost/runonce:$version FROM $base ..."
# The host's pip settings for the builder (a CA to trust, a mirror), mounted for the build only
pip_args=()
pip_setting() {  # KEY: the host pip's value of KEY (cert, index-url), from its config files or PIP_* variables
  python3 -m pip config list 2>/dev/null | sed -n "s/^[^=]*\\.$1='\\(.*\\)'$/\\1/p" | head -n 1
}
cert=$(pip_setting cert)
if [ -n "$cert" ] && [ -f "$cert" ]; then
  pip_args+=(--volume "$cert:/run/pip-cert.pem:ro" --build-arg PIP_CERT=/run/pip-cert.pem)
fi
index=$(pip_setting index-url)
[ -z "$index" ] || pip_args+=(--build-arg "PIP_INDEX_URL=$index")
# docker format: OCI images have no HEALTHCHECK
podman build --quiet --format docker --build-arg "BASE=$base" "${pip_args[@]}" -t "localhost/runonce:$version" \
  -t localhost/runonce:latest -f Dockerfile . >/dev/null
size=$(podman image inspect --format '{{.Size}}' "localhost/runonce:$version")
echo "image: localhost/runonce:$version in $((SECONDS - start)) s, $((size / 1024 / 1024)) MiB"
podman run --rm --health-cmd none "localhost/runonce:$version" --help >/dev/null
echo "image: runs as $(podman run --rm --health-cmd none --entrypoint id "localhost/runonce:$version" -un) (uid $(podman run --rm --health-cmd none --entrypoint id "localhost/runonce:$version" -u))"
if [ -n "$save" ]; then
  podman save --quiet --format docker-archive -o "$save" "localhost/runonce:$version"
  echo "image: saved to $save"
fi
