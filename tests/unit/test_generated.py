"""Each page block and chart file written from a declaration is what its declaration writes
(runonce/ops/generated.py): one check for all of them, naming the command that mends it.

Catches (each run): ``RUNONCE_FETCH_WAIT_MS``'s default 5 -> 6 in runonce/settings.py alone
(docs/operating.md); jira's ``search_lag_s`` default 10 -> 5 in its spec alone (docs/vendors.md);
a topic's retention changed in runonce/kafka/topics.py alone (the chart's files/topics.yaml); an
alert rule edited in runonce/ops/observe/alerts.yml alone (the chart's files/alerts.yml)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from runonce.connectors.executor import registry
from runonce.ops import generated


@pytest.mark.parametrize("out", generated.outputs(), ids=lambda out: out.name)
def test_each_output_is_what_its_declaration_writes(out: generated.Generated) -> None:
    assert out.written() == out.text(), (
        f"{out.name} differs from {out.source}: run `python -m runonce.ops.generated` and commit what it writes")


def test_the_vendors_page_has_a_table_for_no_kind_that_is_not_shipped() -> None:
    page = (generated.ROOT / "docs" / "vendors.md").read_text()
    assert set(re.findall(r"<!-- fields:([a-z-]+) -->", page)) == set(registry.SHIPPED)


def test_check_names_a_stale_output_and_write_mends_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    """The command itself, on a copy of the pages: a block edited by hand is named by --check
    (exit 1) and written back by the command."""
    (tmp_path / "docs").mkdir()
    page = (generated.ROOT / "docs" / "operating.md").read_text()
    hand_edited = page.replace("<!-- settings -->\n", "<!-- settings -->\n| a row by hand |\n", 1)
    (tmp_path / "docs" / "operating.md").write_text(hand_edited)
    out = generated.Generated("docs/operating.md", "settings", "runonce/settings.py",
                              generated.outputs()[0].text)
    monkeypatch.setattr(generated, "ROOT", tmp_path)
    monkeypatch.setattr(generated, "outputs", lambda: (out,))
    assert generated.main(["--check"]) == 1
    assert "docs/operating.md <!-- settings -->: differs from runonce/settings.py" in capsys.readouterr().err
    assert generated.main([]) == 0
    mended = (tmp_path / "docs" / "operating.md").read_text()
    assert "| a row by hand |" not in mended and out.written() == out.text(), mended
    assert generated.main(["--check"]) == 0
