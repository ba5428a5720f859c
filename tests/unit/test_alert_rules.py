"""runonce's alert rules and dashboard (runonce/ops/observe/): promtool itself checks the rules
and runs their unit tests, and every metric they name is one a runonce component exports."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import yaml

from runonce.connectors.executor.metrics import ExecutorMetrics
from runonce.ops.observe.prometheus import DASHBOARD, RULES, RULES_TEST, check_rules, fetch, packaged
from runonce.settings import Settings
from runonce.streams.metrics import StreamMetrics

_NAME = re.compile(r"\b(runonce_[a-z_]+|up)\b(?=\s*[{\[)])")


def _exported() -> set[str]:
    names = {"up"}
    for metrics in (StreamMetrics(), ExecutorMetrics()):
        for family in metrics.registry.collect():
            names.add(family.name + "_total" if family.type == "counter" else family.name)
            if family.type == "histogram":
                names.update(family.name + s for s in ("_bucket", "_sum", "_count"))
    return names


def _rule_exprs() -> list[str]:
    return [r["expr"] for g in yaml.safe_load(packaged(RULES))["groups"] for r in g["rules"]]


def _panel_exprs() -> list[str]:
    return [t["expr"] for p in json.loads(packaged(DASHBOARD))["panels"] for t in p["targets"]]


def test_promtool_checks_the_rules_and_passes_their_unit_tests() -> None:
    said: list[str] = []
    assert check_rules(Settings.from_env({}), say=said.append) == 0, "\n".join(said)
    assert "SUCCESS: 7 rules found" in said[0] and "SUCCESS" in said[1]


def test_promtool_fails_a_rule_test_whose_expectation_is_wrong(tmp_path: Path) -> None:
    (tmp_path / RULES).write_text(packaged(RULES))
    (tmp_path / RULES_TEST).write_text(packaged(RULES_TEST).replace("tool: restart_service", "tool: send_email", 1))
    promtool = fetch(Settings.from_env({})) / "promtool"
    done = subprocess.run([str(promtool), "test", "rules", RULES_TEST], cwd=tmp_path, capture_output=True, text=True)
    assert done.returncode != 0 and "RunonceBudgetExhausted" in done.stdout + done.stderr


def test_every_metric_the_rules_and_the_dashboard_name_is_exported() -> None:
    exported = _exported()
    exprs = _rule_exprs() + _panel_exprs()
    named = {m for e in exprs for m in _NAME.findall(e)}
    assert named and named <= exported, named - exported
    assert {"runonce_decisions_total", "runonce_consumer_lag_records", "runonce_dead_letters_total",
            "runonce_executor_outcomes_total", "runonce_decision_latency_seconds_bucket"} <= named


def test_no_rule_or_panel_groups_by_an_unbounded_label() -> None:
    for expr in _rule_exprs() + _panel_exprs():
        for labels in re.findall(r"by \(([^)]*)\)", expr):
            assert not {l.strip() for l in labels.split(",")} & {"action_id", "scope", "agent", "key"}, expr
