"""One path per file: the top-level streams/, connectors/ and schemas/ folders are
runonce.streams, runonce.connectors and runonce.schemas (runonce/<name> links to them), and
importing them by their folder name is refused, not a silent second copy of their modules."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[2]


@pytest.mark.parametrize("name", ["streams", "connectors", "schemas"])
def test_a_top_level_folder_imports_only_as_runonce_subpackage(name: str) -> None:
    second = subprocess.run([sys.executable, "-c", f"import {name}"], cwd=ROOT, capture_output=True, text=True)
    assert second.returncode != 0 and f"import runonce.{name}, not {name}" in second.stderr
    first = subprocess.run([sys.executable, "-c", f"import runonce.{name}"], cwd=ROOT, capture_output=True, text=True)
    assert first.returncode == 0, first.stderr
