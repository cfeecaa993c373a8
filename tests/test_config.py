"""docs/spec.md §10: configuration (conch/config.py): one name for a setting as flag, environment
variable and env-file line, and invalid values refused naming the setting."""

from __future__ import annotations

import pytest

from conch.config import Config, parse_setting
from conch.errors import ConfigError


def test_one_name_three_ways(tmp_path):
    env_file = tmp_path / "conch.env"
    env_file.write_text("# comment\nCONCH_MAX_RUNNING=5\nexport CONCH_KILL_GRACE_MS='300'\n")
    cfg = Config.from_sources(
        flags={"max_running": 7}, environ={"CONCH_MAX_RUNNING": "6"}, env_file=str(env_file)
    )
    assert cfg.max_running == 7 and cfg.kill_grace_ms == 300
    cfg = Config.from_sources(environ={"CONCH_MAX_RUNNING": "6"}, env_file=str(env_file))
    assert cfg.max_running == 6
    cfg = Config.from_sources(environ={}, env_file=str(env_file))
    assert cfg.max_running == 5
    assert Config(max_running=4).max_running == 4
    assert Config.from_sources(environ={"CONCH_PROFILES": "conch, tfbash"}).profiles == [
        "conch",
        "tfbash",
    ]
    assert Config.from_sources(environ={"CONCH_AGENT_ENV": "false"}).agent_env is False


@pytest.mark.parametrize(
    "kwargs,name",
    [
        ({"max_running": 0}, "max_running"),
        ({"max_running": True}, "max_running"),
        ({"kill_grace_ms": -1}, "kill_grace_ms"),
        ({"text_format": "xml"}, "text_format"),
        ({"default_cwd": "/definitely/not/here"}, "default_cwd"),
        ({"port": 70000}, "port"),
        ({"max_total_log_bytes": -1}, "max_total_log_bytes"),
    ],
)
def test_invalid_values_name_the_setting(kwargs, name):
    with pytest.raises(ConfigError, match=name):
        Config(**kwargs)


def test_invalid_environment_value_names_the_setting():
    with pytest.raises(ConfigError, match="max_jobs"):
        Config.from_sources(environ={"CONCH_MAX_JOBS": "many"})
    with pytest.raises(ConfigError, match="agent_env"):
        parse_setting("agent_env", "maybe")


def test_the_logs_total_cap_is_one_setting_three_ways():
    assert Config().max_total_log_bytes == 10 * 1024**3
    env = {"CONCH_MAX_TOTAL_LOG_BYTES": "1_000_000"}
    assert Config.from_sources(environ=env).max_total_log_bytes == 1_000_000
    flags = {"max_total_log_bytes": 0}  # 0: no cap
    assert Config.from_sources(flags=flags, environ=env).max_total_log_bytes == 0
    with pytest.raises(ConfigError, match="max_total_log_bytes"):
        Config.from_sources(environ={"CONCH_MAX_TOTAL_LOG_BYTES": "ten gigs"})
