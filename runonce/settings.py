"""One frozen settings object, built once at the entry point and passed down.

Nothing else in runonce reads the environment: ``Settings.from_env`` is called by
the CLI (and by test fixtures), and everything below takes a ``Settings``.

Each setting is declared once, below: its field, its type, its default, and in ``setting(...)``
its ``RUNONCE_*`` variable, its bounds, the processes that read it and what it is for.
``from_env`` reads and ``validate`` checks every declared one from that declaration, and
docs/operating.md's table of settings is written from ``settings_table()`` (runonce/ops/generated.py).
"""

from __future__ import annotations

import enum
import os
from dataclasses import MISSING, dataclass, field, fields, replace
from pathlib import Path
from typing import Any, Callable, Mapping

from runonce import rate
from runonce.errors import ConfigError
from runonce.executor_failpoint import parse_failpoint
from runonce.kafka import client_config
from runonce.kafka.access import MECHANISMS, KafkaAccess
from runonce.kafka.client_config import ClientConfig
from runonce.kafka.process import GroupProtocol
from runonce.rate import Rate

DEFAULT_KAFKA_VERSION = "4.4.0"


def _default_cache_dir(env: Mapping[str, str]) -> Path:
    """``$XDG_CACHE_HOME/runonce`` when the environment given names one, else ``~/.cache/runonce``."""
    base = env.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "runonce"


class Runtime(enum.StrEnum):
    """The stream job's runtimes; the first is the default."""

    TRANSACTIONAL = "transactional"
    FAUST = "faust"


class Guarantee(enum.StrEnum):
    """The faust runtime's processing guarantee (faust's own names)."""

    AT_LEAST_ONCE = "at_least_once"
    EXACTLY_ONCE = "exactly_once"


class Reader(enum.Enum):
    """The processes that read a setting: what docs/operating.md groups them by."""

    ALL = "every process"
    WORKER = "stream worker"
    EXECUTOR = "executors"
    WORKER_AND_EXECUTORS = "stream worker and executors"
    BROKER = "local broker (runonce broker, up)"
    CLIENTS = "every Kafka client"


@dataclass(frozen=True, slots=True)
class Setting:
    """How one field is given: its variable, what it is, who reads it, and what it may be."""

    env: str
    doc: str
    reader: Reader
    #: inclusive bounds of an integer
    bounds: tuple[int, int] | None = None
    #: the error beside the bounds (where they come from)
    why: str = ""
    #: a reader of its own, for a setting given by more than one variable (a password or its file)
    read: Callable[[Mapping[str, str]], object] | None = None
    #: what the table says of its default, when the field's value alone would mislead
    default_said: str | None = None


def setting(default: Any, env: str, doc: str, reader: Reader, *, bounds: tuple[int, int] | None = None,
            why: str = "", read: Callable[[Mapping[str, str]], object] | None = None,
            default_said: str | None = None, factory: Callable[[], object] | None = None,
            secret: bool = False) -> Any:
    meta = {"setting": Setting(env, doc, reader, bounds, why, read, default_said)}
    if factory is not None:
        return field(default_factory=factory, metadata=meta, repr=not secret)
    return field(default=default, metadata=meta, repr=not secret)


def _sasl(prefix: str) -> Callable[[Mapping[str, str]], object]:
    return lambda env: _password(env, prefix) if env.get(f"{prefix}_USERNAME") else None


@dataclass(frozen=True, slots=True)
class Settings:
    home: Path = setting(
        Path(".runonce"), "RUNONCE_HOME",
        "where the local broker, worker state and pid files live",
        Reader.ALL)
    cache_dir: Path = setting(
        None, "RUNONCE_CACHE_DIR",
        "where Maven-resolved broker jars and tools are cached, shared by every checkout",
        Reader.ALL, factory=lambda: _default_cache_dir({}), default_said="`$XDG_CACHE_HOME/runonce`")
    bootstrap: str | None = setting(
        None, "RUNONCE_BOOTSTRAP",
        "the Kafka bootstrap servers",
        Reader.CLIENTS, default_said="the local broker's address file")
    kafka_version: str = setting(
        DEFAULT_KAFKA_VERSION, "RUNONCE_KAFKA_VERSION",
        "the Apache Kafka release the local broker runs",
        Reader.BROKER)
    broker_host: str = setting(
        "127.0.0.1", "RUNONCE_BROKER_HOST",
        "the address the local broker's client listeners bind and advertise (its controller stays on 127.0.0.1): "
        "the pods' bridge address for a cluster on this machine (scripts/kube.sh)",
        Reader.BROKER)
    broker_heap_mb: int = setting(
        512, "RUNONCE_BROKER_HEAP_MB",
        "the local broker's JVM heap",
        Reader.BROKER, bounds=(128, 4096))
    partitions: int = setting(
        6, "RUNONCE_PARTITIONS",
        "partitions of every runonce topic: they bound the workers and each vendor's executors that do work",
        Reader.ALL, bounds=(1, 10_000))
    replication_factor: int | None = setting(
        None, "RUNONCE_REPLICATION_FACTOR",
        "copies of every runonce topic",
        Reader.ALL, bounds=(1, 100), default_said="3, or the broker count when smaller")
    min_insync_replicas: int | None = setting(
        None, "RUNONCE_MIN_INSYNC_REPLICAS",
        "brokers that must hold a write before it is acknowledged",
        Reader.ALL, bounds=(1, 100), default_said="2 when the factor is at least 3, else 1")
    policy_file: Path | None = setting(
        None, "RUNONCE_POLICY_FILE",
        "your policies, layered over the shipped ones (docs/policies.md)",
        Reader.ALL, default_said="the shipped policies")
    metrics_port: int = setting(
        0, "RUNONCE_METRICS_PORT",
        "Prometheus `/metrics`, with `/healthz` and `/readyz` beside it, of a worker or an executor; 0 serves "
        "none",
        Reader.ALL, bounds=(0, 65535))
    metrics_host: str = setting(
        "127.0.0.1", "RUNONCE_METRICS_HOST",
        "the address that port listens on: `0.0.0.0` in a pod (the kubelet probes the pod's address)",
        Reader.ALL)
    static_membership: bool = setting(
        False, "RUNONCE_STATIC_MEMBERSHIP",
        "a stream worker joins its group as a static member (KIP-345, `group.instance.id` = its name): a pod "
        "restarted under its name takes its partitions back without a rebalance",
        Reader.WORKER)
    worker_name: str = setting(
        "worker-0", "RUNONCE_WORKER_NAME",
        "names a worker's transactional id and its local RocksDB folder",
        Reader.WORKER)
    connectors_file: Path | None = setting(
        None, "RUNONCE_CONNECTORS",
        "the connectors file: which vendors the executors reach, and how (docs/vendors.md)",
        Reader.EXECUTOR, default_said="`RUNONCE_HOME/connectors.toml`")
    #: the environment the connectors file's ``{ env = "VAR" }`` secrets are read from (only those)
    environ: Mapping[str, str] = field(default_factory=dict, repr=False, compare=False)
    executor_failpoint: str | None = setting(
        None, "RUNONCE_EXECUTOR_FAILPOINT",
        "crash tests only: SIGKILL at a point of the executor's flow, `POINT[:N]`, or stall there, "
        "`stall_before_call:S` (connectors/executor/failpoints.py)",
        Reader.EXECUTOR)
    stream_failpoint: str | None = setting(
        None, "RUNONCE_STREAM_FAILPOINT",
        "faust tests only: `kill_after_state[:ACTION_ID]` or `pass_over:N[:TAG]`",
        Reader.WORKER)
    executor_txn_timeout_ms: int = setting(
        60_000, "RUNONCE_EXECUTOR_TXN_TIMEOUT_MS",
        "how long the broker lets an executor's transaction stay open before aborting it (a paused executor past "
        "it is a zombie, fenced)",
        Reader.EXECUTOR, bounds=(1_000, 900_000), why="the broker's transaction.max.timeout.ms")
    executor_session_timeout_ms: int = setting(
        10_000, "RUNONCE_EXECUTOR_SESSION_TIMEOUT_MS",
        "how long a killed executor's partitions wait for a new owner",
        Reader.EXECUTOR, bounds=(6_000, 300_000), why="the broker's group.min/max.session.timeout.ms")
    worker_session_timeout_ms: int = setting(
        10_000, "RUNONCE_WORKER_SESSION_TIMEOUT_MS",
        "how long a killed stream worker's partitions wait for a new owner, either runtime",
        Reader.WORKER, bounds=(6_000, 300_000), why="the broker's group.min/max.session.timeout.ms")
    executor_max_batch: int = setting(
        500, "RUNONCE_EXECUTOR_MAX_BATCH",
        "the most approved records one batch takes (one intent and one result transaction per batch)",
        Reader.EXECUTOR, bounds=(1, 10_000))
    executor_max_in_flight: int = setting(
        16, "RUNONCE_EXECUTOR_MAX_IN_FLIGHT",
        "the most vendor calls in flight at once, unless the vendor's `rate.in_flight` says",
        Reader.EXECUTOR, bounds=(1, 1_000))
    vendor_rates: tuple[tuple[str, Rate], ...] = setting(
        (), "RUNONCE_VENDOR_LIMITS",
        "a vendor's `rate` over the connectors file's: `payments:per_s=50,in_flight=32; ...`",
        Reader.EXECUTOR,
        read=lambda env: rate.overrides(
                                                             env["RUNONCE_VENDOR_LIMITS"]),
        default_said="none")
    runtime: Runtime = setting(
        Runtime.TRANSACTIONAL, "RUNONCE_RUNTIME",
        "the stream job's runtime: `transactional` (exactly once, confluent-kafka) or `faust`",
        Reader.WORKER)
    group_protocol: GroupProtocol = setting(
        GroupProtocol.CLASSIC, "RUNONCE_GROUP_PROTOCOL",
        "transactional runtime: the stream workers' group protocol: `classic`, or `consumer` (KIP-848, Kafka 4.0+: "
        "the broker assigns and moves only the partitions that change owner; the session timeout is the broker's "
        "`group.consumer.session.timeout.ms`, not `RUNONCE_WORKER_SESSION_TIMEOUT_MS`; docs/kafka.md)",
        Reader.WORKER)
    txn_max_records: int = setting(
        2000, "RUNONCE_TXN_MAX_RECORDS",
        "transactional runtime: the most records one transaction takes (what arrived while the previous one "
        "committed)",
        Reader.WORKER, bounds=(1, 100_000))
    txn_max_wait_ms: int = setting(
        20, "RUNONCE_TXN_MAX_WAIT_MS",
        "transactional runtime: how long an idle worker waits for a first record before looking again",
        Reader.WORKER, bounds=(1, 10_000))
    fetch_wait_ms: int = setting(
        5, "RUNONCE_FETCH_WAIT_MS",
        "transactional runtime: how long the broker holds a worker's fetch for more records (0: it answers at "
        "once, one fetch per record under agents' one-at-a-time produces; bench/fetch_cost.py)",
        Reader.WORKER, bounds=(0, 500))
    receipts_key_file: Path | None = setting(
        None, "RUNONCE_RECEIPTS_KEY",
        "transactional runtime: an Ed25519 private key file (PEM PKCS#8 or 32 raw bytes); with it, each decision's "
        "and each executor outcome's receipt, and each transaction's signed checkpoint, go to actions.receipts in "
        "the transaction that writes what they certify (docs/receipts.md)",
        Reader.WORKER_AND_EXECUTORS, default_said="none: no receipts")
    processing_guarantee: Guarantee = setting(
        Guarantee.AT_LEAST_ONCE, "RUNONCE_GUARANTEE",
        "faust runtime only: `at_least_once` or `exactly_once`",
        Reader.WORKER)
    sasl_username: str | None = setting(
        None, "RUNONCE_SASL_USERNAME",
        "this process's SASL principal on a secured broker",
        Reader.CLIENTS, default_said="unauthenticated")
    sasl_password: str | None = setting(
        None, "RUNONCE_SASL_PASSWORD",
        "its password, or `..._PASSWORD_FILE` (a file's first line, out of `ps`)",
        Reader.CLIENTS, read=_sasl("RUNONCE_SASL"), secret=True)
    sasl_mechanism: str | None = setting(
        None, "RUNONCE_SASL_MECHANISM",
        "one of " + ", ".join(MECHANISMS),
        Reader.CLIENTS,
        default_said="the client settings' `sasl.mechanism`, "
                                                                      "else PLAIN")
    kafka_config: ClientConfig = setting(
        None, "RUNONCE_KAFKA_CONFIG",
        "a properties file of librdkafka settings (TLS, SASL, OIDC), and `RUNONCE_KAFKA_CONFIG_<KEY>` each "
        "(docs/kafka.md)",
        Reader.CLIENTS, factory=ClientConfig, read=client_config.from_env, default_said="none")
    reader_sasl_username: str | None = setting(
        None, "RUNONCE_READER_SASL_USERNAME",
        "the principal that reads outcomes for agents (the SDK's awaits, `runonce mcp`), when not this process's "
        "own",
        Reader.CLIENTS)
    reader_sasl_password: str | None = setting(
        None, "RUNONCE_READER_SASL_PASSWORD",
        "its password, or `..._PASSWORD_FILE`",
        Reader.CLIENTS, read=_sasl("RUNONCE_READER_SASL"), secret=True)
    broker_users_file: Path | None = setting(
        None, "RUNONCE_BROKER_USERS",
        "a users file (`name=password` lines): SASL on every listener, StandardAuthorizer, deny by default; "
        "`admin` its super user",
        Reader.BROKER)
    broker_oidc_jwks_url: str | None = setting(
        None, "RUNONCE_BROKER_OIDC_JWKS_URL",
        "also accept OAUTHBEARER tokens, checked against this JWKS",
        Reader.BROKER)
    broker_oidc_issuer: str | None = setting(
        None, "RUNONCE_BROKER_OIDC_ISSUER",
        "the issuer those tokens must name (required with the JWKS)",
        Reader.BROKER)
    broker_oidc_audience: str = setting(
        "runonce-kafka", "RUNONCE_BROKER_OIDC_AUDIENCE",
        "the audience those tokens must name",
        Reader.BROKER)

    @property
    def broker_dir(self) -> Path:
        return self.home / "broker"

    @property
    def state_dir(self) -> Path:
        return self.home / "state"

    @property
    def bootstrap_file(self) -> Path:
        return self.broker_dir / "bootstrap"

    def bootstrap_servers(self) -> str:
        """The address every client uses: explicit setting, else the local broker's file."""
        if self.bootstrap:
            return self.bootstrap
        try:
            return self.bootstrap_file.read_text(encoding="utf-8").strip()
        except FileNotFoundError:
            raise ConfigError(
                f"no broker address: set RUNONCE_BOOTSTRAP or start the local broker "
                f"with `runonce broker start` (looked for {self.bootstrap_file})"
            ) from None

    def kafka_access(self) -> KafkaAccess:
        """Address and principal every Kafka client of this component connects with."""
        return KafkaAccess(self.bootstrap_servers(), self.sasl_username, self.sasl_password, self.sasl_mechanism,
                           self.kafka_config)

    def outcomes_access(self) -> KafkaAccess:
        """Address and principal an agent reads outcomes with: the reader principal if set."""
        if self.reader_sasl_username is None:
            return self.kafka_access()
        return KafkaAccess(self.bootstrap_servers(), self.reader_sasl_username, self.reader_sasl_password,
                           self.sasl_mechanism, self.kafka_config)

    @property
    def connectors_path(self) -> Path:
        return self.connectors_file or self.home / "connectors.toml"

    def child_env(self, base: Mapping[str, str]) -> dict[str, str]:
        """The environment of a runonce process started from this one (``runonce up``, the demo):
        ``base`` with this component's home, broker, connectors file and cache, and no principal (each
        child is given its own)."""
        env = {k: v for k, v in base.items() if k not in _PRINCIPAL_VARS}
        env.update({"RUNONCE_HOME": str(self.home), "RUNONCE_BOOTSTRAP": self.bootstrap_servers(),
                    "RUNONCE_CONNECTORS": str(self.connectors_path),
                    "RUNONCE_CACHE_DIR": str(self.cache_dir)})
        return env

    def with_principal(self, env: Mapping[str, str], username: str, password_file: Path) -> dict[str, str]:
        """``env`` for a child that connects as ``username``, its password read from a file."""
        return {**env, "RUNONCE_SASL_USERNAME": username, "RUNONCE_SASL_PASSWORD_FILE": str(password_file)}

    def vendor_rate(self, vendor: str) -> Rate | None:
        """This vendor's rate from ``RUNONCE_VENDOR_LIMITS`` (over the connectors file's), or None."""
        return dict(self.vendor_rates).get(vendor)

    def with_(self, **changes: object) -> Settings:
        return replace(self, **changes)  # type: ignore[arg-type]

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> Settings:
        env = os.environ if env is None else env
        kwargs: dict[str, object] = {"cache_dir": _default_cache_dir(env), "environ": dict(env)}
        for f in fields(cls):
            declared = f.metadata.get("setting")
            if declared is None:
                continue
            if declared.read is not None:
                if env.get(declared.env) or f.name in _READ_ALWAYS:
                    value = declared.read(env)
                    if value is not None:
                        kwargs[f.name] = value
            elif env.get(declared.env):
                kwargs[f.name] = _parse(f.type, declared.env, env[declared.env])
        settings = cls(**kwargs)  # type: ignore[arg-type]
        settings.validate()
        return settings

    def validate(self) -> None:
        for f in fields(self):
            declared = f.metadata.get("setting")
            value = getattr(self, f.name)
            if declared is None or value is None:
                continue
            if declared.bounds is not None:
                low, high = declared.bounds
                if not low <= value <= high:
                    said = f"within {low}..{high}"
                    if f.name in _AT_LEAST:
                        said = f">= {low}" if value < low else f"<= {high}"
                    raise ConfigError(f"{f.name} must be {said}{f' ({declared.why})' if declared.why else ''}, "
                                      f"got {value} ({declared.env})")
            kind = _ENUMS.get(f.type if isinstance(f.type, str) else "")
            if kind is not None and not isinstance(value, kind):
                raise ConfigError(f"{f.name} must be one of {', '.join(m.value for m in kind)}, got {value!r}")
        if self.executor_failpoint is not None:
            try:
                parse_failpoint(self.executor_failpoint)
            except ValueError as exc:
                raise ConfigError(f"executor_failpoint {exc}") from None
        if self.stream_failpoint is not None and not _stream_failpoint_ok(self.stream_failpoint):
            raise ConfigError(f"stream_failpoint must be kill_after_state[:ACTION_ID] or pass_over:N[:TAG], "
                              f"got {self.stream_failpoint!r}")
        if self.receipts_key_file is not None and self.runtime is Runtime.FAUST:
            raise ConfigError("RUNONCE_RECEIPTS_KEY: the faust runtime writes no receipts (a receipt must be in the "
                              "transaction of its decision); run the default runtime")
        if self.group_protocol is GroupProtocol.CONSUMER and self.runtime is Runtime.FAUST:
            raise ConfigError("RUNONCE_GROUP_PROTOCOL=consumer: the faust runtime's client (aiokafka) speaks only the "
                              "classic protocol; run the default runtime")
        if self.broker_oidc_jwks_url and not self.broker_oidc_issuer:
            raise ConfigError("RUNONCE_BROKER_OIDC_JWKS_URL needs RUNONCE_BROKER_OIDC_ISSUER: the broker checks "
                              "each token's issuer, and its audience (RUNONCE_BROKER_OIDC_AUDIENCE, default "
                              "runonce-kafka)")
        if self.sasl_mechanism is not None and self.sasl_mechanism not in MECHANISMS:
            raise ConfigError(f"sasl_mechanism must be one of {', '.join(MECHANISMS)}, got {self.sasl_mechanism!r}")


#: settings whose reader runs whatever the environment holds (it reads several variables)
_READ_ALWAYS = frozenset({"kafka_config", "sasl_password", "reader_sasl_password"})
#: counts whose only bound worth saying is the lower one
_AT_LEAST = frozenset({"partitions", "replication_factor", "min_insync_replicas"})
_ENUMS: dict[str, type[enum.Enum]] = {"Runtime": Runtime, "Guarantee": Guarantee, "GroupProtocol": GroupProtocol}


def _parse(annotation: object, env: str, text: str) -> object:
    """One variable's text as the field's declared type (``from __future__ import annotations``:
    the annotation is its source text)."""
    kind = str(annotation).replace(" | None", "")
    if kind == "int":
        try:
            return int(text)
        except ValueError:
            raise ConfigError(f"{env} must be an integer, got {text!r}") from None
    if kind == "bool":
        value = text.strip().lower()
        if value not in ("true", "false", "1", "0"):
            raise ConfigError(f"{env} must be true or false, got {value!r}")
        return value in ("true", "1")
    if kind == "Path":
        return Path(text)
    if kind in _ENUMS:
        try:
            return _ENUMS[kind](text)
        except ValueError:
            choices = ", ".join(m.value for m in _ENUMS[kind])
            raise ConfigError(f"{env} must be one of {choices}, got {text!r}") from None
    assert kind == "str", f"{env}: no parser for {kind}"
    return text


def settings_table() -> str:
    """docs/operating.md's table of settings, from their declarations."""
    rows = ["| variable | read by | default | what it is |", "|---|---|---|---|"]
    defaults = Settings()
    for f in fields(Settings):
        declared = f.metadata.get("setting")
        if declared is None:
            continue
        if declared.default_said is not None:
            default = declared.default_said
        elif f.default is MISSING or getattr(defaults, f.name) is None:
            default = "none"
        else:
            value = getattr(defaults, f.name)
            default = f"`{str(value).lower() if isinstance(value, bool) else value}`"
        rows.append(f"| `{declared.env}` | {declared.reader.value} | {default} | {declared.doc} |")
    return "\n".join(rows)


#: the variables that name a principal: never handed down to a child process
_PRINCIPAL_VARS = frozenset({f"RUNONCE_{who}SASL_{what}" for who in ("", "READER_")
                             for what in ("USERNAME", "PASSWORD", "PASSWORD_FILE")})


def _stream_failpoint_ok(value: str) -> bool:
    kind, _, arg = value.partition(":")
    count = arg.partition(":")[0]
    return kind == "kill_after_state" or (kind == "pass_over" and count.isdigit() and int(count) > 0)


def _password(env: Mapping[str, str], prefix: str) -> str:
    """<prefix>_PASSWORD, or the first line of <prefix>_PASSWORD_FILE (keeps it out of `ps`)."""
    if env.get(f"{prefix}_PASSWORD"):
        return env[f"{prefix}_PASSWORD"]
    path = env.get(f"{prefix}_PASSWORD_FILE")
    if not path:
        raise ConfigError(f"{prefix}_USERNAME is set but neither {prefix}_PASSWORD "
                          f"nor {prefix}_PASSWORD_FILE is")
    try:
        return Path(path).read_text(encoding="utf-8").splitlines()[0].strip()
    except (OSError, IndexError) as exc:
        raise ConfigError(f"{prefix}_PASSWORD_FILE {path!r} cannot be read: {exc}") from exc
