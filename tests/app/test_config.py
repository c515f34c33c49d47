"""Service settings from the environment, and the generated secret key."""

from __future__ import annotations

import re
import stat
from pathlib import Path

import pytest

from app.config import ServiceSettings
from app.errors import ConfigError, KilnError
from sandbox import SandboxSettings


def test_defaults_with_a_data_dir(tmp_path: Path) -> None:
    settings = ServiceSettings.from_env({"KILN_DATA_DIR": str(tmp_path)})
    assert settings.data_dir == tmp_path
    assert settings.redis_url is None
    listening = (settings.host, settings.port, settings.public_host)
    assert listening == ("127.0.0.1", 8000, "kiln.localhost")
    limits = (settings.max_active_runs, settings.max_active_runs_per_user)
    assert (*limits, settings.max_active_runs_per_chat) == (200, 2, 1)
    assert settings.run_claim_idle_seconds == 30.0
    assert (settings.event_batch_seconds, settings.event_batch_bytes) == (0.1, 16384)
    assert settings.database_path == tmp_path / "kiln.db"


def test_values_come_from_the_environment(tmp_path: Path) -> None:
    env = {
        "KILN_DATA_DIR": str(tmp_path),
        "KILN_SECRET_KEY": "s" * 20,
        "REDIS_URL": "redis://r:6379/1",
        "KILN_PORT": "9000",
        "KILN_MAX_ACTIVE_RUNS_PER_USER": "5",
        "KILN_RUN_CLAIM_IDLE": "2.5",
        "KILN_EVENT_BATCH_MS": "50",
    }
    settings = ServiceSettings.from_env(env)
    assert (settings.secret_key, settings.redis_url, settings.port) == (
        "s" * 20,
        env["REDIS_URL"],
        9000,
    )
    assert settings.max_active_runs_per_user == 5
    assert settings.run_claim_idle_seconds == 2.5
    assert settings.event_batch_seconds == 0.05
    assert not (tmp_path / "secret.key").exists()


def test_the_secret_is_generated_once_with_mode_0600(tmp_path: Path) -> None:
    first = ServiceSettings.from_env({"KILN_DATA_DIR": str(tmp_path / "data")})
    second = ServiceSettings.from_env({"KILN_DATA_DIR": str(tmp_path / "data")})
    assert first.secret_key == second.secret_key
    assert len(first.secret_key) >= 32
    mode = stat.S_IMODE((tmp_path / "data" / "secret.key").stat().st_mode)
    assert mode == 0o600
    assert first.secret_key not in repr(first)


@pytest.mark.parametrize(
    ("name", "value", "message"),
    [
        pytest.param(
            "KILN_PORT",
            "http",
            "KILN_PORT='http' must be an integer between 1 and 65535",
            id="port",
        ),
        pytest.param(
            "KILN_PORT",
            "70000",
            "KILN_PORT='70000' must be an integer between 1 and 65535",
            id="port-range",
        ),
        pytest.param(
            "KILN_MAX_ACTIVE_RUNS",
            "0",
            "KILN_MAX_ACTIVE_RUNS='0' must be an integer between 1 and 1000000000",
            id="zero",
        ),
        pytest.param(
            "KILN_RUN_CLAIM_IDLE",
            "soon",
            "KILN_RUN_CLAIM_IDLE='soon' must be a finite number > 0",
            id="idle",
        ),
        pytest.param(
            "KILN_RUN_DEADLINE",
            "-5",
            "KILN_RUN_DEADLINE='-5' must be a finite number > 0",
            id="neg",
        ),
        pytest.param(
            "KILN_QUEUED_TIMEOUT",
            "inf",
            "KILN_QUEUED_TIMEOUT='inf' must be a finite number > 0",
            id="inf",
        ),
        pytest.param(
            "KILN_EVENT_BATCH_MS",
            "nan",
            "KILN_EVENT_BATCH_MS='nan' must be a finite number > 0",
            id="nan",
        ),
        pytest.param(
            "KILN_WORKER_CONCURRENCY",
            "1e3",
            "KILN_WORKER_CONCURRENCY='1e3' must be an integer between 1 and 1000000000",
            id="not-whole",
        ),
        pytest.param(
            "KILN_SECRET_KEY", "short", "KILN_SECRET_KEY must be at least 16", id="secret"
        ),
        pytest.param(
            "KILN_OPENAI_COMPATIBLE_BASE_URL",
            "localhost:11434",
            "KILN_OPENAI_COMPATIBLE_BASE_URL='localhost:11434' must be an http:// or https://",
            id="compatible-base-url",
        ),
    ],
)
def test_a_malformed_value_names_its_variable(
    tmp_path: Path, name: str, value: str, message: str
) -> None:
    with pytest.raises(ConfigError, match=f"^{re.escape(message)}"):
        ServiceSettings.from_env({"KILN_DATA_DIR": str(tmp_path), name: value})


def test_a_short_secret_file_is_refused(tmp_path: Path) -> None:
    (tmp_path / "secret.key").write_text("tiny\n")
    with pytest.raises(ConfigError, match="secret key file"):
        ServiceSettings.from_env({"KILN_DATA_DIR": str(tmp_path)})


def test_blank_values_mean_the_defaults(tmp_path: Path) -> None:
    env = {"KILN_DATA_DIR": str(tmp_path), "KILN_PORT": " ", "REDIS_URL": "", "KILN_HOST": ""}
    settings = ServiceSettings.from_env(env)
    assert (settings.port, settings.redis_url, settings.host) == (8000, None, "127.0.0.1")


def test_the_config_error_is_in_the_tree_with_its_code() -> None:
    assert issubclass(ConfigError, KilnError)
    assert ConfigError.code == "config_error"


def test_the_project_size_cap_is_a_setting_with_a_floor(tmp_path: Path) -> None:
    env = {"KILN_DATA_DIR": str(tmp_path), "KILN_SECRET_KEY": "s" * 32}
    assert ServiceSettings.from_env(env).project_max_bytes == 50 * 2**20
    raised = ServiceSettings.from_env({**env, "KILN_PROJECT_MAX_BYTES": "1048576"})
    assert raised.project_max_bytes == 1048576
    with pytest.raises(ConfigError, match="KILN_PROJECT_MAX_BYTES='12'"):
        ServiceSettings.from_env({**env, "KILN_PROJECT_MAX_BYTES": "12"})


@pytest.mark.parametrize(
    ("setting", "folder"),
    [
        pytest.param("KILN_PROJECTS_DIR", "projects", id="projects"),
        pytest.param("KILN_PUBLISHED_DIR", "published", id="published-builds"),
    ],
)
@pytest.mark.parametrize(
    "given",
    [
        pytest.param(None, id="unset-in-the-data-dir"),
        pytest.param(" ", id="blank-in-the-data-dir"),
        pytest.param("/mnt/shared/x", id="set"),
    ],
)
def test_shared_folders_are_in_the_data_dir_unless_one_is_set(
    tmp_path: Path, setting: str, folder: str, given: str | None
) -> None:
    env = {"KILN_DATA_DIR": str(tmp_path / "data"), "KILN_SECRET_KEY": "s" * 32}
    if given is not None:
        env[setting] = given
    settings = ServiceSettings.from_env(env)
    expected = Path(given) if given and given.strip() else tmp_path / "data" / folder
    assert getattr(settings, f"{folder}_dir") == expected


def test_the_store_is_sqlite_in_the_data_dir_unless_a_database_url_is_set(tmp_path: Path) -> None:
    embedded = ServiceSettings.from_env({"KILN_DATA_DIR": str(tmp_path)})
    assert embedded.database_location == tmp_path / "kiln.db"
    assert embedded.database_pool == 10
    url = "postgresql://kiln:pw-secret@db:5432/kiln"
    env = {"KILN_DATA_DIR": str(tmp_path), "KILN_DATABASE_URL": url, "KILN_DATABASE_POOL": "3"}
    shared = ServiceSettings.from_env(env)
    assert (shared.database_location, shared.database_pool) == (url, 3)
    assert "pw-secret" not in repr(shared)


@pytest.mark.parametrize(
    ("name", "value", "said"),
    [
        pytest.param(
            "KILN_DATABASE_URL", "mysql://u:pw-secret@h/d", "mysql://u:***@h/d", id="scheme"
        ),
        pytest.param(
            "KILN_DATABASE_URL", "kiln.db", "'kiln.db' must be a postgresql://", id="path"
        ),
        pytest.param("KILN_DATABASE_POOL", "0", "an integer between 1 and 1000", id="pool"),
    ],
)
def test_a_bad_database_setting_is_refused_in_words(
    tmp_path: Path, name: str, value: str, said: str
) -> None:
    with pytest.raises(ConfigError, match=re.escape(said)) as raised:
        ServiceSettings.from_env({"KILN_DATA_DIR": str(tmp_path), name: value})
    assert "pw-secret" not in str(raised.value)


def test_the_redis_password_file_reaches_the_url_and_never_the_repr(tmp_path: Path) -> None:
    secret = tmp_path / "redis-password"
    secret.write_text("hunter2-redis\n")
    env = {
        "KILN_DATA_DIR": str(tmp_path / "d"),
        "REDIS_URL": "redis://10.0.0.1:6380/0",
        "KILN_REDIS_PASSWORD_FILE": str(secret),
    }
    settings = ServiceSettings.from_env(env)
    assert settings.redis_url == "redis://:hunter2-redis@10.0.0.1:6380/0"
    assert "hunter2" not in repr(settings)
    sandboxes = SandboxSettings.from_env(env)
    assert sandboxes.redis_url == settings.redis_url  # one rule for both layers
    assert "hunter2" not in repr(sandboxes)
    with pytest.raises(ConfigError, match="KILN_REDIS_PASSWORD_FILE"):
        ServiceSettings.from_env({**env, "REDIS_URL": ""})  # the embedded Redis takes none
