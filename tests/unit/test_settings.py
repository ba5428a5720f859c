from __future__ import annotations

import pytest

from runonce.errors import ConfigError
from runonce.settings import Settings


def test_from_env_reads_only_what_it_is_given(tmp_path) -> None:
    s = Settings.from_env({"RUNONCE_HOME": str(tmp_path), "RUNONCE_PARTITIONS": "3", "RUNONCE_BOOTSTRAP": "h:1"})
    assert (s.home, s.partitions, s.bootstrap_servers()) == (tmp_path, 3, "h:1")


@pytest.mark.parametrize("env, message", [
    ({"RUNONCE_PARTITIONS": "six"}, "RUNONCE_PARTITIONS must be an integer"),
    ({"RUNONCE_PARTITIONS": "0"}, "partitions must be >= 1"),
    ({"RUNONCE_GUARANTEE": "maybe"}, "RUNONCE_GUARANTEE must be one of at_least_once, exactly_once"),
    ({"RUNONCE_BROKER_HEAP_MB": "64000"}, "broker_heap_mb must be within"),
    ({"RUNONCE_EXECUTOR_SESSION_TIMEOUT_MS": "3000"}, "executor_session_timeout_ms must be within 6000"),
    ({"RUNONCE_WORKER_SESSION_TIMEOUT_MS": "5000"}, "worker_session_timeout_ms must be within 6000"),
    ({"RUNONCE_STREAM_FAILPOINT": "pass_over:ten"}, "stream_failpoint must be"),
    ({"RUNONCE_EXECUTOR_FAILPOINT": "before_vendor_commit:0"}, "executor_failpoint must be"),
    ({"RUNONCE_EXECUTOR_FAILPOINT": "after_lunch"}, "executor_failpoint must be"),
    ({"RUNONCE_STREAM_FAILPOINT": "skip_all"}, "stream_failpoint must be"),
    ({"RUNONCE_FETCH_WAIT_MS": "501"}, "fetch_wait_ms must be within 0..500"),
    ({"RUNONCE_GROUP_PROTOCOL": "cooperative"}, "RUNONCE_GROUP_PROTOCOL must be one of classic, consumer"),
    ({"RUNONCE_GROUP_PROTOCOL": "consumer", "RUNONCE_RUNTIME": "faust"}, "faust runtime's client .* classic"),
    ({"RUNONCE_RECEIPTS_KEY": "/k.pem", "RUNONCE_RUNTIME": "faust"}, "the faust runtime writes no receipts"),
])
def test_bad_settings_name_the_variable(env: dict[str, str], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        Settings.from_env(env)


def test_a_child_process_gets_this_components_places_and_never_its_principal(tmp_path) -> None:
    settings = Settings.from_env({"RUNONCE_HOME": str(tmp_path), "RUNONCE_BOOTSTRAP": "127.0.0.1:1",
                                  "RUNONCE_SASL_USERNAME": "admin", "RUNONCE_SASL_PASSWORD": "secret",
                                  "XDG_CACHE_HOME": str(tmp_path / "xdg")})
    caller = {"PATH": "/bin", "RUNONCE_SASL_USERNAME": "admin", "RUNONCE_SASL_PASSWORD": "secret",
              "RUNONCE_SASL_PASSWORD_FILE": "/x"}
    env = settings.child_env(caller)
    assert not {"RUNONCE_SASL_USERNAME", "RUNONCE_SASL_PASSWORD", "RUNONCE_SASL_PASSWORD_FILE"} & env.keys()
    assert env["PATH"] == "/bin" and env["RUNONCE_BOOTSTRAP"] == "127.0.0.1:1"
    child = Settings.from_env(env)
    assert (child.home, child.cache_dir, child.connectors_path) == (settings.home, settings.cache_dir,
                                                                    settings.connectors_path)
    agent = Settings.from_env(settings.with_principal(env, "agent", _password_file(tmp_path, "pw-agent")))
    assert (agent.sasl_username, agent.sasl_password) == ("agent", "pw-agent")


def _password_file(tmp_path, password: str):
    path = tmp_path / "agent.password"
    path.write_text(password + "\n")
    return path


def test_replication_is_automatic_unless_set_and_never_below_one() -> None:
    auto = Settings.from_env({})
    assert (auto.replication_factor, auto.min_insync_replicas) == (None, None)
    set_ = Settings.from_env({"RUNONCE_REPLICATION_FACTOR": "3", "RUNONCE_MIN_INSYNC_REPLICAS": "2"})
    assert (set_.replication_factor, set_.min_insync_replicas) == (3, 2)
    with pytest.raises(ConfigError, match="replication_factor must be >= 1"):
        Settings.from_env({"RUNONCE_REPLICATION_FACTOR": "0"})


def test_the_stream_workers_fetches_wait_for_more_records_unless_told_not_to() -> None:
    from runonce.streams.transactional.worker import worker_consumer_config

    def fetch(env: dict[str, str]) -> tuple[object, object]:
        config = worker_consumer_config(Settings.from_env({"RUNONCE_BOOTSTRAP": "127.0.0.1:9", **env}))
        return config.get("fetch.wait.max.ms"), config.get("fetch.min.bytes")

    assert fetch({}) == (5, 1024 * 1024)  # one fetch per 5 ms under load, not one per record
    assert fetch({"RUNONCE_FETCH_WAIT_MS": "20"}) == (20, 1024 * 1024)
    assert fetch({"RUNONCE_FETCH_WAIT_MS": "0"}) == (None, None)  # librdkafka's own: answered at once


def test_every_declared_setting_is_read_from_its_variable_and_bounded() -> None:
    """Each declared integer is read from its own variable and refused outside its bounds, with
    the variable named. Catches a declaration whose variable ``from_env`` never reads."""
    from dataclasses import fields

    for f in fields(Settings):
        declared = f.metadata.get("setting")
        if declared is None or declared.bounds is None:
            continue
        low, high = declared.bounds
        assert getattr(Settings.from_env({declared.env: str(low)}), f.name) == low
        with pytest.raises(ConfigError, match=f"{f.name} must be .*{declared.env}"):
            Settings.from_env({declared.env: str(high + 1)})
