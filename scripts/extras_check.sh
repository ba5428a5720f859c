#!/usr/bin/env bash
# Each agent-facing extra installed alone, as a user would: the wheel (non-editable) with one
# extra in a clean venv, outside the source tree, and the modules the docs tell its user to
# import. In the bare SDK's venv the user's own pytest runs (runonce's pytest plugin must not
# break it); in [testing]'s, the replay test of docs/connectors.md runs as written.
#   bash scripts/extras_check.sh            # every extra below
#   bash scripts/extras_check.sh langchain  # one
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$PWD
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
uv="$repo/.venv/bin/uv"
wheel=$(bash scripts/wheel.sh "$work/dist")

# extra (empty: the bare SDK) and the modules its user imports (docs/agents.md, docs/connectors.md)
declare -A imports=(
  [sdk]="runonce runonce.sdk.client"
  [langchain]="runonce.integrations.langchain"
  [openai-agents]="runonce.integrations.openai_agents"
  [langgraph]="runonce.integrations.langgraph"
  [temporal]="runonce.integrations.temporal"
  [pydantic-ai]="runonce.integrations.pydantic_ai"
  [gateway]="runonce.gateway.app runonce.gateway.server"
  [otel]="runonce.telemetry.setup"
  [testing]="runonce.connectors.testing"
)
extras=("$@")
[ ${#extras[@]} -gt 0 ] || extras=(sdk langchain openai-agents langgraph temporal pydantic-ai gateway otel testing)

failed=()
for extra in "${extras[@]}"; do
  [ -n "${imports[$extra]+x}" ] || { echo "extras: unknown extra $extra (${!imports[*]})" >&2; exit 2; }
  venv="$work/venv-$extra"
  python3 -m venv "$venv"
  spec=$wheel; [ "$extra" = sdk ] || spec="$wheel[$extra]"
  # pytest is the user's own: every user of the SDK may have it, and the plugin meets it there
  "$uv" pip install -q --python "$venv/bin/python" "$spec" pytest
  [ "$extra" != testing ] || "$uv" pip install -q --python "$venv/bin/python" "$repo/tests/connector_plugin"
  if ! (cd "$work" && "$venv/bin/python" -c "import importlib, sys
for name in sys.argv[1:]:
    importlib.import_module(name)" ${imports[$extra]}) 2>"$work/$extra.err"; then
    echo "extras: [$extra] alone: importing ${imports[$extra]} failed:"; tail -n 3 "$work/$extra.err"
    failed+=("$extra"); continue
  fi
  tests="$work/tests-$extra"; mkdir -p "$tests"
  if [ "$extra" = testing ]; then
    # the page's test, extracted as written
    "$venv/bin/python" - "$repo/docs/connectors.md" "$tests/test_followups.py" <<'PY'
import re, sys
page = open(sys.argv[1]).read()
blocks = [b for b in re.findall(r"```python\n(.*?)```", page, re.S) if b.startswith("# test_followups.py")]
assert len(blocks) == 1, "docs/connectors.md: no test_followups.py block"
open(sys.argv[2], "w").write(blocks[0])
PY
  else
    printf 'def test_the_users_own_test():\n    assert 1 + 1 == 2\n' > "$tests/test_user.py"
  fi
  if ! (cd "$tests" && "$venv/bin/python" -m pytest -q -p no:cacheprovider >"$work/$extra.out" 2>&1); then
    echo "extras: [$extra] alone: the user's pytest failed:"; tail -n 8 "$work/$extra.out"
    failed+=("$extra"); continue
  fi
  echo "extras: [$extra] alone: imports ${imports[$extra]}; pytest: $(tail -n 1 "$work/$extra.out")"
done
[ ${#failed[@]} -eq 0 ] || { echo "extras: failed alone: ${failed[*]}" >&2; exit 1; }
