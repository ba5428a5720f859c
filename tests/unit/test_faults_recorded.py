"""The fault injector's bookkeeping (runonce/testkit/faults.py) with iptables recorded instead
of run: what ``cut`` adds and ``heal`` deletes, on any machine, without root. And a fault that
cannot be injected (iptables absent) leaves no cgroup behind.

Catches: a heal that deletes nothing or another fault's rules, a close that leaves our chain
or its jump, and a close that stops at iptables' first failure before giving the processes'
cgroups back (runs on a machine without iptables left six empty cgroups under
``runonce-faults``)."""

from __future__ import annotations

import os
import shlex
import subprocess
from pathlib import Path

import pytest

from runonce.testkit.faults import CGROUP_PREFIX, CHAIN, Faults, FaultsUnavailable, cgroup2_root

#: the machine's iptables chains and the injector's cgroups: one such test at a time (conftest.py)
pytestmark = pytest.mark.usefixtures("machine_faults_lock")


class RecordedIptables:
    """The filter table's chains in memory; each command kept as it was given."""

    def __init__(self) -> None:
        self.chains: dict[str, list[str]] = {"OUTPUT": [], "INPUT": []}
        self.commands: list[list[str]] = []

    def __call__(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        self.commands.append(list(args))
        op, chain, rest = args[0], args[1] if len(args) > 1 else "", list(args[2:])
        ok, out = True, ""
        if op == "-S":
            ok = chain in self.chains
            out = "".join(f"-A {chain} {rule}\n" for rule in self.chains.get(chain, []))
        elif op == "-N":
            self.chains[chain] = []
        elif op == "-X":
            ok = self.chains.pop(chain, None) == []
        elif op in ("-A", "-I", "-C", "-D"):
            rule = shlex.join(rest[1:] if op == "-I" else rest)
            held = self.chains.get(chain, [])
            if op == "-C":
                ok = rule in held
            elif op == "-D":
                ok = rule in held
                if ok:
                    held.remove(rule)
            else:
                held.insert(0, rule) if op == "-I" else held.append(rule)
        if check and not ok:
            raise FaultsUnavailable(f"iptables {' '.join(args)}: refused")
        return subprocess.CompletedProcess(["iptables", *args], 0 if ok else 1, out, "")


def _placed(tmp_path: Path, iptables: RecordedIptables) -> Faults:
    """A session whose cgroup root is a folder of the test (cut and heal read only the process
    list of a cgroup)."""
    faults = Faults(_root=tmp_path, _iptables=iptables)
    faults.place("executor", os.getpid())
    return faults


def test_a_heal_deletes_its_own_rules_and_no_other(tmp_path: Path) -> None:
    iptables = RecordedIptables()
    faults = _placed(tmp_path, iptables)
    broker = faults.cut("executor", [9092])
    vendor = faults.lose("executor", [8080], 0.5)
    assert iptables.chains["OUTPUT"] == [f"-j {CHAIN}"]
    assert len(iptables.chains[CHAIN]) == 2
    faults.heal(broker)
    deleted = [c for c in iptables.commands if c[0] == "-D"]
    assert len(deleted) == 1 and "9092" in deleted[0] and "8080" not in " ".join(deleted[0])
    assert [r for r in iptables.chains[CHAIN] if "8080" in r] == iptables.chains[CHAIN]  # the loss stays on
    faults.heal(vendor)
    faults.heal(vendor)  # healed already: nothing more to delete
    assert iptables.chains[CHAIN] == [] and len([c for c in iptables.commands if c[0] == "-D"]) == 2


def test_heal_all_and_the_chains_end_drop_our_chain_and_its_jump(tmp_path: Path) -> None:
    iptables = RecordedIptables()
    faults = _placed(tmp_path, iptables)
    faults.cut("executor", [9092])
    faults.cut_from("10.244.0.0/16", [9093])
    faults.heal_all()
    from runonce.testkit.faults import JUMPED_FROM, _drop_chain_if_empty

    for chain in JUMPED_FROM:
        _drop_chain_if_empty(chain, iptables)
    assert iptables.chains == {"OUTPUT": [], "INPUT": []}


def _cgroup_root() -> Path:
    try:
        root = cgroup2_root()
    except FaultsUnavailable as exc:
        pytest.skip(str(exc))
    if not os.access(root / "cgroup.procs", os.W_OK):
        pytest.skip(f"{root} is not writable here")
    return root


def test_a_fault_that_cannot_be_injected_leaves_no_cgroup_behind() -> None:
    """iptables absent: the cut fails and says so; closing the session (as the fixture does
    after the failed test) gives the process back and removes its cgroups, then says why."""
    root = _cgroup_root()

    def absent(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        raise FaultsUnavailable("iptables is not installed")

    faults = Faults(_root=root, _iptables=absent)
    child = subprocess.Popen(["sleep", "30"])
    try:
        faults.place("executor", child.pid)
        with pytest.raises(FaultsUnavailable, match="not installed"):
            faults.cut("executor", [9092])
        with pytest.raises(FaultsUnavailable, match="not installed"):
            faults.close()
        assert not (root / CGROUP_PREFIX / faults.session).exists()
        assert str(child.pid) in (root / "cgroup.procs").read_text().split()
    finally:
        child.kill()
        child.wait()
