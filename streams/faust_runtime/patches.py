"""Every method of faust's own that runonce replaces, in one screen, and the one way they are put in.

faust offers no seam for any of them (the module each names says why). Each replacement is made
from faust's original, which it wraps or stands in for; ``install`` always makes it from the
original as first found, so installing again (a test's other drain bound) never wraps a
replacement. Installed by the faust app (``app.py``) before it makes anything of faust's.
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass
from importlib.metadata import requires, version
from typing import Any, Callable

from runonce.errors import FatalError
from runonce.streams.faust_runtime import drain, fence, markers
from runonce.streams.faust_runtime.drain import DrainBound


def fits() -> str:
    """The faust-streaming releases these replacements were written for: the `faust` extra's
    requirement, as pyproject.toml declares it (read from the installed metadata)."""
    found = [r.split(";")[0].strip() for r in requires("runonce") or () if r.startswith("faust-streaming")]
    return found[0] if found else "faust-streaming (see runonce's faust extra)"


class FaustDoesNotFit(FatalError):
    """The installed faust-streaming no longer has a method runonce replaces, or it takes other
    parameters: the replacement would be set on nothing faust calls, or called wrongly."""


@dataclass(frozen=True, slots=True)
class Patch:
    #: a faust class or module, and the name replaced on it
    owner: object
    name: str
    #: faust's original -> runonce's replacement
    replace: Callable[[Any], object]
    why: str
    #: the parameters faust's original takes (None: not a function)
    takes: tuple[str, ...] | None


def patches(bound: DrainBound) -> tuple[Patch, ...]:
    import faust.tables.recovery as recovery_module
    from faust.tables.recovery import Recovery
    from faust.transport.consumer import Consumer
    from faust.transport.producer import ProducerBuffer

    return (
        Patch(ProducerBuffer, "_send_pending", drain.counted_hand_on,
              "drain.py: the record taken off the queue and not yet handed on is counted", ("self", "fut")),
        Patch(ProducerBuffer, "flush", drain.draining_flush(bound),
              "drain.py: offsets are committed only once nothing is queued or in hand", ("self",)),
        Patch(Consumer, "_new_offset", fence.fenced_offset,
              "fence.py: an input partition is committed only as far as the pipeline decided it", ("self", "tp")),
        Patch(Consumer, "perform_seek", fence.seeks_told, "fence.py: the fence starts where faust seeked",
              ("self",)),
        Patch(Consumer, "on_partitions_revoked", fence.revocations_told,
              "fence.py: the fence forgets a partition faust lets go", ("self", "revoked")),
        Patch(Recovery, "__init__", markers.recovery_through_view,
              "markers.py: recovery finishes past commit markers, believing the broker, not the position",
              ("self", "app", "tables", "kwargs")),
        Patch(recovery_module, "asyncio", markers.recovery_clock, "markers.py: recovery's cycle is 1 s, not 5 s",
              None),
    )


#: faust's own, as first found (id of its owner, name): what every installation wraps
_ORIGINALS: dict[tuple[int, str], object] = {}


def original(owner: object, name: str) -> object:
    """faust's own ``owner.name``, whether or not it is replaced now."""
    return _ORIGINALS.get((id(owner), name), getattr(owner, name))


def misfits(listed: tuple[Patch, ...]) -> list[str]:
    """What no longer fits in the installed faust: each name missing, or taking other parameters."""
    found = []
    for patch in listed:
        owner = getattr(patch.owner, "__name__", repr(patch.owner))
        if not hasattr(patch.owner, patch.name):
            found.append(f"{owner}.{patch.name} is gone")
            continue
        if patch.takes is not None:
            takes = tuple(inspect.signature(original(patch.owner, patch.name)).parameters)  # type: ignore[arg-type]
            if takes != patch.takes:
                found.append(f"{owner}.{patch.name} takes {takes}, not {patch.takes}")
    return found


def install(bound: DrainBound = DrainBound()) -> None:
    """Puts every replacement in, made from faust's originals; ``bound`` is the draining flush's.
    Refuses (``FaustDoesNotFit``, before anything is replaced) a faust they no longer fit."""
    listed = patches(bound)
    wrong = misfits(listed)
    if wrong:
        raise FaustDoesNotFit(
            f"faust-streaming {version('faust-streaming')} does not fit runonce's faust runtime (written for "
            f"{fits()}): {'; '.join(wrong)}. Install a faust-streaming in that range, or run "
            "`runonce worker --runtime transactional`")
    for patch in listed:
        faust_own = _ORIGINALS.setdefault((id(patch.owner), patch.name), getattr(patch.owner, patch.name))
        setattr(patch.owner, patch.name, patch.replace(faust_own))
