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
    ({"RUNONCE_GUARANTEE": "maybe"}, "processing_guarantee must be"),
    ({"RUNONCE_BROKER_HEAP_MB": "64000"}, "broker_heap_mb must be within"),
])
def test_bad_settings_name_the_variable(env: dict[str, str], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        Settings.from_env(env)
