"""The fault injector itself (runonce/testkit/faults.py), on this machine's loopback: a cut
reaches only the process it names, heals, and leaves nothing behind."""

from __future__ import annotations

import contextlib
import socket
import subprocess
import sys
import threading
import time
from typing import Iterator

import pytest

from runonce.testkit import faults as network_faults
from runonce.testkit.faults import Faults

#: a child that connects to the port it is given (on the address given second, else loopback)
#: every 0.1 s and says how each try went
_DIALER = """
import socket, sys, time
host = sys.argv[2] if len(sys.argv) > 2 else "127.0.0.1"
while True:
    try:
        socket.create_connection((host, int(sys.argv[1])), timeout=0.3).close()
        print("ok", flush=True)
    except OSError as exc:
        print(type(exc).__name__, flush=True)
    time.sleep(0.1)
"""

#: the machine's iptables chains and the injector's cgroups: one such test at a time (conftest.py)
pytestmark = pytest.mark.usefixtures("machine_faults_lock")


#: a child that holds one connection, made at once, and asks the echo at its end every 0.1 s
_HOLDER = """
import socket, sys, time
held = socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=0.3)
while True:
    try:
        held.sendall(b"x")
        held.recv(1)
        print("ok", flush=True)
    except OSError as exc:
        print(type(exc).__name__, flush=True)
    time.sleep(0.1)
"""


def _echo(listener: socket.socket) -> None:
    def serve(conn: socket.socket) -> None:
        with conn, contextlib.suppress(OSError):  # closed at the test's end
            while data := conn.recv(64):
                conn.sendall(data)
    while True:
        try:
            conn, _ = listener.accept()
        except OSError:
            return
        threading.Thread(target=serve, args=(conn,), daemon=True).start()


@contextlib.contextmanager
def _child(script: str, port: int, *args: str, netns: str | None = None) -> Iterator[subprocess.Popen[str]]:
    """``script`` run with ``port`` (in network namespace ``netns``); killed at the end, whatever happened."""
    inside = ["ip", "netns", "exec", netns] if netns else []
    child = subprocess.Popen([*inside, sys.executable, "-c", script, str(port), *args], stdout=subprocess.PIPE,
                             text=True)
    try:
        yield child
    finally:
        child.kill()
        child.wait()


@contextlib.contextmanager
def _listening(echo: bool = False, host: str = "127.0.0.1") -> Iterator[int]:
    """A port on ``host`` for the children to reach (answering each byte with itself, ``echo``)."""
    listener = socket.create_server((host, 0))
    listener.listen(64)
    if echo:
        threading.Thread(target=_echo, args=(listener,), daemon=True).start()
    try:
        yield int(listener.getsockname()[1])
    finally:
        listener.close()


def _tries(child: subprocess.Popen[str], seconds: float) -> list[str]:
    """What the child said over the next ``seconds``."""
    said: list[str] = []
    deadline = time.monotonic() + seconds
    assert child.stdout is not None
    while time.monotonic() < deadline:
        said.append(child.stdout.readline().strip())
    return said


def test_a_cut_drops_only_the_named_process_and_heals_and_leaves_nothing() -> None:
    """Catches a rule that drops more than the named process (the test's own connection times
    out), one that drops nothing (the child keeps connecting), a heal that leaves the rule (it
    never connects again), and a close that leaves a rule, the chain or a cgroup behind."""
    if network_faults.available() is not None:
        pytest.fail(f"network faults cannot be injected here: {network_faults.available()}")
    with _listening() as port, _child(_DIALER, port) as child:
        with Faults() as faults:
            faults.place("dialer", child.pid)
            assert "ok" in _tries(child, 1.0)
            assert faults.left()  # what ``left`` finds while the fault is on
            cut = faults.cut("dialer", [port])
            _tries(child, 0.5)  # a try already under way
            during = _tries(child, 1.5)
            socket.create_connection(("127.0.0.1", port), timeout=1).close()  # the test itself is not cut
            faults.heal(cut)
            _tries(child, 0.5)
            after = _tries(child, 1.0)
    assert during and set(during) == {"TimeoutError"}, during
    assert "ok" in after, after
    assert faults.left() == []


def test_loss_drops_a_share_of_the_packets() -> None:
    """Half the packets of the named process lost: some of its connections fail, some do not.
    Catches a heal that deletes a rule by the spec it was added with (iptables on nf_tables lists
    a probability of 0.0001 as 0.00009999983, and refuses to delete the spec as given)."""
    with _listening() as port, _child(_DIALER, port) as child:
        with Faults() as faults:
            faults.place("dialer", child.pid)
            faults.lose("dialer", [port], 0.5)
            said = _tries(child, 4.0)
            odd = faults.lose("dialer", [port], 0.0001)  # kept rounded by nf_tables: healed all the same
            faults.heal(odd)
            left_on = [line for line in faults.left() if "statistic" in line and "0.5" not in line]
    assert "ok" in said and "TimeoutError" in said, said
    assert left_on == [], left_on
    assert faults.left() == []


def test_a_connection_held_from_before_the_cut_is_cut_too() -> None:
    """A socket belongs to the cgroup its process was in when it was made: a process placed
    after it connected (a gateway already talking to the broker) is cut by its connections'
    own ports. Catches the cut made only by cgroup (the held connection keeps answering)."""
    with _listening(echo=True) as port, _child(_HOLDER, port) as child:
        assert "ok" in _tries(child, 1.0)  # connected, and answered, before it is placed
        with Faults() as faults:
            faults.place("holder", child.pid)
            faults.cut("holder", [port])
            _tries(child, 0.5)
            during = _tries(child, 1.5)
    assert during and "ok" not in during, during
    assert faults.left() == []


#: a network of its own for the test, as scripts/kube.sh's pods have: this machine at .1, the
#: namespace at .2 (documentation's TEST-NET would do, but a cut must name a private network)
_NETNS, _HOST_IP, _NS_IP, _NETWORK = "runonce-faults-test", "10.250.77.1", "10.250.77.2", "10.250.77.0/30"


@contextlib.contextmanager
def _network_namespace() -> Iterator[str]:
    """A network namespace joined to this machine by a veth pair, as a pod is by its bridge."""
    def ip(*args: str, check: bool = True) -> None:
        subprocess.run(["ip", *args], check=check, capture_output=True)

    ip("netns", "del", _NETNS, check=False)  # an earlier run's, stopped midway
    ip("link", "del", "rf-test-h", check=False)
    ip("netns", "add", _NETNS)
    try:
        ip("link", "add", "rf-test-h", "type", "veth", "peer", "name", "rf-test-n")
        ip("link", "set", "rf-test-n", "netns", _NETNS)
        ip("addr", "add", f"{_HOST_IP}/30", "dev", "rf-test-h")
        ip("link", "set", "rf-test-h", "up")
        ip("netns", "exec", _NETNS, "ip", "addr", "add", f"{_NS_IP}/30", "dev", "rf-test-n")
        ip("netns", "exec", _NETNS, "ip", "link", "set", "rf-test-n", "up")
        yield _NETNS
    finally:
        ip("link", "del", "rf-test-h", check=False)
        ip("netns", "del", _NETNS, check=False)


def test_a_network_cut_drops_what_the_pods_network_sends_and_heals() -> None:
    """A pod's packets never pass this machine's OUTPUT chain: the cut of the pods' network
    (scripts/cluster.py's broker cut) drops what a network namespace sends to a port here, and
    only that, until healed. Catches the rule put in OUTPUT or matched on ``lo`` (the namespace
    keeps connecting), a rule that cuts this machine's own connections to that network's address
    (the oracle reading the broker the pods are cut from), a heal that leaves it (it never connects
    again), a close that leaves the chain, and a public network accepted as a target."""
    with _network_namespace() as netns, _listening(host=_HOST_IP) as port, \
            _child(_DIALER, port, _HOST_IP, netns=netns) as child:
        assert "ok" in _tries(child, 1.0)
        with Faults() as faults:
            cut = faults.cut_from(_NETWORK, [port])
            _tries(child, 0.5)
            during = _tries(child, 1.5)
            socket.create_connection((_HOST_IP, port), timeout=1).close()  # this machine itself is not cut
            faults.heal(cut)
            _tries(child, 0.5)
            after = _tries(child, 1.0)
            with pytest.raises(ValueError, match="private network"):
                faults.cut_from("8.8.8.0/24", [port])
    assert during and set(during) == {"TimeoutError"}, during
    assert "ok" in after, after
    assert faults.left() == [] and network_faults.leftovers() == []
