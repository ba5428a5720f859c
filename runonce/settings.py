"""One frozen settings object, built once at the entry point and passed down.

Nothing else in runonce reads the environment: ``Settings.from_env`` is called by
the CLI (and by test fixtures), and everything below takes a ``Settings``.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Mapping

from runonce.errors import ConfigError
from runonce.kafka import client_config
from runonce.kafka.access import MECHANISMS, KafkaAccess
from runonce.kafka.client_config import ClientConfig

DEFAULT_KAFKA_VERSION = "4.4.0"


@dataclass(frozen=True, slots=True)
class VendorLimit:
    """What one vendor allows an executor: calls per second (a token bucket holding at most
    ``burst``), and calls in flight at once (None: ``executor_max_in_flight``)."""

    vendor: str
    rate_per_s: float | None = None
    burst: int = 1
    in_flight: int | None = None

    @classmethod
    def parse_all(cls, text: str) -> tuple[VendorLimit, ...]:
        """``payments:rate=50,in_flight=32; smtp:rate=10,burst=5``: a ConfigError names the
        vendor and the field that is wrong."""
        limits: list[VendorLimit] = []
        for part in filter(None, (p.strip() for p in text.split(";"))):
            vendor, sep, fields = part.partition(":")
            vendor = vendor.strip()
            if not sep or not vendor or not fields.strip():
                raise ConfigError(f"RUNONCE_VENDOR_LIMITS: {part!r} must be VENDOR:FIELD=VALUE[,FIELD=VALUE]")
            values: dict[str, float] = {}
            for item in fields.split(","):
                name, eq, value = (x.strip() for x in item.partition("="))
                if name not in ("rate", "burst", "in_flight") or not eq:
                    raise ConfigError(f"RUNONCE_VENDOR_LIMITS: {vendor}: {item.strip()!r}: the fields are "
                                      f"rate=CALLS_PER_S, burst=N, in_flight=N")
                try:
                    values[name] = float(value)
                except ValueError:
                    raise ConfigError(f"RUNONCE_VENDOR_LIMITS: {vendor}: {name} must be a number, "
                                      f"got {value!r}") from None
                if values[name] <= 0 or (name != "rate" and values[name] != int(values[name])):
                    raise ConfigError(f"RUNONCE_VENDOR_LIMITS: {vendor}: {name} must be a positive "
                                      f"{'number' if name == 'rate' else 'integer'}, got {value!r}")
            if any(limit.vendor == vendor for limit in limits):
                raise ConfigError(f"RUNONCE_VENDOR_LIMITS: {vendor} is named twice")
            in_flight = values.get("in_flight")
            limits.append(cls(vendor, values.get("rate"), int(values.get("burst", 1)),
                              None if in_flight is None else int(in_flight)))
        return tuple(limits)


def _default_cache_dir(env: Mapping[str, str]) -> Path:
    """``$XDG_CACHE_HOME/runonce`` when the environment given names one, else ``~/.cache/runonce``."""
    base = env.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "runonce"


@dataclass(frozen=True, slots=True)
class Settings:
    #: where the local broker, worker state and pid files live
    home: Path = Path(".runonce")
    #: Maven-resolved broker jars are cached here, shared by every checkout
    cache_dir: Path = field(default_factory=lambda: _default_cache_dir({}))
    #: explicit bootstrap servers; when None, the local broker's address file is read
    bootstrap: str | None = None
    kafka_version: str = DEFAULT_KAFKA_VERSION
    broker_heap_mb: int = 512
    partitions: int = 6
    #: copies of every runonce topic; None: 3, or the broker count when smaller (runonce/kafka/replication.py)
    replication_factor: int | None = None
    #: brokers that must hold a write before it is acknowledged; None: 2 when the factor is >= 3, else 1
    min_insync_replicas: int | None = None
    #: None means the policies shipped with runonce (runonce/core/policies.toml)
    policy_file: Path | None = None
    #: Prometheus metrics port of a stream worker or executor, with /healthz and /readyz beside
    #: /metrics (runonce/ops/observe/serve.py); 0 serves none
    metrics_port: int = 0
    #: the address that port listens on: loopback on a machine, 0.0.0.0 in a pod (the kubelet
    #: probes the pod's address)
    metrics_host: str = "127.0.0.1"
    #: a stream worker joins its group as a static member (KIP-345: ``group.instance.id`` = its
    #: transactional id, so its name): a pod restarted under its name takes its partitions back
    #: without a rebalance (the Helm chart turns it on; executors are static members always)
    static_membership: bool = False
    #: names this worker's local RocksDB folder (several workers can share one machine)
    worker_name: str = "worker-0"
    #: the connectors file: which vendors the executors reach, and how (connectors/toolkit/config.py);
    #: None: ``<home>/connectors.toml``, which ``runonce up`` writes for its sandboxes
    connectors_file: Path | None = None
    #: the environment the connectors file's ``{ env = "VAR" }`` secrets are read from (only those)
    environ: Mapping[str, str] = field(default_factory=dict, repr=False, compare=False)
    #: executors only, for crash tests: SIGKILL itself at before_call | after_call | after_commit
    #: | before_vendor_commit (a connector whose effect commits in the vendor's transaction: after
    #: the effect, before that COMMIT); ``POINT:N``: at the Nth time this process passes it
    executor_failpoint: str | None = None
    #: faust workers only, for tests: ``kill_after_state[:ACTION_ID]``: SIGKILL itself once a
    #: record's state change is written locally and its decision is an approval (of that action,
    #: if named), before anything is sent; ``pass_over:N[:TAG]``: acknowledge N records of
    #: actions.requested (holding TAG) undecided, as faust does to events it skips, and commit
    stream_failpoint: str | None = None
    #: executors: how long the broker lets one of their transactions stay open before aborting it
    #: (and fencing the producer); a paused executor past it is a zombie and is refused
    executor_txn_timeout_ms: int = 60_000
    #: executors: how long a silent member keeps its partitions before the group moves them (a
    #: killed executor's partitions wait this long for a new owner; the broker's minimum is 6 s)
    executor_session_timeout_ms: int = 10_000
    #: stream workers, either runtime: the same for the stream job's group (a killed worker's
    #: partitions, and every decision on them, wait this long)
    worker_session_timeout_ms: int = 10_000
    #: executors: the most approved records one batch takes (one intent and one result
    #: transaction per batch), and the most vendor calls in flight at once
    executor_max_batch: int = 500
    executor_max_in_flight: int = 16
    #: executors: per-vendor rate and concurrency (``RUNONCE_VENDOR_LIMITS``), over the connectors
    #: file's ``rate``; a vendor named in neither has no rate of ours, only its own 429/Retry-After
    vendor_limits: tuple[VendorLimit, ...] = ()
    #: the stream job's runtime: "transactional" (exactly-once, confluent-kafka) or "faust"
    runtime: str = "transactional"
    #: transactional runtime: a transaction takes at most this many records: what arrived
    #: while the previous one committed (batches grow with the load, never wait to fill)
    txn_max_records: int = 2000
    #: ... and an idle worker waits this long for a first record before looking again
    txn_max_wait_ms: int = 20
    #: transactional runtime: the broker holds the worker's fetch this long for more records
    #: (0: it answers as soon as one arrives). Agents produce one record at a time: answered at
    #: once, the worker fetches once per record, which costs the broker about as much CPU as
    #: taking the records (bench/fetch_cost.py); an idle worker pays one fetch per this interval
    fetch_wait_ms: int = 5
    #: faust runtime: "at_least_once" (replays are harmless by design) or "exactly_once" (faust's flag)
    processing_guarantee: str = "at_least_once"
    #: this component's SASL principal on a secured broker (None: connect unauthenticated)
    sasl_username: str | None = None
    sasl_password: str | None = field(default=None, repr=False)
    #: None: the client settings' sasl.mechanism, else PLAIN
    sasl_mechanism: str | None = None
    #: the deployment's librdkafka settings (``RUNONCE_KAFKA_CONFIG``, ``RUNONCE_KAFKA_CONFIG_<KEY>``):
    #: TLS, SASL mechanism, OIDC; merged into every Kafka client (runonce/kafka/client_config.py)
    kafka_config: ClientConfig = field(default_factory=ClientConfig)
    #: the principal that reads outcomes for agents (the SDK's awaits, ``runonce mcp``), when it
    #: is not this component's own: ``agent-reader`` beside ``agent`` on a secured broker
    reader_sasl_username: str | None = None
    reader_sasl_password: str | None = field(default=None, repr=False)
    #: local broker only: a users file (``name=password`` lines) turns on SASL on every
    #: listener, StandardAuthorizer and deny-by-default; ``admin`` is its super user
    broker_users_file: Path | None = None
    #: local secured broker only: also accept OAUTHBEARER tokens on its SASL_SSL listener, checked
    #: against this JWKS (an OIDC provider's; the token's ``sub`` is the principal)
    broker_oidc_jwks_url: str | None = None
    #: ... whose ``iss`` must be this provider's, and whose ``aud`` this cluster's (Kafka 4.4's
    #: validator will not start without both)
    broker_oidc_issuer: str | None = None
    broker_oidc_audience: str = "runonce-kafka"

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

    def vendor_limit(self, vendor: str) -> VendorLimit | None:
        """This vendor's limits from ``RUNONCE_VENDOR_LIMITS``, or None."""
        return next((limit for limit in self.vendor_limits if limit.vendor == vendor), None)

    def with_(self, **changes: object) -> Settings:
        return replace(self, **changes)  # type: ignore[arg-type]

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> Settings:
        env = os.environ if env is None else env
        kwargs: dict[str, object] = {"cache_dir": _default_cache_dir(env), "environ": dict(env)}
        if "RUNONCE_HOME" in env:
            kwargs["home"] = Path(env["RUNONCE_HOME"])
        if env.get("RUNONCE_CACHE_DIR"):
            kwargs["cache_dir"] = Path(env["RUNONCE_CACHE_DIR"])
        if env.get("RUNONCE_BOOTSTRAP"):
            kwargs["bootstrap"] = env["RUNONCE_BOOTSTRAP"]
        if env.get("RUNONCE_KAFKA_VERSION"):
            kwargs["kafka_version"] = env["RUNONCE_KAFKA_VERSION"]
        if env.get("RUNONCE_POLICY_FILE"):
            kwargs["policy_file"] = Path(env["RUNONCE_POLICY_FILE"])
        if env.get("RUNONCE_CONNECTORS"):
            kwargs["connectors_file"] = Path(env["RUNONCE_CONNECTORS"])
        for name, attr in (("RUNONCE_EXECUTOR_FAILPOINT", "executor_failpoint"),
                           ("RUNONCE_STREAM_FAILPOINT", "stream_failpoint")):
            if env.get(name):
                kwargs[attr] = env[name]
        if env.get("RUNONCE_WORKER_NAME"):
            kwargs["worker_name"] = env["RUNONCE_WORKER_NAME"]
        if env.get("RUNONCE_RUNTIME"):
            kwargs["runtime"] = env["RUNONCE_RUNTIME"]
        if env.get("RUNONCE_STATIC_MEMBERSHIP"):
            value = env["RUNONCE_STATIC_MEMBERSHIP"].strip().lower()
            if value not in ("true", "false", "1", "0"):
                raise ConfigError(f"RUNONCE_STATIC_MEMBERSHIP must be true or false, got {value!r}")
            kwargs["static_membership"] = value in ("true", "1")
        if env.get("RUNONCE_METRICS_HOST"):
            kwargs["metrics_host"] = env["RUNONCE_METRICS_HOST"]
        if env.get("RUNONCE_GUARANTEE"):
            kwargs["processing_guarantee"] = env["RUNONCE_GUARANTEE"]
        if env.get("RUNONCE_SASL_USERNAME"):
            kwargs["sasl_username"] = env["RUNONCE_SASL_USERNAME"]
            kwargs["sasl_password"] = _password(env, "RUNONCE_SASL")
        if env.get("RUNONCE_READER_SASL_USERNAME"):
            kwargs["reader_sasl_username"] = env["RUNONCE_READER_SASL_USERNAME"]
            kwargs["reader_sasl_password"] = _password(env, "RUNONCE_READER_SASL")
        if env.get("RUNONCE_SASL_MECHANISM"):
            kwargs["sasl_mechanism"] = env["RUNONCE_SASL_MECHANISM"]
        kwargs["kafka_config"] = client_config.from_env(env)
        if env.get("RUNONCE_VENDOR_LIMITS"):
            kwargs["vendor_limits"] = VendorLimit.parse_all(env["RUNONCE_VENDOR_LIMITS"])
        if env.get("RUNONCE_BROKER_USERS"):
            kwargs["broker_users_file"] = Path(env["RUNONCE_BROKER_USERS"])
        if env.get("RUNONCE_BROKER_OIDC_JWKS_URL"):
            kwargs["broker_oidc_jwks_url"] = env["RUNONCE_BROKER_OIDC_JWKS_URL"]
        if env.get("RUNONCE_BROKER_OIDC_ISSUER"):
            kwargs["broker_oidc_issuer"] = env["RUNONCE_BROKER_OIDC_ISSUER"]
        if env.get("RUNONCE_BROKER_OIDC_AUDIENCE"):
            kwargs["broker_oidc_audience"] = env["RUNONCE_BROKER_OIDC_AUDIENCE"]
        for name, attr in (("RUNONCE_BROKER_HEAP_MB", "broker_heap_mb"), ("RUNONCE_PARTITIONS", "partitions"),
                           ("RUNONCE_METRICS_PORT", "metrics_port"),
                           ("RUNONCE_EXECUTOR_TXN_TIMEOUT_MS", "executor_txn_timeout_ms"),
                           ("RUNONCE_EXECUTOR_SESSION_TIMEOUT_MS", "executor_session_timeout_ms"),
                           ("RUNONCE_WORKER_SESSION_TIMEOUT_MS", "worker_session_timeout_ms"),
                           ("RUNONCE_EXECUTOR_MAX_BATCH", "executor_max_batch"),
                           ("RUNONCE_EXECUTOR_MAX_IN_FLIGHT", "executor_max_in_flight"),
                           ("RUNONCE_TXN_MAX_RECORDS", "txn_max_records"),
                           ("RUNONCE_TXN_MAX_WAIT_MS", "txn_max_wait_ms"),
                           ("RUNONCE_FETCH_WAIT_MS", "fetch_wait_ms"),
                           ("RUNONCE_REPLICATION_FACTOR", "replication_factor"),
                           ("RUNONCE_MIN_INSYNC_REPLICAS", "min_insync_replicas")):
            if env.get(name):
                try:
                    kwargs[attr] = int(env[name])
                except ValueError:
                    raise ConfigError(f"{name} must be an integer, got {env[name]!r}") from None
        settings = cls(**kwargs)  # type: ignore[arg-type]
        settings.validate()
        return settings

    def validate(self) -> None:
        if self.partitions < 1:
            raise ConfigError(f"partitions must be >= 1, got {self.partitions}")
        for attr in ("replication_factor", "min_insync_replicas"):
            value = getattr(self, attr)
            if value is not None and value < 1:
                raise ConfigError(f"{attr} must be >= 1, got {value}")
        if not 128 <= self.broker_heap_mb <= 4096:
            raise ConfigError(f"broker_heap_mb must be within 128..4096, got {self.broker_heap_mb}")
        if self.executor_failpoint is not None and not _executor_failpoint_ok(self.executor_failpoint):
            raise ConfigError(f"executor_failpoint must be one of {', '.join(EXECUTOR_FAILPOINTS)}, each "
                              f"optionally :N (the Nth pass), "
                              f"got {self.executor_failpoint!r}")
        if self.stream_failpoint is not None and not _stream_failpoint_ok(self.stream_failpoint):
            raise ConfigError(f"stream_failpoint must be kill_after_state[:ACTION_ID] or pass_over:N[:TAG], "
                              f"got {self.stream_failpoint!r}")
        for name in ("executor_session_timeout_ms", "worker_session_timeout_ms"):
            if not 6_000 <= getattr(self, name) <= 300_000:
                raise ConfigError(f"{name} must be within 6000..300000 (the broker's "
                                  f"group.min/max.session.timeout.ms), got {getattr(self, name)}")
        if self.broker_oidc_jwks_url and not self.broker_oidc_issuer:
            raise ConfigError("RUNONCE_BROKER_OIDC_JWKS_URL needs RUNONCE_BROKER_OIDC_ISSUER: the broker checks "
                              "each token's issuer, and its audience (RUNONCE_BROKER_OIDC_AUDIENCE, default "
                              "runonce-kafka)")
        if not 1 <= self.executor_max_batch <= 10_000:
            raise ConfigError(f"executor_max_batch must be within 1..10000, got {self.executor_max_batch}")
        if not 1 <= self.executor_max_in_flight <= 1_000:
            raise ConfigError(f"executor_max_in_flight must be within 1..1000, got {self.executor_max_in_flight}")
        if not 1_000 <= self.executor_txn_timeout_ms <= 900_000:
            raise ConfigError(f"executor_txn_timeout_ms must be within 1000..900000 (the broker's "
                              f"transaction.max.timeout.ms), got {self.executor_txn_timeout_ms}")
        if self.runtime not in RUNTIMES:
            raise ConfigError(f"runtime must be one of {', '.join(RUNTIMES)}, got {self.runtime!r}")
        if not 1 <= self.txn_max_records <= 100_000:
            raise ConfigError(f"txn_max_records must be within 1..100000, got {self.txn_max_records}")
        if not 1 <= self.txn_max_wait_ms <= 10_000:
            raise ConfigError(f"txn_max_wait_ms must be within 1..10000, got {self.txn_max_wait_ms}")
        if not 0 <= self.fetch_wait_ms <= 500:
            raise ConfigError(f"fetch_wait_ms must be within 0..500, got {self.fetch_wait_ms}")
        if self.sasl_mechanism is not None and self.sasl_mechanism not in MECHANISMS:
            raise ConfigError(f"sasl_mechanism must be one of {', '.join(MECHANISMS)}, got {self.sasl_mechanism!r}")
        if self.processing_guarantee not in ("at_least_once", "exactly_once"):
            raise ConfigError(
                f"processing_guarantee must be at_least_once or exactly_once, got {self.processing_guarantee!r}"
            )


#: the variables that name a principal: never handed down to a child process
_PRINCIPAL_VARS = frozenset({f"RUNONCE_{who}SASL_{what}" for who in ("", "READER_")
                             for what in ("USERNAME", "PASSWORD", "PASSWORD_FILE")})

#: the stream job's runtimes; the first is the default
RUNTIMES = ("transactional", "faust")


EXECUTOR_FAILPOINTS = ("before_call", "after_call", "after_commit", "before_vendor_commit", "abort_result",
                       "before_index_write")


def _executor_failpoint_ok(value: str) -> bool:
    point, _, nth = value.partition(":")
    return point in EXECUTOR_FAILPOINTS and (not nth or (nth.isdigit() and int(nth) >= 1))


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
