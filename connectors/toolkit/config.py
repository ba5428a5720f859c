"""The connectors file: which vendors this deployment reaches, and how (``RUNONCE_CONNECTORS``,
else ``<home>/connectors.toml``, which ``runonce up`` writes for its sandboxes)::

    [vendors.payments]                     # runonce executor --vendor payments
    kind = "stripe"                        # shipped, or an entry point of the group runonce.connectors
    base_url = "https://api.stripe.com"
    api_key = { env = "STRIPE_API_KEY" }   # a secret: { env = "VAR" } or { file = "path" }
    # on every vendor, optional: tools = [...], timeout_s, ca_file, rate = { per_s, burst, in_flight }

Every error names the file, the vendor and the field (``vendors.payments.api_key: ...``) and
never a secret's value. A field no one reads is an error too: a misspelt ``api_kye`` must not
leave a vendor unauthenticated in silence.

A kind's factory reads its own fields through ``VendorFields`` (``text``, ``integer``,
``secret``, ``url``, ``choice``); the fields every vendor has are read here."""

from __future__ import annotations

import difflib
import ssl
import tomllib
from pathlib import Path
from typing import Mapping
from urllib.parse import urlsplit

from runonce.connectors.toolkit.fields import COMMON_FIELDS, REQUIRED, Default, Field, FieldType, Spec
from runonce.connectors.toolkit.secrets import Secret
from runonce.connectors.toolkit.tls import client_context, is_loopback
from runonce.connectors.toolkit.transport import VendorHttp
from runonce.errors import ConfigError
from runonce.rate import Rate, whole


class VendorFields:
    """One ``[vendors.NAME]`` table, read by its kind's factory; knows which fields were read."""

    def __init__(self, origin: str, name: str, table: Mapping[str, object], environ: Mapping[str, str]) -> None:
        self.origin = origin
        self.name = name
        self._table = table
        self._environ = environ
        self._read: set[str] = set(COMMON_FIELDS)
        self._spec: Spec | None = None
        self.kind = self.text("kind")
        self.timeout_s = self.number("timeout_s", 30.0)
        ca = self.text("ca_file", "")
        self.ca_file = Path(ca) if ca else None
        if self.ca_file is not None and not self.ca_file.is_file():
            raise self.error("ca_file", f"no such file: {ca}")
        self.rate = self._rate()
        self._tools = self._tool_list()

    def declare(self, spec: Spec) -> None:
        """The kind's fields (fields.py): a field of the table it does not declare is named now,
        with the declared one it looks like, before any required one is found missing; the
        getters take their defaults from it and refuse a field it does not declare."""
        self._spec = spec
        known = spec.names | COMMON_FIELDS
        unknown = sorted(set(self._table) - known)
        if unknown:
            near = difflib.get_close_matches(unknown[0], sorted(known - set(self._table)), n=1, cutoff=0.6)
            hint = f"; misspelt {near[0]!r}?" if near else f"; its fields: {', '.join(sorted(spec.names))}"
            raise self.error(unknown[0], f"unknown field for kind {self.kind!r}{hint}")

    def given(self, field: str) -> bool:
        """Whether the table has ``field`` (one of several ways to say one thing)."""
        self._read.add(field)
        return self._table.get(field) is not None

    def http(self, url: str) -> VendorHttp:
        """The vendor's one HTTP seam for ``url`` (read by ``url``): this vendor's ``timeout_s``
        and TLS (``tls``)."""
        return VendorHttp(url, timeout_s=self.timeout_s, tls=self.tls(url))

    def tls(self, url: str) -> ssl.SSLContext | None:
        """The TLS context for ``url``: verified (``ca_file`` or the system's CAs) for https,
        None for the plain http the URL checks allow to loopback only."""
        return client_context(self.ca_file) if url.startswith("https") else None

    def _default(self, field: str, given: Default, kind: FieldType) -> Default:
        """The default a getter uses: the declared one when a spec is declared (which must
        declare the field, with this type), else the caller's."""
        if self._spec is None or field in COMMON_FIELDS:
            return given
        declared = self._spec.get(field)
        if declared is None or declared.type is not kind:
            raise ConfigError(f"kind {self.kind!r} reads {field!r} as {kind.value}, which its field spec "
                              f"does not declare (connectors/toolkit/fields.py)")
        return given if given is not REQUIRED else declared.default

    def _declared(self, field: str) -> Field | None:
        """The field as the kind's spec declares it (None: no spec, or not declared)."""
        return self._spec.get(field) if self._spec is not None else None

    def _optional(self, field: str) -> bool:
        declared = self._declared(field)
        return declared is not None and declared.optional

    def error(self, field: str, message: str) -> ConfigError:
        return ConfigError(f"{self.origin}: vendors.{self.name}.{field}: {message}")

    def missing(self, field: str, how: str = "") -> ConfigError:
        """A required field that is absent, naming an unknown field that looks like its misspelling
        (``api_kye``): "unknown field" alone would come only after "is required"."""
        others = [k for k in self._table if k not in self._read and k != field]
        near = difflib.get_close_matches(field, others, n=1, cutoff=0.75)
        typo = f"; the table has {near[0]!r}: misspelt?" if near else ""
        return self.error(field, f"is required{': ' + how if how else ''}{typo}")

    def _get(self, field: str) -> object:
        self._read.add(field)
        return self._table.get(field)

    def text(self, field: str, default: str | None = None) -> str:
        return self._text(field, default, FieldType.TEXT)

    def _text(self, field: str, default: str | None, kind: FieldType) -> str:
        default = self._str_default(field, default, kind)
        value = self._get(field)
        if value is None:
            if default is None:
                raise self.missing(field)
            return default
        if not isinstance(value, str) or (not value and default is None):
            raise self.error(field, f"must be a non-empty string, got {type(value).__name__}")
        return value

    def number(self, field: str, default: float | None = None) -> float:
        declared = self._default(field, default, FieldType.NUMBER)
        assert isinstance(declared, (int, float)), f"{field}: a number needs a default"
        default = float(declared)
        value = self._get(field)
        if value is None:
            return default
        if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0:
            raise self.error(field, f"must be a positive number, got {value!r}")
        return float(value)

    def integer(self, field: str, default: int | None = None) -> int:
        declared = self._default(field, default, FieldType.INTEGER)
        assert isinstance(declared, int), f"{field}: an integer needs a default"
        default = declared
        value = whole(self._get(field))
        if value is None:
            return default
        if isinstance(value, bool) or not isinstance(value, int) or not 0 < value < 65536 * 1024:
            raise self.error(field, f"must be a positive integer, got {value!r}")
        return value

    def flag(self, field: str, default: bool | None = None) -> bool:
        declared = self._default(field, default, FieldType.FLAG)
        default = bool(declared)
        value = self._get(field)
        if value is None:
            return default
        if not isinstance(value, bool):
            raise self.error(field, f"must be true or false, got {value!r}")
        return value

    @property
    def environ(self) -> Mapping[str, str]:
        """The environment the file was read in (a kind that reads the pod's own, in-cluster)."""
        return self._environ

    def choice(self, field: str, options: tuple[str, ...] = (), default: str | None = None) -> str:
        declared_field = self._declared(field)
        options = options or (declared_field.options if declared_field is not None else ())
        default = self._str_default(field, default, FieldType.CHOICE)
        value = self._get(field)
        if value is None and default is None:
            raise self.missing(field)
        value = default if value is None else value
        if not isinstance(value, str) or value not in options:
            raise self.error(field, f"must be one of {', '.join(options)}, got {value!r}")
        return value

    def secret(self, field: str, plain_ok: bool = False) -> Secret:
        """A required secret: ``{ env = "VAR" }`` or ``{ file = "path" }``; a plain string is
        refused (it would sit in a file that is copied, diffed and pasted), unless ``plain_ok``
        (a user name; a declared field says so itself)."""
        found = self._secret(field, True, plain_ok)
        assert found is not None
        return found

    def optional_secret(self, field: str, plain_ok: bool = False) -> Secret | None:
        """A secret the table may leave out (one of two ways to authenticate): None then."""
        return self._secret(field, False, plain_ok)

    def _secret(self, field: str, required: bool, plain_ok: bool) -> Secret | None:
        self._default(field, REQUIRED, FieldType.SECRET)
        declared = self._declared(field)
        if declared is not None:
            if declared.optional == required:
                raise ConfigError(f"kind {self.kind!r} reads {field!r} as a {'required' if required else 'optional'} "
                                  f"secret; its field spec says otherwise (connectors/toolkit/fields.py)")
            plain_ok = plain_ok or declared.plain_ok
        value = self._get(field)
        if value is None:
            if required:
                raise self.missing(field, '{ env = "VAR" } or { file = "path" }')
            return None
        if plain_ok and isinstance(value, str) and value:
            return Secret(f"{field} in {self.origin}", value)
        if isinstance(value, dict) and not ({"env", "file"} & value.keys()):
            keys = ", ".join(repr(k) for k in sorted(value))
            raise self.error(field, f'a secret is {{ env = "VAR" }} or {{ file = "path" }}; this table has {keys}')
        if not isinstance(value, dict) or len(value) != 1:
            raise self.error(field, 'is a secret: write { env = "VAR" } or { file = "path" }, never the value')
        (how, where), = value.items()
        if not isinstance(where, str) or not where:
            raise self.error(field, f"{how} must name a variable or a file")
        if how == "env":
            resolved = self._environ.get(where)
            if not resolved:
                raise self.error(field, f"environment variable {where} is not set")
        else:
            try:
                resolved = Path(where).read_text(encoding="utf-8").strip()
            except OSError as exc:
                raise self.error(field, f"cannot read {where}: {exc.strerror}") from None
            if not resolved:
                raise self.error(field, f"{where} is empty")
        return Secret(f"{how}:{where}", resolved)

    def url(self, field: str, default: str | None = None) -> str:
        """An https URL; http only to this machine (a sandbox, a vendor's mock server)."""
        value = self._text(field, default, FieldType.URL).rstrip("/")
        parts = urlsplit(value)
        if parts.scheme not in ("https", "http") or not parts.hostname:
            raise self.error(field, f"must be an https:// URL, got {value!r}")
        if parts.scheme == "http" and not is_loopback(parts.hostname):
            raise self.error(field, f"plain http is refused except to loopback; use https:// ({value!r})")
        return value

    def tools(self, default: frozenset[str]) -> frozenset[str]:
        return self._tools if self._tools is not None else default

    def _str_default(self, field: str, given: str | None, kind: FieldType) -> str | None:
        default = self._default(field, given, kind)
        if default is None and self._optional(field):
            return ""
        assert default is None or isinstance(default, str), f"{field}: a text default"
        return default

    def tool_tables(self) -> dict[str, dict[str, object]]:
        """``[vendors.NAME.tools.TOOL]`` tables, for kinds whose tools are declared one by one
        (a ``postgres`` tool is a statement); empty when ``tools`` is a list or absent."""
        value = self._table.get("tools")
        self._tool_tables_read = True
        if not isinstance(value, dict):
            return {}
        return {tool: dict(table) for tool, table in value.items()}

    def unknown(self) -> list[str]:
        unread = set(self._table) - self._read
        if isinstance(self._table.get("tools"), dict) and not self._tool_tables_read:
            unread.add("tools")  # a table of tools given to a kind that takes a list
        return sorted(unread)

    def _tool_list(self) -> frozenset[str] | None:
        value = self._table.get("tools")
        self._tool_tables_read = False
        if value is None:
            return None
        if isinstance(value, dict) and value and all(isinstance(t, dict) for t in value.values()):
            return frozenset(value)
        if not isinstance(value, list) or not value or not all(isinstance(t, str) and t for t in value):
            raise self.error("tools", "must be a non-empty list of tool names (or, for a kind that declares "
                                      "each tool, a [vendors.NAME.tools.TOOL] table each)")
        return frozenset(value)

    def _rate(self) -> Rate | None:
        value = self._table.get("rate")
        if value is None:
            return None
        if not isinstance(value, dict):
            raise self.error("rate", "must be a table: { per_s = 50, burst = 1, in_flight = 32 }")
        return Rate.of(value, lambda field, message: self.error(f"rate.{field}", message))


def read_tables(path: Path) -> dict[str, dict[str, object]]:
    """Each ``[vendors.NAME]`` table of the file, unchecked: a mistake here is the whole file's."""
    origin = str(path)
    try:
        doc = tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ConfigError(f"no connectors file at {path}: set RUNONCE_CONNECTORS, or run `runonce up`, "
                          f"which writes one for its sandboxes (docs/vendors.md)") from None
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise ConfigError(f"{origin}: {exc}") from exc
    extra = sorted(set(doc) - {"vendors"})
    if extra:
        raise ConfigError(f"{origin}: unknown table {extra[0]!r}; vendors are [vendors.NAME]")
    tables = doc.get("vendors")
    if not isinstance(tables, dict) or not tables:
        raise ConfigError(f"{origin}: no [vendors.NAME] table")
    for name, table in tables.items():
        if not isinstance(table, dict):
            raise ConfigError(f"{origin}: vendors.{name} must be a table")
    return tables


def read_vendors(path: Path, environ: Mapping[str, str]) -> dict[str, VendorFields]:
    """Every vendor of the file, its common fields checked; kinds are read by the registry."""
    return {name: VendorFields(str(path), name, table, environ) for name, table in read_tables(path).items()}
