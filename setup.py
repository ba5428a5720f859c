"""Packages are found, not listed: every folder under runonce/ is a package of the wheel.

``runonce/streams``, ``runonce/connectors`` and ``runonce/schemas`` are symlinks to the
top-level folders of those names, so ``runonce.streams`` is a plain folder to Python, to
setuptools and to static tools (a type checker, an IDE) alike: no import hook, no mapping.
Everything else is in pyproject.toml."""

import os
from pathlib import Path

from setuptools import setup

HERE = Path(__file__).resolve().parent


def find_packages() -> list[str]:
    found = []
    for folder, dirs, _ in os.walk(HERE / "runonce", followlinks=True):
        dirs[:] = sorted(d for d in dirs if not d.startswith((".", "__")))  # caches
        found.append(".".join(Path(folder).relative_to(HERE).parts))
    return found


setup(packages=find_packages())
