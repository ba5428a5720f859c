"""Packages are found, not listed: every folder under runonce/ is a package of the wheel.

``runonce/streams``, ``runonce/connectors`` and ``runonce/schemas`` are symlinks to the
top-level folders of those names, so ``runonce.streams`` is a plain folder to Python, to
setuptools and to static tools (a type checker, an IDE) alike: no import hook, no mapping.
The test tools (``runonce/testkit``: the fault injector, agents, storms, a test Jaeger and an
identity provider) are left out: the tests run from the source tree, and what runs in production
carries none of them (pyproject's import contract keeps the product from importing them).
Everything else is in pyproject.toml."""

import os
from pathlib import Path

from setuptools import setup

HERE = Path(__file__).resolve().parent
LEFT_OUT = "runonce.testkit"


def find_packages() -> list[str]:
    found = []
    for folder, dirs, _ in os.walk(HERE / "runonce", followlinks=True):
        dirs[:] = sorted(d for d in dirs if not d.startswith((".", "__")))  # caches
        found.append(".".join(Path(folder).relative_to(HERE).parts))
    return [name for name in found if name != LEFT_OUT and not name.startswith(LEFT_OUT + ".")]


setup(packages=find_packages())
