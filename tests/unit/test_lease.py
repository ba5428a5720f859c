"""The lease's own bookkeeping (connectors/executor/lease.py): when it holds, when a renewal is
due, and why it does not hold, as the executor's lease-ended log line says it. Catches: a stop
that a later proving commit undoes (a stopping executor would start calls again), a renewal
never due or always due, and a lapse logged without its cause (a slow batch, a freeze and a
cut all read "cut off from the broker")."""

from __future__ import annotations

from runonce.connectors.executor.lease import Lease


def test_holds_from_a_proof_for_its_length_and_is_due_for_renewal_at_half() -> None:
    now = [100.0]
    lease = Lease(5.0, clock=lambda: now[0])
    assert not lease.holds() and lease.lapsed_why() == "never proven"
    lease.proven(100.0)
    assert lease.holds() and not lease.due()
    now[0] = 102.6
    assert lease.holds() and lease.due()
    now[0] = 105.0
    assert not lease.holds()


def test_a_stop_is_for_good() -> None:
    now = [0.0]
    lease = Lease(5.0, clock=lambda: now[0])
    lease.proven(0.0)
    lease.stop()
    lease.proven(0.0)  # a commit that proves ownership after the stop
    assert not lease.holds() and not lease.due()
    assert lease.lapsed_why() == "the executor is stopping"


def test_a_lapse_says_why() -> None:
    now = [0.0]
    lease = Lease(5.0, clock=lambda: now[0])
    lease.proven(0.0)
    now[0] = 7.5
    assert lease.lapsed_why() == ("no commit proved ownership for 7.5 s (cut off from the broker, or the process "
                                  "was frozen)")
    lease.unproven("ABORTABLE")
    assert lease.lapsed_why().endswith("(the last proving commit failed: ABORTABLE)")
    lease.ended()
    assert lease.lapsed_why() == "the partitions were revoked"


def test_a_lease_ends_before_the_group_could_give_its_partitions_away() -> None:
    """The broker keeps a member a session timeout past its last heartbeat; the lease must end
    before then, with a heartbeat interval (a third of a session by librdkafka's default) and a
    request's flight to spare. Catches a lease as long as the session (``SESSION_SHARE`` 1.0:
    a zombie calls while its heir reconciles)."""
    for session_ms in (6_000, 10_000, 45_000):
        lease = Lease.of_session(session_ms)
        assert lease.length_s + session_ms / 1000 / 3 < session_ms / 1000, (session_ms, lease.length_s)


def test_a_proving_commit_counts_from_when_it_began() -> None:
    """A commit that takes 3 s of a 5 s lease proves ownership from its start: the lease holds
    2 s past its return, not 5 (the broker may have moved the partitions while it waited).
    Catches the clock read after the commit; a failed commit proves nothing."""
    now = [0.0]
    lease = Lease(5.0, clock=lambda: now[0])

    def slow_commit() -> bool:
        now[0] += 3.0
        return True

    assert lease.proving(slow_commit)
    now[0] = 4.9
    assert lease.holds()
    now[0] = 5.0
    assert not lease.holds()
    assert not lease.proving(lambda: False) and not lease.holds()


def test_no_lease_lets_every_call_start_and_never_asks_for_a_renewal() -> None:
    """The null object (the runner on its own): catches a NO_LEASE that a stop, an end or an
    unproven commit turns off, or one that asks for proving commits."""
    from runonce.connectors.executor.lease import NO_LEASE

    NO_LEASE.ended("revoked")
    NO_LEASE.stop()
    NO_LEASE.unproven("a commit failed")
    assert NO_LEASE.holds() and not NO_LEASE.due() and NO_LEASE.zombie_window_s(30.0) == 0.0
