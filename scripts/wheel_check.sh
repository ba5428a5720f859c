#!/usr/bin/env bash
# What the Docker image gets (`pip install ".[mcp]"`): the wheel, installed non-editable into a clean
# venv, run from outside the source tree. Every module imports from site-packages, and
# `runonce demo` (broker, stream worker, sandbox vendors, executors) prints the incident table.
set -euo pipefail
cd "$(dirname "$0")/.."
work=$(mktemp -d)
cleanup() {
  RUNONCE_HOME="$work/home" "$work/venv/bin/runonce" down >/dev/null 2>&1 || true
  rm -rf "$work"
}
trap cleanup EXIT
# Built from a copy of the files git knows (tracked or not ignored): a build/ left by an
# earlier build would put modules moved or deleted since into the wheel.
mkdir "$work/src"
git ls-files -co --exclude-standard | while IFS= read -r f; do [ -e "$f" ] && printf '%s\n' "$f"; done \
  | tar -T - -cf - | tar -xf - -C "$work/src"
.venv/bin/python -m pip wheel -q --no-deps -w "$work/dist" "$work/src"
wheel=$(ls "$work"/dist/runonce-*.whl)
echo "wheel: $(basename "$wheel"), $(.venv/bin/python -m zipfile -l "$wheel" | tail -n +2 | wc -l) files"
python3 -m venv "$work/venv"
"$work/venv/bin/python" -m pip install -q "$wheel[testing,mcp]"
cd "$work"
"$work/venv/bin/python" - <<'PY'
import importlib
import pkgutil

import runonce

names = ["runonce"] + [m.name for m in pkgutil.walk_packages(runonce.__path__, "runonce.")
                       if not m.name.endswith(".__main__")]  # __main__ runs the CLI
for name in names:
    importlib.import_module(name)
assert "site-packages" in runonce.__file__, runonce.__file__
print(f"wheel: {len(names)} modules import from {runonce.__file__}")
PY
RUNONCE_HOME="$work/home" "$work/venv/bin/runonce" demo
