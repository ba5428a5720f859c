"""Network faults for tests, on this machine only: one named process cut off from some ports
(a broker, a vendor) on loopback, or its packets to them lost at random, then healed; or a
network of this machine (the pods' bridge of scripts/kube.sh) cut off from this machine's ports.

How: the process is moved into a cgroup of its own (cgroup v2), and an iptables rule in a
chain of ours drops what that cgroup sends on ``lo`` to the given ports. A socket belongs to
the cgroup its process was in when the socket was made, so the connections the process
already holds to those ports are cut by their own ports too (read from ``/proc``). Nothing
is refused or reset: the process's requests go unanswered, as across a partition, while
every other process (the broker's other clients, the test itself) is untouched. A process
started by the cut one (its children) is cut too.

Why not ``tc netem``: this machine's kernel has no netem qdisc (tried). Why not a proxy: a
Kafka client connects to the address the broker advertises, not to a proxy it was given, and
the one-process cut is the zombie Kafka's fencing exists for.

A pod's packets never pass this machine's OUTPUT chain (they come from another network
namespace, through a bridge), so a cut of pods is by their source network, in a chain jumped to
from INPUT: what the network sends to the ports is dropped, connections already held included.
Only a private network may be named (RFC 1918 and the like): a rule never names a foreign
address.

``Faults`` undoes everything it did on ``close`` (rules, chain, cgroups; the processes go
back to the root cgroup). ``leftovers`` says what any ``Faults`` left on the machine: the
test session checks it is nothing. Every target is a port of this machine: no rule names an
address outside it."""

from __future__ import annotations

import ipaddress
import os
import shlex
import subprocess
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol, Sequence

#: our chain in the filter table, jumped to from OUTPUT while any fault is on
CHAIN = "RUNONCE-FAULTS"
#: our chain for cuts of a network (``NetworkCut``), jumped to from INPUT
IN_CHAIN = "RUNONCE-FAULTS-IN"
#: each chain of ours, and the built-in chain that jumps to it
JUMPED_FROM = {CHAIN: "OUTPUT", IN_CHAIN: "INPUT"}
#: our cgroups live under this one, below the cgroup v2 mount
CGROUP_PREFIX = "runonce-faults"


class FaultsUnavailable(RuntimeError):
    """This machine cannot inject them (no root, no iptables, no cgroup v2)."""


def cgroup2_root() -> Path:
    for line in Path("/proc/mounts").read_text().splitlines():
        parts = line.split()
        if len(parts) > 2 and parts[2] == "cgroup2":
            return Path(parts[1])
    raise FaultsUnavailable("no cgroup v2 hierarchy is mounted")


def _run_iptables(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    try:
        done = subprocess.run(["iptables", "-w", *args], capture_output=True, text=True, timeout=30)
    except FileNotFoundError as exc:
        raise FaultsUnavailable("iptables is not installed") from exc
    if check and done.returncode != 0:
        raise FaultsUnavailable(f"iptables {' '.join(args)}: {done.stderr.strip()}")
    return done


class Iptables(Protocol):
    def __call__(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]: ...


@dataclass(frozen=True, slots=True)
class Fault:
    """One rule: what ``name``'s cgroup sends to ``ports`` is dropped (all, or ``loss`` of it)."""

    name: str
    ports: tuple[int, ...]
    #: the share of packets dropped; 1.0 is a cut
    loss: float = 1.0

    def rules(self, cgroup: str, held: Sequence[tuple[int, int]], tag: str) -> list[list[str]]:
        """One rule for what the cgroup's sockets send, one per connection it already holds
        (``held``: (its own port, the port it reaches)); each with ``tag`` as its comment."""
        if not self.ports or not all(0 < p < 65536 for p in self.ports):
            raise ValueError(f"{self.name}: ports must be given, each 1..65535: {self.ports}")
        if not 0.0 < self.loss <= 1.0:
            raise ValueError(f"{self.name}: loss is a share in (0, 1]: {self.loss}")
        matches = [["-m", "multiport", "--dports", ",".join(map(str, self.ports)), "-m", "cgroup", "--path", cgroup]]
        matches += [["--sport", str(own), "--dport", str(port)] for own, port in held]
        return [self._rule(match, tag) for match in matches]

    def _rule(self, match: list[str], tag: str) -> list[str]:
        rule = ["-o", "lo", "-p", "tcp", *match]
        if self.loss < 1.0:
            rule += ["-m", "statistic", "--mode", "random", "--probability", f"{self.loss:.4f}"]
        return [*rule, "-m", "comment", "--comment", tag, "-j", "DROP"]  # whose rule it is: ``heal``, ``left``


@dataclass(frozen=True, slots=True)
class NetworkCut:
    """One rule: what ``source`` (a private network of this machine) sends to this machine's
    ``ports`` from outside this machine is dropped."""

    source: str
    ports: tuple[int, ...]

    def rule(self, tag: str) -> list[str]:
        if not self.ports or not all(0 < p < 65536 for p in self.ports):
            raise ValueError(f"{self.source}: ports must be given, each 1..65535: {self.ports}")
        network = ipaddress.ip_network(self.source)  # ValueError names what is wrong with it
        if not network.is_private or network.prefixlen < 8:
            raise ValueError(f"{self.source}: only a private network of this machine may be cut")
        # ! -i lo: this machine's own connections to an address of that network stay up
        return ["!", "-i", "lo", "-s", str(network), "-p", "tcp", "-m", "multiport", "--dports", ",".join(map(str, self.ports)),
                "-m", "comment", "--comment", tag, "-j", "DROP"]


@dataclass
class Faults:
    """The faults of one test: ``place`` a process, ``cut`` or ``lose`` its packets, ``heal``."""

    #: this test's cgroups: ``CGROUP_PREFIX/<session>/<process name>``
    session: str = field(default_factory=lambda: uuid.uuid4().hex[:8])
    _root: Path = field(default_factory=cgroup2_root)
    #: each fault on, by its key: the tag its rules carry
    _rules: dict[str, str] = field(default_factory=dict)
    _placed: dict[str, Path] = field(default_factory=dict)
    #: how iptables is run (tests without root record its commands)
    _iptables: Iptables = field(default=_run_iptables)

    def place(self, name: str, pid: int) -> None:
        """Put process ``pid`` (and the children it starts from now on) under ``name``."""
        folder = self._root / CGROUP_PREFIX / self.session / name
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "cgroup.procs").write_text(str(pid))
        self._placed[name] = folder

    def cut(self, name: str, ports: Sequence[int]) -> Fault:
        """Drop everything ``name`` sends to ``ports`` until ``heal``."""
        return self._add(Fault(name, tuple(ports)))

    def lose(self, name: str, ports: Sequence[int], loss: float) -> Fault:
        """Drop ``loss`` of the packets ``name`` sends to ``ports`` until ``heal``."""
        return self._add(Fault(name, tuple(ports), loss))

    def cut_from(self, source: str, ports: Sequence[int]) -> NetworkCut:
        """Drop everything the network ``source`` sends to this machine's ``ports`` until ``heal``."""
        cut = NetworkCut(source, tuple(ports))
        tag = f"{CGROUP_PREFIX}/{self.session}/net#{len(self._rules) + 1}-{uuid.uuid4().hex[:4]}"
        rule = cut.rule(tag)
        _ensure_chain(IN_CHAIN, self._iptables)
        self._rules[self._key(cut)] = tag
        self._iptables("-A", IN_CHAIN, *rule)
        return cut

    def heal(self, fault: Fault | NetworkCut) -> None:
        tag = self._rules.pop(self._key(fault), None)
        if tag is not None:
            _delete_tagged(tag, self._iptables)

    def heal_all(self) -> None:
        for key in list(self._rules):
            _delete_tagged(self._rules.pop(key), self._iptables)

    def close(self) -> None:
        """Every rule removed, the chain too once it is empty, every process back at the root.
        The cgroups go even when iptables fails (absent, or refusing): a fault that could not
        be injected leaves nothing behind."""
        try:
            self.heal_all()
            for chain in JUMPED_FROM:
                _drop_chain_if_empty(chain, self._iptables)
        finally:
            for folder in self._placed.values():
                _release(folder, self._root)
            self._placed.clear()
            session = self._root / CGROUP_PREFIX / self.session
            if session.exists():
                session.rmdir()
            _rmdir_if_empty(self._root / CGROUP_PREFIX)

    def left(self) -> list[str]:
        """What this one left on the machine (``leftovers``, for every one)."""
        mine = f"{CGROUP_PREFIX}/{self.session}"
        return [line for line in leftovers() if mine in line]

    def __enter__(self) -> Faults:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- inside ------------------------------------------------------------------------
    def _add(self, fault: Fault) -> Fault:
        folder = self._placed.get(fault.name)
        if folder is None:
            raise ValueError(f"{fault.name}: place the process first")
        pids = [int(pid) for pid in (folder / "cgroup.procs").read_text().split()]
        cgroup = str(folder.relative_to(self._root))
        tag = f"{cgroup}#{len(self._rules) + 1}-{uuid.uuid4().hex[:4]}"
        rules = fault.rules(cgroup, held_connections(pids, fault.ports), tag)
        _ensure_chain(CHAIN, self._iptables)
        self._rules[self._key(fault)] = tag  # before the first rule: whatever is added, heal finds
        for rule in rules:
            self._iptables("-A", CHAIN, *rule)
        return fault

    @staticmethod
    def _key(fault: Fault | NetworkCut) -> str:
        if isinstance(fault, NetworkCut):
            return f"net {fault.source}:{fault.ports}"
        return f"{fault.name}:{fault.ports}:{fault.loss}"


def held_connections(pids: Sequence[int], ports: Sequence[int]) -> list[tuple[int, int]]:
    """The TCP connections over IPv4 loopback ``pids`` hold to ``ports``: (own port, port)."""
    inodes: set[str] = set()
    for pid in pids:
        try:
            for fd in Path(f"/proc/{pid}/fd").iterdir():
                try:
                    target = os.readlink(fd)
                except OSError:
                    continue  # closed meanwhile
                if target.startswith("socket:["):
                    inodes.add(target[8:-1])
        except OSError:
            continue  # it ended
    held: list[tuple[int, int]] = []
    for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
        fields = line.split()
        local, remote, inode = fields[1], fields[2], fields[9]
        port = int(remote.split(":")[1], 16)
        if inode in inodes and port in ports and remote.startswith("0100007F"):  # 127.0.0.1
            held.append((int(local.split(":")[1], 16), port))
    return held


def _delete_tagged(tag: str, iptables: Iptables) -> None:
    """Every rule of our chains with ``tag`` as its comment, deleted as iptables lists it: a rule
    given back as it was added may not match (nf_tables keeps a probability rounded)."""
    for chain in JUMPED_FROM:
        for line in iptables("-S", chain, check=False).stdout.splitlines():
            words = shlex.split(line)
            if words[:1] == ["-A"] and tag in words:
                iptables("-D", *words[1:])


def _ensure_chain(chain: str, iptables: Iptables) -> None:
    jump_from = JUMPED_FROM[chain]
    if iptables("-S", chain, check=False).returncode != 0:
        iptables("-N", chain)
    if iptables("-C", jump_from, "-j", chain, check=False).returncode != 0:
        iptables("-I", jump_from, "1", "-j", chain)


def _drop_chain_if_empty(chain: str, iptables: Iptables) -> None:
    jump_from = JUMPED_FROM[chain]
    listed = iptables("-S", chain, check=False)
    if listed.returncode != 0:
        return
    if any(line.startswith("-A ") for line in listed.stdout.splitlines()):
        return  # another test's faults are still on
    while iptables("-C", jump_from, "-j", chain, check=False).returncode == 0:
        iptables("-D", jump_from, "-j", chain)
    iptables("-X", chain)


def _release(folder: Path, root: Path) -> None:
    """Move what is left in ``folder`` (the process, if it lives, and its children) back to the root."""
    if not folder.exists():
        return
    for pid in (folder / "cgroup.procs").read_text().split():
        try:
            (root / "cgroup.procs").write_text(pid)
        except ProcessLookupError:
            pass  # it ended meanwhile
    folder.rmdir()


def _rmdir_if_empty(folder: Path) -> None:
    try:
        folder.rmdir()
    except OSError:
        pass  # absent, or another session's cgroups are in it


def leftovers() -> list[str]:
    """What faults left on this machine: rules or a jump to our chain, our cgroups."""
    found: list[str] = []
    listed = _run_iptables("-S", check=False).stdout.splitlines()
    found += [line for line in listed if CHAIN in line or CGROUP_PREFIX in line]
    try:
        ours = cgroup2_root() / CGROUP_PREFIX
    except FaultsUnavailable:
        return found
    if ours.exists():
        found += [f"cgroup {p}" for p in sorted(ours.rglob("*")) if p.is_dir()] or [f"cgroup {ours}"]
    return found


def available() -> str | None:
    """None, or why this machine cannot inject faults."""
    try:
        root = cgroup2_root()
        if not (root / "cgroup.procs").exists():
            return f"{root} is not writable here"
        _run_iptables("-S", "OUTPUT")
    except FaultsUnavailable as exc:
        return str(exc)
    return None
