"""Notice a consumer that has lost its group coordinator for good.

A consumer that starts while the broker cannot answer (paused, overloaded) can give up on its
bootstrap connection and re-bootstrap; librdkafka 2.16 can then drop the coordinator it had
just found and never ask for one again ("no broker available for coordinator query", for
minutes; confluentinc/librdkafka#5511 is the same hole from another side). Such a consumer
never joins its group: it owns no partition, nothing rebalances to it, and its process looks
alive. Seen in the fault test: an executor restarted during the broker's pause sat so for 6
minutes while its actions waited.

The client's statistics (``statistics.interval.ms``) carry the group's state (``cgrp.state``)
and how long it has been in it (``stateage``, ms). ``up`` means the coordinator is known and
reachable, whatever the join is doing; anything else for ``limit_s`` is the hole, and the
process leaves for a restart, which clears it. A broker that is really away for that long
costs a restart per ``limit_s``, nothing more: the restarted process waits for it like this one."""

from __future__ import annotations

from dataclasses import dataclass

from runonce.kafka.stats import Stats

#: how long a consumer may be without its group coordinator (a failover takes seconds, a broker
#: restart under a minute; this outlasts both)
GROUP_LIMIT_S = 60.0


@dataclass(frozen=True, slots=True)
class GroupState:
    state: str
    age_s: float
    join_state: str


class GroupStall:
    """Fed the client's statistics (``on_stats``, a ``stats_cb``); ``check`` says whether the
    consumer has been without its coordinator for ``limit_s``."""

    def __init__(self, limit_s: float = GROUP_LIMIT_S) -> None:
        self.limit_s = limit_s
        self.last: GroupState | None = None

    def on_stats(self, stats: Stats) -> None:
        try:
            cgrp = stats["cgrp"]
            self.last = GroupState(str(cgrp["state"]), float(cgrp["stateage"]) / 1000.0,
                                   str(cgrp.get("join_state", "?")))
        except (ValueError, KeyError, TypeError):
            return  # a client without a group: nothing to watch

    def check(self) -> str | None:
        """What is wrong, or None."""
        last = self.last
        if last is None or last.state == "up" or last.age_s < self.limit_s:
            return None
        return (f"no group coordinator for {last.age_s:.0f} s (group state {last.state}, join state "
                f"{last.join_state}): the client stopped looking for one")
