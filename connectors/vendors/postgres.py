"""A write to your own PostgreSQL database, exactly once: the operator's statement and a marker
of the action commit in one transaction, or neither does. Kind ``postgres``::

    [vendors.orders_db]
    kind = "postgres"
    dsn = { env = "ORDERS_DSN" }            # a libpq conninfo or URI; TLS verified off this machine
    [vendors.orders_db.tools.issue_refund]
    sql = "INSERT INTO refunds (order_id, amount_cents) VALUES (%(order_id)s, %(amount_cents)s) RETURNING id"

Each tool is one statement with named parameters. An agent sends only their values: a
parameter the statement does not name, or one it names and the action lacks, is refused (failed,
never retried). A value the statement returns is the action's ``vendor_ref``.

One action is one transaction (``perform``):

1. look    the marker of this action id, or of another action with its vendor key: if one
           exists the effect committed before, and its stored result is the answer
2. effect  the operator's statement
3. marker  a row of ``runonce_actions`` (action id primary key, vendor key unique)
4. commit  both, or neither

Why step 1 is in the same transaction as the effect: a redelivered action (a crash after the
commit, before the executor's Kafka commit) is performed again, and finds its marker. Two
processes performing one action at once (a zombie and the partition's new owner) both pass step
1; the second's marker insert waits on the first's unique key, then fails, and its transaction,
statement included, rolls back: it answers with the first's marker.

What an error means:

    connection refused, lost before COMMIT was sent    not performed (the server rolls back an
                                                       open transaction): retried
    the server's error before or at COMMIT             not performed: a constraint violated by
                                                       the statement, bad data or SQL is failed;
                                                       a deadlock or serialization failure retried
    the connection lost during COMMIT                  unknown, resolved by performing again: step
                                                       1 finds the marker if it committed. Never
                                                       "not performed" on a guess.

Hence ``Capability.ATOMIC``: the outcome is never in doubt while the database answers.

The marker table is bounded: ``prune`` removes markers older than the longest key window (an
idle executor runs it every ``upkeep.PRUNE_EVERY_S``, 10 minutes); after that window the
stream job has forgotten the key too. Why psycopg 3: PostgreSQL's maintained Python driver; its binary wheel carries libpq.
"""

from __future__ import annotations

import dataclasses
import logging
import re
import threading
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

import psycopg
from psycopg import errors as pg_errors
from psycopg import sql as pg_sql
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from runonce.connectors.toolkit.base import ActionCall, Capability, VendorResponse
from runonce.connectors.toolkit.config import VendorFields
from runonce.connectors.toolkit.errors import OutcomeUnknown, PermanentVendorError, TransientVendorError
from runonce.connectors.toolkit.secrets import Secret
from runonce.connectors.toolkit.tls import is_loopback
from runonce.connectors.vendors.postgres_fields import MARKER_TABLE
from runonce.telemetry import vendor as vendor_spans

log = logging.getLogger("runonce.connectors.vendors.postgres")

_PARAM = re.compile(r"%\((\w+)\)s")
_IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)?$")
_VERIFIED = ("verify-ca", "verify-full")


@dataclass(frozen=True, slots=True)
class Statement:
    """One tool: the operator's SQL and the parameters it names."""

    tool: str
    sql: str
    names: frozenset[str]

    @classmethod
    def parse(cls, tool: str, sql: str) -> Statement:
        # A %s, or a % not part of %(name)s or %%, would take values by position: refused, so
        # what an agent sends binds by name only.
        rest = _PARAM.sub("", sql).replace("%%", "")
        if "%" in rest:
            raise ValueError("takes named parameters only: %(name)s (write %% for a literal %)")
        return cls(tool, sql, frozenset(_PARAM.findall(sql)))

    def bind(self, call: ActionCall) -> dict[str, Any]:
        given = set(call.params)
        missing, extra = sorted(self.names - given), sorted(given - self.names)
        if missing or extra:
            said = [f"missing {', '.join(missing)}" if missing else "", f"unknown {', '.join(extra)}" if extra else ""]
            raise PermanentVendorError(f"{call.tool}: its statement takes exactly {', '.join(sorted(self.names))}; "
                                       f"{'; '.join(s for s in said if s)}")
        return {name: call.params[name] for name in self.names}


@dataclass(frozen=True, slots=True)
class Marker:
    """The SQL of the marker table, for one table name (a schema may prefix it)."""

    table: str

    def _name(self) -> pg_sql.Composable:
        return pg_sql.SQL(".").join(pg_sql.Identifier(part) for part in self.table.split("."))

    def create(self) -> pg_sql.Composed:
        name = self._name()
        index = pg_sql.Identifier(self.table.replace(".", "_") + "_done_at")
        return pg_sql.SQL(
            "CREATE TABLE IF NOT EXISTS {} (action_id text PRIMARY KEY, vendor_key text NOT NULL UNIQUE, "
            "tool text NOT NULL, vendor_ref text NOT NULL, done_at timestamptz NOT NULL DEFAULT now()); "
            "CREATE INDEX IF NOT EXISTS {} ON {} (done_at)").format(name, index, name)

    def find(self) -> pg_sql.Composed:
        return pg_sql.SQL("SELECT action_id, vendor_ref FROM {} WHERE action_id = %(action_id)s "
                          "OR vendor_key = %(vendor_key)s ORDER BY done_at LIMIT 1").format(self._name())

    def insert(self) -> pg_sql.Composed:
        return pg_sql.SQL("INSERT INTO {} (action_id, vendor_key, tool, vendor_ref) "
                          "VALUES (%(action_id)s, %(vendor_key)s, %(tool)s, %(vendor_ref)s)").format(self._name())

    def prune(self) -> pg_sql.Composed:
        return pg_sql.SQL("DELETE FROM {} WHERE done_at < now() - %(older_than_ms)s * interval '1 millisecond'"
                          ).format(self._name())


def _connection_lost(exc: psycopg.Error) -> bool:
    """No answer from the server (a server's error always carries a SQLSTATE)."""
    return isinstance(exc, psycopg.OperationalError) and exc.sqlstate is None


@dataclass
class PostgresConnector:
    name: str
    dsn: Secret
    statements: Mapping[str, Statement]
    marker: Marker = Marker(MARKER_TABLE)
    timeout_s: float = 30.0
    #: crash tests' hook (``hooked``): called after the statement and the marker, before COMMIT
    before_commit: Callable[[ActionCall], None] | None = None
    capability = Capability.ATOMIC
    tools: frozenset[str] = field(init=False)
    _local: threading.local = field(default_factory=threading.local, repr=False)
    _created: bool = field(default=False, repr=False)

    def __post_init__(self) -> None:
        self.tools = frozenset(self.statements)

    def hooked(self, before_commit: Callable[[ActionCall], None]) -> PostgresConnector:
        """This connector, calling ``before_commit`` inside each transaction just before COMMIT
        (a CommitHook: the ``before_vendor_commit`` failpoint kills there). The copy takes over this
        one's connections: the executor calls only the copy."""
        return dataclasses.replace(self, before_commit=before_commit)

    def _said(self, exc: psycopg.Error) -> str:
        """libpq's message, the DSN's password taken out: a connection error may quote an option
        the DSN misplaced it into (a check at load refuses the DSNs known to do that)."""
        password = str(conninfo_to_dict(self.dsn.reveal()).get("password") or "")
        text = str(exc)
        return text.replace(password, "***") if password else text

    # -- connections: one per calling thread (the executor calls up to in_flight at once) --
    def _connect(self) -> psycopg.Connection[Any]:
        conn: psycopg.Connection[Any] | None = getattr(self._local, "conn", None)
        if conn is not None and not conn.closed:
            return conn
        try:
            # autocommit: every transaction is an explicit ``transaction()`` block, none lingers
            conn = psycopg.connect(self.dsn.reveal(), autocommit=True, connect_timeout=max(1, int(self.timeout_s)),
                                   application_name=f"runonce-{self.name}")
            if not self._created:
                self._create_marker_table(conn)
        except psycopg.Error as exc:
            raise TransientVendorError(f"{self.name}: cannot connect: {type(exc).__name__}: {self._said(exc)}") from exc
        self._local.conn = conn
        return conn

    def _create_marker_table(self, conn: psycopg.Connection[Any]) -> None:
        try:
            with conn.transaction():
                conn.execute(self.marker.create())
        except pg_errors.UniqueViolation:  # two executors creating it at once: one did
            pass
        self._created = True

    def _drop(self) -> None:
        conn = getattr(self._local, "conn", None)
        self._local.conn = None
        if conn is not None:
            conn.close()

    # -- the protocol --------------------------------------------------------------------
    def perform(self, call: ActionCall) -> VendorResponse:
        statement = self.statements.get(call.tool)
        if statement is None:
            raise PermanentVendorError(f"{self.name} has no statement for tool {call.tool!r}")
        params = statement.bind(call)
        conn = self._connect()
        with vendor_spans.database("postgresql", conn.info.host, conn.info.port, conn.info.dbname):
            return self._transaction(conn, call, statement, params)

    def _transaction(self, conn: psycopg.Connection[Any], call: ActionCall, statement: Statement,
                     params: Mapping[str, Any]) -> VendorResponse:
        """Look for the marker, perform, write the marker, COMMIT: one transaction."""
        ids = {"action_id": call.action_id, "vendor_key": call.vendor_key}
        committing = False
        try:
            with conn.transaction():
                with conn.cursor() as cur:
                    done = self._found(cur.execute(self.marker.find(), ids).fetchone(), call)  # 1. look
                    if done is not None:
                        return done
                    cur.execute(statement.sql, params)  # 2. effect
                    returned = cur.fetchone() if cur.description else None
                    ref = "" if not returned or returned[0] is None else str(returned[0])
                    cur.execute(self.marker.insert(), {**ids, "tool": call.tool, "vendor_ref": ref})  # 3. marker
                    if self.before_commit is not None:
                        self.before_commit(call)
                    committing = True
                # 4. COMMIT, on leaving the block
            return VendorResponse(ref, f"{statement.tool}: committed with its marker")
        except pg_errors.UniqueViolation as exc:
            if exc.diag.table_name == self.marker.table.rpartition(".")[2]:
                # Another process committed this action (or its key) while we performed it: our
                # transaction, statement included, rolled back; its marker is the answer.
                found = self.find_marker(call)
                if found is not None:
                    return found
                raise TransientVendorError(f"{self.name}: marker conflict, marker not yet visible") from exc
            raise PermanentVendorError(f"{call.tool}: {exc.diag.message_primary or exc}") from exc
        except psycopg.Error as exc:
            if _connection_lost(exc):
                self._drop()
                if committing:
                    raise OutcomeUnknown(f"{self.name}: connection lost during COMMIT: the marker decides "
                                         f"({self._said(exc)})") from exc
                raise TransientVendorError(f"{self.name}: connection lost before COMMIT ({self._said(exc)})") from exc
            if isinstance(exc, (pg_errors.SerializationFailure, pg_errors.DeadlockDetected,
                                pg_errors.LockNotAvailable, pg_errors.AdminShutdown)):
                raise TransientVendorError(f"{self.name}: {exc.sqlstate}: {self._said(exc)}") from exc
            if isinstance(exc, psycopg.OperationalError):
                self._drop()
                raise TransientVendorError(f"{self.name}: {exc.sqlstate}: {self._said(exc)}") from exc
            raise PermanentVendorError(f"{call.tool}: {exc.sqlstate}: "
                                       f"{exc.diag.message_primary or exc}") from exc

    def _found(self, row: tuple[Any, ...] | None, call: ActionCall) -> VendorResponse | None:
        if row is None:
            return None
        first, ref = row
        if first == call.action_id:
            return VendorResponse(ref, "found its marker: committed before")
        return VendorResponse(ref, f"not executed: its vendor key was used by action {first}")

    def find_marker(self, call: ActionCall) -> VendorResponse | None:
        """The marker of this action (or of its vendor key), read in a transaction of its own."""
        conn = self._connect()
        try:
            with conn.transaction():
                row = conn.execute(self.marker.find(), {"action_id": call.action_id,
                                                        "vendor_key": call.vendor_key}).fetchone()
        except psycopg.Error as exc:
            self._drop()
            raise TransientVendorError(f"{self.name}: marker lookup failed: {self._said(exc)}") from exc
        return self._found(row, call)

    def prune(self, older_than_ms: int) -> int:
        """Remove markers older than ``older_than_ms``; how many were removed."""
        conn = self._connect()
        try:
            with conn.transaction():
                removed = conn.execute(self.marker.prune(), {"older_than_ms": older_than_ms}).rowcount
        except psycopg.Error as exc:
            self._drop()
            raise TransientVendorError(f"{self.name}: pruning markers failed: {self._said(exc)}") from exc
        log.info("%s: removed %d markers older than %d ms", self.name, removed, older_than_ms)
        return removed

    def probe(self) -> str:
        conn = self._connect()
        version = conn.execute("SHOW server_version").fetchone()
        return f"PostgreSQL {version[0] if version else '?'}; marker table {self.marker.table} ready"


#: libpq's parse messages quote the text around the mistake, which in a DSN is often the
#: password: none of them is passed on, only what to check
_UNPARSEABLE = ("is not a libpq connection string or URI (libpq's own message is not shown: it quotes the "
                "secret): quote a value holding a space as password='a b', or percent-encode it in a URI")


def _check_dsn(fields: VendorFields, dsn: Secret) -> None:
    """A DSN libpq reads as meant, and TLS off this machine, verified: sslmode verify-ca or
    verify-full (ca_file is its root). No message quotes a part of the DSN: a DSN libpq misreads
    puts pieces of its password in the host, port or database name."""
    text = dsn.reveal()
    try:
        parts = conninfo_to_dict(text)
    except psycopg.ProgrammingError:
        raise fields.error("dsn", _UNPARSEABLE) from None
    scheme, sep, rest = text.partition("://")
    if sep and scheme in ("postgres", "postgresql"):
        authority = rest.split("?", 1)[0]
        if authority.count("@") > 1 or ("@" in authority and "/" in authority.rpartition("@")[0]):
            # libpq splits postgresql://u:pa@ss@host at the first @ (host "ss@host") and
            # postgresql://u:pa/ss@host at the / (host "u", port "pa")
            raise fields.error("dsn", "a URI whose user or password holds a raw @ or /: percent-encode them "
                                      "(%40, %2F), or write the DSN as key=value pairs")
    for port in str(parts.get("port") or "5432").split(","):
        if port and not port.isdigit():
            raise fields.error("dsn", "has a port that is not a number (the value is not shown: a misread "
                                      "password may stand there): check the DSN's quoting")
    hosts = str(parts.get("host") or "localhost").split(",")
    remote = [h for h in hosts if h and not h.startswith("/") and not is_loopback(h)]
    if remote and parts.get("sslmode") not in _VERIFIED:
        raise fields.error("dsn", "reaches a host off this machine: set sslmode=verify-full (and ca_file if its CA "
                                  "is not the system's)")


def from_config(fields: VendorFields) -> PostgresConnector:
    dsn = fields.secret("dsn")
    _check_dsn(fields, dsn)
    if fields.ca_file is not None:
        dsn = Secret(dsn.source, make_conninfo(dsn.reveal(), sslrootcert=str(fields.ca_file)))
    table = fields.text("marker_table")
    if not _IDENTIFIER.match(table):
        raise fields.error("marker_table", f"must be a table name (schema.table allowed), got {table!r}")
    tables = fields.tool_tables()
    if not tables:
        raise fields.error("tools", "a postgres vendor declares each tool: [vendors.NAME.tools.TOOL] sql = \"...\"")
    statements = {}
    for tool, table_fields in tables.items():
        extra = sorted(set(table_fields) - {"sql"})
        if extra:
            raise fields.error(f"tools.{tool}.{extra[0]}", "unknown field; a tool has only sql")
        text = table_fields.get("sql")
        if not isinstance(text, str) or not text.strip():
            raise fields.error(f"tools.{tool}.sql", "is required: one statement with %(name)s parameters")
        try:
            statements[tool] = Statement.parse(tool, text)
        except ValueError as exc:
            raise fields.error(f"tools.{tool}.sql", str(exc)) from None
    return PostgresConnector(fields.name, dsn, statements, Marker(table), fields.timeout_s)
