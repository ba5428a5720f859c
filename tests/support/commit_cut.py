"""A TCP proxy in front of a real PostgreSQL that cuts the client's connection at its next
``COMMIT``: ``before`` the server sees it (the server rolls the transaction back), or ``after``
the server answered it (committed; the client never hears so). What a lost network does at
the worst moment, made to happen on purpose. ``cuts`` counts the cuts, so a test can say its
fault applied."""

from __future__ import annotations

import socket
import threading

#: the simple-query message psycopg sends to end a transaction block
COMMIT = b"Q\x00\x00\x00\x0bCOMMIT\x00"


class CommitCut:
    def __init__(self, upstream_port: int) -> None:
        self.upstream_port = upstream_port
        self.server = socket.create_server(("127.0.0.1", 0))
        self.port = self.server.getsockname()[1]
        self.mode: str | None = None
        self.cuts = 0
        self._lock = threading.Lock()
        threading.Thread(target=self._accept, daemon=True).start()

    def arm(self, mode: str) -> None:
        """Cut at the next COMMIT any client sends: ``before`` or ``after`` the server has it."""
        assert mode in ("before", "after")
        self.mode = mode

    def _take(self) -> str | None:
        with self._lock:
            mode, self.mode = self.mode, None
            if mode is not None:
                self.cuts += 1
            return mode

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.server.accept()
            except OSError:
                return
            upstream = socket.create_connection(("127.0.0.1", self.upstream_port))
            #: set while cutting: the server's answer to the COMMIT is swallowed, then signalled
            swallow, answered = threading.Event(), threading.Event()
            threading.Thread(target=self._client_to_server, args=(client, upstream, swallow, answered),
                             daemon=True).start()
            threading.Thread(target=self._pump, args=(upstream, client, swallow, answered), daemon=True).start()

    def _client_to_server(self, client: socket.socket, upstream: socket.socket, swallow: threading.Event,
                          answered: threading.Event) -> None:
        try:
            while chunk := client.recv(65536):
                if COMMIT in chunk and self.mode is not None:
                    mode = self._take()
                    if mode == "after":
                        swallow.set()
                        upstream.sendall(chunk)
                        answered.wait(10)  # the server's CommandComplete: it committed
                    return  # finally: both sides shut down (a close alone would not wake the other pump)
                upstream.sendall(chunk)
        except OSError:
            pass
        finally:
            for s in (client, upstream):
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
                s.close()

    def _pump(self, src: socket.socket, dst: socket.socket, swallow: threading.Event,
              answered: threading.Event) -> None:
        try:
            while chunk := src.recv(65536):
                if swallow.is_set():
                    answered.set()
                    return
                dst.sendall(chunk)
        except OSError:
            pass

    def close(self) -> None:
        self.server.close()
