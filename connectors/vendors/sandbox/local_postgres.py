"""A real PostgreSQL for tests and demos: Debian's ``postgresql`` package (``scripts/setup.sh``
installs it), a cluster made by ``initdb`` in a folder of the caller's, started by ``pg_ctl`` on
a free loopback port with password (SCRAM) authentication, and stopped whatever happens. Given
another address (``host``: the pods' bridge, for scripts/cluster.py), it listens there too and
takes connections from off the machine over TLS alone (its own CA; ``dsn`` then says
``sslmode=verify-full`` and ``ca_file`` is the CA), as runonce's postgres connector asks.

PostgreSQL refuses to run as root; as root the cluster belongs to the ``postgres`` user the
Debian package creates, and its programs run as that user (``runuser``)."""

from __future__ import annotations

import glob
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

from runonce.connectors.toolkit.tls import is_loopback
from runonce.devbroker.broker import free_ports

USER = "runonce"
DATABASE = "runonce"


def pg_bin(program: str) -> str:
    """A PostgreSQL server program: Debian keeps them in /usr/lib/postgresql/<major>/bin."""
    found = sorted(glob.glob(f"/usr/lib/postgresql/*/bin/{program}"), key=lambda p: int(p.split("/")[4]))
    if found:
        return found[-1]
    on_path = shutil.which(program)
    if on_path is None:
        raise AssertionError(f"{program} is missing: bash scripts/setup.sh installs Debian's postgresql package")
    return on_path


class LocalPostgres:
    """One cluster in ``folder``; ``dsn`` reaches its database ``runonce`` as user ``runonce``."""

    def __init__(self, folder: Path, host: str = "127.0.0.1") -> None:
        self._as_root = os.geteuid() == 0
        if self._as_root:  # the caller's folder may sit under one the postgres user cannot enter (0700)
            folder = Path(tempfile.mkdtemp(prefix="runonce-pg-"))
            shutil.chown(folder, "postgres", "postgres")
        self.folder = folder
        self.data = folder / "data"
        self.port = free_ports(1)[0]
        self.password = os.urandom(12).hex()
        self.host = host
        #: the CA of the server's certificate when it listens off loopback, else None
        self.ca_file: Path | None = None if is_loopback(host) else folder / "ca.pem"
        tls = "sslmode=disable" if self.ca_file is None else f"sslmode=verify-full sslrootcert={self.ca_file}"
        self.dsn = (f"host={host} port={self.port} dbname={DATABASE} user={USER} "
                    f"password={self.password} {tls} connect_timeout=5")

    def _run(self, argv: list[str]) -> str:
        if self._as_root:
            argv = ["runuser", "-u", "postgres", "--", *argv]
        done = subprocess.run(argv, capture_output=True, text=True, timeout=120)
        if done.returncode != 0:
            raise AssertionError(f"{' '.join(argv)} exited {done.returncode}:\n{done.stdout}\n{done.stderr}")
        return done.stdout

    def start(self) -> LocalPostgres:
        self.folder.mkdir(parents=True, exist_ok=True)
        shutil.rmtree(self.data, ignore_errors=True)  # a cluster of an earlier run, ours: made anew
        pwfile = self.folder / "pw"
        pwfile.write_text(self.password + "\n")
        if self._as_root:
            shutil.chown(pwfile, "postgres", "postgres")
        self._run([pg_bin("initdb"), "-D", str(self.data), "-U", USER, "--pwfile", str(pwfile),
                   "--auth=scram-sha-256", "-E", "UTF8", "--no-sync"])
        pwfile.unlink()
        with open(self.data / "postgresql.conf", "a", encoding="utf-8") as conf:  # initdb -c is 16+
            conf.write(f"listen_addresses = '{', '.join(dict.fromkeys(['127.0.0.1', self.host]))}'\n"
                       f"port = {self.port}\nunix_socket_directories = '{self.folder}'\nmax_connections = 60\n")
            if self.ca_file is not None:
                conf.write(self._tls())
        self._run([pg_bin("pg_ctl"), "-D", str(self.data), "-l", str(self.folder / "postgres.log"), "-w", "-t", "60",
                   "start"])
        self._createdb()
        return self

    def _tls(self) -> str:
        """A certificate for ``host`` from a CA of its own, and connections from off loopback over
        TLS alone (``hostssl``: initdb's own lines take loopback only, so a plaintext connection
        from elsewhere matches no line and is refused)."""
        import trustme

        assert self.ca_file is not None
        ca = trustme.CA()
        ca.cert_pem.write_to_path(str(self.ca_file))
        if self._as_root:
            os.chmod(self.folder, 0o755)  # the CA is public; the key below is the postgres user's alone
        served = ca.issue_cert(self.host)
        served.cert_chain_pems[0].write_to_path(str(self.data / "server.crt"))
        served.private_key_pem.write_to_path(str(self.data / "server.key"))
        os.chmod(self.data / "server.key", 0o600)
        if self._as_root:
            for name in ("server.crt", "server.key"):
                shutil.chown(self.data / name, "postgres", "postgres")
        hba = self.data / "pg_hba.conf"
        hba.write_text(hba.read_text() + "hostssl all all 0.0.0.0/0 scram-sha-256\n")
        return "ssl = on\nssl_cert_file = 'server.crt'\nssl_key_file = 'server.key'\n"

    def _createdb(self) -> None:
        import psycopg

        with psycopg.connect(self.dsn.replace(f"dbname={DATABASE}", "dbname=postgres"), autocommit=True) as conn:
            conn.execute(f"CREATE DATABASE {DATABASE}")

    def stop(self) -> None:
        if (self.data / "postmaster.pid").exists():
            self._run([pg_bin("pg_ctl"), "-D", str(self.data), "-m", "immediate", "-w", "stop"])
        if self._as_root:
            shutil.rmtree(self.folder, ignore_errors=True)

    def log_tail(self, n: int = 3000) -> str:
        path = self.folder / "postgres.log"
        return path.read_text(errors="replace")[-n:] if path.exists() else ""
