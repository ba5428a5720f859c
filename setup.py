"""Packages are found, not listed: every folder under the four source roots is a package of
the wheel (pyproject.toml maps the top-level streams/, connectors/ and schemas/ folders to
runonce.streams, runonce.connectors and runonce.schemas). Everything else is in pyproject.toml."""

from pathlib import Path

from setuptools import setup

HERE = Path(__file__).resolve().parent
ROOTS = {"runonce": "runonce", "runonce.streams": "streams", "runonce.connectors": "connectors",
         "runonce.schemas": "schemas"}


def find_packages() -> list[str]:
    found = []
    for name, folder in ROOTS.items():
        root = HERE / folder
        for d in [root, *sorted(p for p in root.rglob("*") if p.is_dir())]:
            rel = d.relative_to(root).parts
            if any(part.startswith((".", "__")) for part in rel):
                continue  # caches
            found.append(".".join((name, *rel)))
    return found


setup(packages=find_packages())
