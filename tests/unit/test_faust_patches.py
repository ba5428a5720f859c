"""streams/faust_runtime/patches.py: every replacement of faust's own code is made from faust's
original, however often it is installed, and faust still has each name runonce replaces.

Catches: ``install`` wrapping what it finds now instead of faust's original (a second install,
as the drain tests make, would wrap a replacement: the record in hand counted twice, never back
to zero after a failed hand-on of the outer wrapper); a faust upgrade that renames a method
runonce replaces (the replacement would be set on nothing faust calls)."""

from __future__ import annotations

import asyncio
import inspect
from types import FunctionType, ModuleType

import pytest

from runonce.streams.faust_runtime import patches
from runonce.streams.faust_runtime.drain import DrainBound


def _wrapped(replacement: object) -> list[object]:
    """What a replacement holds in its closure: the original it wraps, among others."""
    if not isinstance(replacement, FunctionType) or replacement.__closure__ is None:
        return []
    return [cell.cell_contents for cell in replacement.__closure__]


@pytest.mark.parametrize("patch", patches.patches(DrainBound()), ids=lambda p: f"{p.name}")
def test_faust_still_has_each_name_runonce_replaces(patch: patches.Patch) -> None:
    faust_own = patches.original(patch.owner, patch.name)
    where = faust_own.__name__ if isinstance(faust_own, ModuleType) else inspect.getmodule(faust_own).__name__  # type: ignore[union-attr]
    assert where.startswith("faust") or faust_own is asyncio, (patch.name, where)


def test_installed_twice_each_replacement_wraps_fausts_own() -> None:
    patches.install(DrainBound(stuck_after_s=1))
    patches.install()
    for patch in patches.patches(DrainBound()):
        installed = getattr(patch.owner, patch.name)
        assert installed is not patches.original(patch.owner, patch.name), patch.name
        for held in _wrapped(installed):
            module = getattr(held, "__module__", None) or ""
            assert not (callable(held) and module.startswith("runonce.")) or isinstance(held, DrainBound), (
                f"{patch.name} wraps runonce's {held!r}, not faust's own")


def test_a_faust_that_no_longer_fits_is_refused_by_name_before_anything_is_replaced(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Catches the fit check gone (a renamed method would get a replacement faust never calls:
    offsets committed past undecided records, in silence) or made after the replacing."""
    from faust.transport.consumer import Consumer

    patches.install()
    installed = Consumer.perform_seek

    async def perform_seek(self: object, partitions: object) -> None:  # a faust that changed it
        raise AssertionError("never called")

    monkeypatch.setitem(patches._ORIGINALS, (id(Consumer), "perform_seek"), perform_seek)  # noqa: SLF001
    with pytest.raises(patches.FaustDoesNotFit) as refused:
        patches.install()
    said = str(refused.value)
    assert "Consumer.perform_seek takes ('self', 'partitions'), not ('self',)" in said, said
    assert "written for faust-streaming<0.16,>=0.11" in said and "--runtime transactional" in said, said
    assert Consumer.perform_seek is installed  # nothing replaced
