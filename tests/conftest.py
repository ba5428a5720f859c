"""One real Kafka broker per test session (free ports, a temporary folder), started on
first use and stopped at the end whatever happens. Unit tests never start it."""

from __future__ import annotations

import fcntl
import os
import tempfile
from pathlib import Path
from typing import Iterator

import pytest

from runonce.connectors.vendors.sandbox.local_postgres import LocalPostgres
from runonce.devbroker.broker import Broker
from runonce.kafka.topics import create_topics
from runonce.settings import Settings
from runonce.testkit import faults as network_faults
from runonce.testkit.faults import Faults


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Fault tests kill and pause the session's broker: run them after everything else.

    Under pytest-xdist (scripts/test.sh: two workers, each with a broker of its own,
    ``--dist loadscope``) a module's tests stay together on one worker, in order (some read what
    the module's earlier tests left: ``test_no_planted_secret...`` runs last); modules on the two
    workers run side by side, so what must not overlap takes a lock: ``machine_faults_lock``.
    (Not ``loadgroup``: pytest-xdist 3.8 names a group by rewriting ``item._nodeid``, which
    pytest 9's ``nodeid`` no longer reads, so its groups were never kept together.)"""
    items.sort(key=lambda item: item.get_closest_marker("faults") is not None)  # stable: order kept otherwise


@pytest.fixture(scope="session")
def session_home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("runonce-home")


@pytest.fixture(scope="session")
def base_settings(session_home: Path) -> Settings:
    env = {k: v for k, v in os.environ.items() if k.startswith(("XDG_", "RUNONCE_CACHE_DIR", "RUNONCE_KAFKA"))}
    return Settings.from_env({**env, "RUNONCE_HOME": str(session_home)})


@pytest.fixture(scope="session")
def broker(base_settings: Settings) -> Iterator[Settings]:
    """Settings whose bootstrap is a running broker with runonce's topics."""
    b = Broker(base_settings)
    try:
        status = b.start()
        settings = base_settings.with_(bootstrap=status.bootstrap)
        create_topics(settings.bootstrap_servers(), settings.partitions)
        yield settings
    finally:
        b.stop()


@pytest.fixture(scope="session")
def postgres(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalPostgres]:
    """One real PostgreSQL (Debian's) per session, started on first use, stopped whatever happens."""
    server = LocalPostgres(tmp_path_factory.mktemp("postgres"))
    try:
        yield server.start()
    finally:
        server.stop()


#: held while a test changes the machine's iptables chains or the injector's cgroups: one such
#: test at a time on the machine, whichever worker or pytest session runs it
MACHINE_FAULTS_LOCK = Path(tempfile.gettempdir()) / "runonce-machine-faults.lock"


@pytest.fixture
def machine_faults_lock() -> Iterator[None]:
    """No other test's faults on the machine meanwhile: its leftovers check sees only its own."""
    with MACHINE_FAULTS_LOCK.open("a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


@pytest.fixture
def faults(machine_faults_lock: None) -> Iterator[Faults]:
    """This test's network faults (runonce/testkit/faults.py), all undone when it ends, even
    when it fails; a fault left behind fails it."""
    reason = network_faults.available()
    if reason is not None:
        pytest.fail(f"network faults cannot be injected on this machine: {reason}")
    injector = Faults()
    try:
        yield injector
    finally:
        injector.close()
        left = injector.left()
        assert not left, f"faults left on the machine: {left}"


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """Nothing a fault test did may outlive the session (iptables rules, cgroups): checked once,
    by the controller when pytest-xdist runs workers (a worker ending early would see another's)."""
    if network_faults.available() is not None or hasattr(session.config, "workerinput"):
        return
    left = network_faults.leftovers()
    if left:
        print(f"\nnetwork faults left on the machine: {left}")
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
