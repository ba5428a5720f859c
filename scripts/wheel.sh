#!/usr/bin/env bash
# Build runonce's wheel into DIR from the files git knows (tracked, or new and not ignored): a
# build/ left by an earlier build would put modules moved or deleted since into the wheel.
#   bash scripts/wheel.sh DIR      # prints the wheel's path
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:?usage: scripts/wheel.sh DIR}
src=$(mktemp -d)
trap 'rm -rf "$src"' EXIT
git ls-files -co --exclude-standard | while IFS= read -r f; do [ -e "$f" ] && printf '%s\n' "$f"; done \
  | tar -T - -cf - | tar -xf - -C "$src"
.venv/bin/python -m pip wheel -q --no-deps -w "$out" "$src"
ls "$out"/runonce-*.whl
