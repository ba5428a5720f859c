"""Every file, or block of a file, that is written from a declaration rather than by hand.

The declarations are the code (settings, a kind's fields, the topics, the alert rules); the
pages and the chart's files are outputs, committed because a reader of the docs and ``helm
install`` read them as files (a chart reaches nothing outside its folder, a symlink is lost when it
is packaged). ``python -m runonce.ops.generated`` rewrites them all; ``--check`` names each that
differs and exits 1 (tests/unit/test_generated.py runs it).
"""

from __future__ import annotations

import argparse
import re
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

#: the source tree: these files are the repository's, not the installed package's
ROOT = Path(__file__).resolve().parents[2]


@dataclass(frozen=True, slots=True)
class Generated:
    """One output: the whole of ``path``, or the block between ``<!-- block -->`` and its
    closing marker in it; ``source`` names the declaration for whoever reads a failed check."""

    path: str
    block: str | None
    source: str
    text: Callable[[], str]

    def _span(self, page: str) -> tuple[int, int]:
        # a block closes with its kind alone: <!-- fields:stripe --> ... <!-- /fields -->
        opening, closing = re.escape(str(self.block)), re.escape(str(self.block).split(":")[0])
        found = re.search(rf"<!-- {opening} -->\n(.*?)\n<!-- /{closing} -->", page, flags=re.S)
        if found is None:
            raise SystemExit(f"{self.path} has no '<!-- {self.block} -->' block: add the two markers where it goes")
        return found.start(1), found.end(1)

    def written(self) -> str:
        page = (ROOT / self.path).read_text()
        if self.block is None:
            return page
        start, end = self._span(page)
        return page[start:end]

    def write(self) -> bool:
        """Rewrites the output from its declaration; says whether anything changed."""
        file = ROOT / self.path
        page = file.read_text()
        if self.block is None:
            new = self.text()
        else:
            start, end = self._span(page)
            new = page[:start] + self.text() + page[end:]
        if new == page:
            return False
        file.write_text(new)
        return True

    @property
    def name(self) -> str:
        return self.path if self.block is None else f"{self.path} <!-- {self.block} -->"


def _topics_yaml() -> str:
    import yaml

    from runonce.kafka.topics import TOPICS

    head = ("# runonce's topics and their configs (the Strimzi KafkaTopic resources): written from\n"
            "# runonce/kafka/topics.py by `python -m runonce.ops.generated`; edit that, not this.\n")
    return head + yaml.safe_dump({t.name: dict(t.configs) for t in TOPICS}, sort_keys=True)


def _alerts_yml() -> str:
    return (ROOT / "runonce/ops/observe/alerts.yml").read_text()


def outputs() -> tuple[Generated, ...]:
    from runonce.connectors.executor import registry
    from runonce.settings import settings_table

    kinds = tuple(
        Generated("docs/vendors.md", f"fields:{kind}", f"the {kind} kind's field spec (connectors/vendors/)",
                  registry.SHIPPED[kind].spec.markdown)
        for kind in sorted(registry.SHIPPED))
    return (
        Generated("docs/operating.md", "settings", "runonce/settings.py", settings_table),
        *kinds,
        Generated("deploy/helm/runonce/files/topics.yaml", None, "runonce/kafka/topics.py", _topics_yaml),
        Generated("deploy/helm/runonce/files/alerts.yml", None, "runonce/ops/observe/alerts.yml", _alerts_yml),
    )


def stale() -> list[Generated]:
    """The outputs whose file differs from what their declaration writes."""
    return [out for out in outputs() if out.written() != out.text()]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m runonce.ops.generated", description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="write nothing; name each output that differs, exit 1 if any")
    args = parser.parse_args(argv)
    if args.check:
        behind = stale()
        for out in behind:
            print(f"{out.name}: differs from {out.source}; run `python -m runonce.ops.generated`", file=sys.stderr)
        return 1 if behind else 0
    for out in outputs():
        if out.write():
            print(f"wrote {out.name} from {out.source}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
