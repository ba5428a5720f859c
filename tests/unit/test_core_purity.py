"""The decision core imports nothing of faust, Kafka, RocksDB or Avro, and reads no clock."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

CORE = Path(__file__).parents[2] / "runonce" / "core"
FOREIGN = ("faust", "confluent_kafka", "aiokafka", "rocksdict", "fastavro", "avro", "mode")


def test_importing_the_core_loads_no_foreign_runtime() -> None:
    code = ("import sys, runonce.core.decide, runonce.core.policy; "
            f"bad = [m for m in sys.modules if m.split('.')[0] in {FOREIGN!r}]; print(bad); assert not bad")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_the_core_never_reads_the_wall_clock() -> None:
    for path in CORE.glob("*.py"):
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute) and node.attr in ("time", "monotonic", "now", "utcnow"):
                if isinstance(node.value, ast.Name) and node.value.id in ("time", "datetime"):
                    raise AssertionError(f"{path.name}:{node.lineno} reads the clock")
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                names = [a.name for a in node.names] + ([node.module] if isinstance(node, ast.ImportFrom) and node.module else [])
                assert not any(n.split(".")[0] in ("time", "datetime") for n in names), f"{path.name} imports a clock"
