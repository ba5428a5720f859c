"""The local broker's lifecycle, on a broker of its own (not the session's)."""

from __future__ import annotations

import os
import signal
import time

import pytest

from runonce.kafka.broker import Broker, BrokerState, _pid_alive
from runonce.settings import Settings

pytestmark = pytest.mark.broker


def test_start_twice_stop_status_and_crash(base_settings: Settings, tmp_path) -> None:
    settings = base_settings.with_(home=tmp_path / "lifecycle", broker_heap_mb=256)
    broker = Broker(settings)
    assert broker.status().state is BrokerState.STOPPED
    try:
        first = broker.start()
        assert first.state is BrokerState.RUNNING and first.bootstrap
        assert settings.bootstrap_file.read_text().strip() == first.bootstrap  # where clients find it
        again = broker.start()
        assert again.pid == first.pid  # starting twice does not start a second broker
        assert broker.status().state is BrokerState.RUNNING

        stopped = broker.stop()
        assert stopped.state is BrokerState.STOPPED and not _pid_alive(first.pid)

        restarted = broker.start()
        assert restarted.bootstrap == first.bootstrap  # same ports when free: clients keep their address
        os.kill(restarted.pid, signal.SIGKILL)
        deadline = time.monotonic() + 10
        while _pid_alive(restarted.pid) and time.monotonic() < deadline:
            time.sleep(0.1)
        crashed = broker.status()
        assert crashed.state is BrokerState.CRASHED  # told apart from a clean stop
        assert "crashed" in crashed.describe() and "broker.log" in crashed.describe()
    finally:
        final = broker.stop()
    assert final.state is BrokerState.STOPPED
