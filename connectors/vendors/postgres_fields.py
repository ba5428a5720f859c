"""The ``postgres`` kind's fields, apart from its connector: declared (and documented) without
psycopg, which only the ``postgres`` extra installs."""

from __future__ import annotations

from runonce.connectors.toolkit.fields import Field, FieldType, Spec

#: where the markers go, unless the vendor's table names another
MARKER_TABLE = "runonce_actions"

FIELDS = Spec("postgres", (
    Field("dsn", FieldType.SECRET, "libpq's DSN, `host=... dbname=... user=...` or `postgresql://...`; off "
                                   "this machine with `sslmode=verify-full`"),
    Field("marker_table", FieldType.TEXT, "the table of runonce's markers (`schema.table` allowed), created if "
                                          "missing", MARKER_TABLE),
))
