"""TCP proxies on loopback for tests: a load balancer without affinity in front of several
replicas, a link that can be cut in the middle of one request, and a link with latency
(``Delayed``).

``RoundRobin`` hands each new connection to the next target in turn, as a Kubernetes Service
(kube-proxy's iptables mode picks per connection) does with no session affinity. ``cut_next``
arms one fault: the next connection whose request bytes hold a marker is closed, both ways,
``after_s`` after that request went upstream: the agent never sees the answer, the replica
keeps working on what it was given. This is MCP 2026-07-28's lost response stream (its SSE
resumability is gone: the client must issue the call again, with a new request id).

Only loopback: the proxy listens on 127.0.0.1 and its targets are the test's own processes."""

from __future__ import annotations

import queue
import random
import socket
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Iterable, Iterator

Target = tuple[str, int]


@dataclass
class _Cut:
    marker: bytes
    after_s: float


@dataclass
class RoundRobin:
    targets: list[Target]
    #: connections handed to each target, in order of arrival
    served: Counter[Target] = field(default_factory=Counter)
    #: connections cut by an armed fault
    cuts: int = 0
    _listener: socket.socket | None = None
    _next: int = 0
    _armed: _Cut | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _open: set[socket.socket] = field(default_factory=set)

    def __post_init__(self) -> None:
        _loopback_only(host for host, _ in self.targets)

    @property
    def port(self) -> int:
        assert self._listener is not None, "start() first"
        return int(self._listener.getsockname()[1])

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> RoundRobin:
        self._listener = socket.create_server(("127.0.0.1", 0))
        threading.Thread(target=self._accept, name="proxy-accept", daemon=True).start()
        return self

    def stop(self) -> None:
        _shut(self._listener, self._lock, self._open)

    def cut_next(self, marker: bytes, after_s: float) -> None:
        """Cut the next connection whose request holds ``marker``, ``after_s`` after it went upstream."""
        with self._lock:
            self._armed = _Cut(marker, after_s)

    # -- inside ------------------------------------------------------------------------
    def _accept(self) -> None:
        assert self._listener is not None
        for client in _accepted(self._listener):
            with self._lock:
                target = self.targets[self._next % len(self.targets)]
                self._next += 1
                self.served[target] += 1
            try:
                upstream = socket.create_connection(target, timeout=5)
            except OSError:
                _close(client)  # a replica that is down: the caller sees a reset, as behind a real balancer
                continue
            upstream.settimeout(None)
            with self._lock:
                self._open.update((client, upstream))
            threading.Thread(target=self._pump, args=(client, upstream, True), daemon=True).start()
            threading.Thread(target=self._pump, args=(upstream, client, False), daemon=True).start()

    def _pump(self, source: socket.socket, sink: socket.socket, requests: bool) -> None:
        try:
            while True:
                chunk = source.recv(65536)
                if not chunk:
                    break
                sink.sendall(chunk)
                if requests:
                    self._maybe_cut(chunk, source, sink)
        except OSError:
            pass
        finally:
            _close(source)
            _close(sink)
            with self._lock:
                self._open.discard(source)
                self._open.discard(sink)

    def _maybe_cut(self, chunk: bytes, client: socket.socket, upstream: socket.socket) -> None:
        with self._lock:
            armed = self._armed
            if armed is None or armed.marker not in chunk:
                return
            self._armed = None
            self.cuts += 1

        def cut() -> None:
            time.sleep(armed.after_s)
            _close(client)
            _close(upstream)

        threading.Thread(target=cut, name="proxy-cut", daemon=True).start()


def _accepted(listener: socket.socket) -> Iterator[socket.socket]:
    """Each connection accepted, until the listener is closed (``stop``)."""
    while True:
        try:
            client, _ = listener.accept()
        except OSError:
            return
        yield client


def _loopback_only(hosts: Iterable[str]) -> None:
    for host in hosts:
        if host not in ("127.0.0.1", "localhost", "::1"):
            raise ValueError(f"the proxy forwards to loopback only, not {host}")


def _shut(listener: socket.socket | None, lock: threading.Lock, open_: set[socket.socket]) -> None:
    """No new connections, and every open one closed both ways."""
    if listener is not None:
        listener.close()
    with lock:
        for s in list(open_):
            _close(s)
        open_.clear()


def _close(s: socket.socket) -> None:
    try:
        s.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass
    s.close()


@dataclass
class Delayed:
    """A link with latency: every chunk each way is held ``delay_ms`` ± ``jitter_ms`` (uniform)
    before it is passed on, in order (a later chunk never overtakes an earlier one, as on one
    TCP connection). Set the delay at any time; 0 passes at once. For a broker, listen on the
    port it advertises (``advertised.listeners``) so that every client's connection crosses it.
    What ``tc netem delay`` would do, on a machine whose kernel has no netem."""

    target: Target
    port: int = 0
    delay_ms: float = 0.0
    jitter_ms: float = 0.0
    #: connections passed on so far
    connections: int = 0
    _listener: socket.socket | None = None
    _open: set[socket.socket] = field(default_factory=set)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def __post_init__(self) -> None:
        _loopback_only([self.target[0]])

    def start(self) -> Delayed:
        self._listener = socket.create_server(("127.0.0.1", self.port))
        self.port = int(self._listener.getsockname()[1])
        threading.Thread(target=self._accept, name="delayed-accept", daemon=True).start()
        return self

    def stop(self) -> None:
        _shut(self._listener, self._lock, self._open)

    def _hold_s(self) -> float:
        return max(0.0, self.delay_ms + random.uniform(-self.jitter_ms, self.jitter_ms)) / 1000

    def _accept(self) -> None:
        assert self._listener is not None
        for client in _accepted(self._listener):
            try:
                upstream = socket.create_connection(self.target, timeout=5)
            except OSError:
                _close(client)
                continue
            upstream.settimeout(None)
            for s in (client, upstream):
                s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            with self._lock:
                self._open.update((client, upstream))
                self.connections += 1
            for source, sink in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pump, args=(source, sink), daemon=True).start()

    def _pump(self, source: socket.socket, sink: socket.socket) -> None:
        """Read as it comes; a second thread sends each chunk when its time is due."""
        due: queue.Queue[tuple[float, bytes] | None] = queue.Queue()

        def send() -> None:
            try:
                while (item := due.get()) is not None:
                    at, chunk = item
                    wait = at - time.monotonic()
                    if wait > 0:
                        time.sleep(wait)
                    sink.sendall(chunk)
            except OSError:
                pass
            finally:
                _close(sink)
                _close(source)

        threading.Thread(target=send, daemon=True).start()
        last = 0.0
        try:
            while chunk := source.recv(65536):
                last = max(last, time.monotonic() + self._hold_s())  # in order: never before the one before
                due.put((last, chunk))
        except OSError:
            pass
        finally:
            due.put(None)
            with self._lock:
                self._open.discard(source)
