"""``load_settings``: the TOML file, ``GATEWAY_*`` overrides, defaults and what it refuses."""

from __future__ import annotations

import os
import textwrap
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from app.settings import ConfigError, load_settings

WriteConfig = Callable[[str], Path]


@pytest.fixture(autouse=True)
def clean_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """No ``GATEWAY_*`` variable of the developer's shell leaks in; ``$HOME`` is a fresh dir."""
    for name in list(os.environ):
        if name.upper().startswith("GATEWAY_"):
            monkeypatch.delenv(name)
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.delenv("XDG_DATA_HOME", raising=False)
    return home


@pytest.fixture
def root(tmp_path: Path) -> Path:
    path = tmp_path / "src"
    path.mkdir()
    return path


@pytest.fixture
def write_config(tmp_path: Path) -> WriteConfig:
    def write(body: str) -> Path:
        path = tmp_path / "gateway.toml"
        path.write_text(textwrap.dedent(body))
        return path

    return write


def config_error(config_file: Path | None = None, **overrides: Any) -> str:
    with pytest.raises(ConfigError) as raised:
        load_settings(config_file, **overrides)
    return str(raised.value)


# --- sources ----------------------------------------------------------------------------------


def test_reads_values_from_the_toml_file(write_config: WriteConfig, root: Path) -> None:
    path = write_config(
        f"""
        log_level = "debug"

        [server]
        host = "192.0.2.1"
        port = 9001
        token = "file-token"
        allowed_origins = ["http://localhost:5173"]

        [workspaces]
        roots = ["{root}"]

        [providers.claude_code]
        model = "claude-sonnet-4-5"
        extra_args = ["--verbose"]

        [retry.strategies]
        default = {{ delays_s = [1, 2] }}
        quick = {{ delays_s = [0.5] }}

        [sessions]
        approval_timeout_s = 30
        """
    )
    settings = load_settings(path)
    assert settings.log_level == "debug"
    assert (settings.server.host, settings.server.port) == ("192.0.2.1", 9001)
    assert settings.server.token is not None
    assert settings.server.token.get_secret_value() == "file-token"
    assert settings.server.allowed_origins == ["http://localhost:5173"]
    assert settings.workspaces.roots == [root]
    assert settings.providers["claude_code"].model == "claude-sonnet-4-5"
    assert settings.providers["claude_code"].extra_args == ["--verbose"]
    strategies = settings.retry.strategies
    assert {name: s.delays_s for name, s in strategies.items()} == {
        "default": [1.0, 2.0],
        "quick": [0.5],
    }
    assert settings.sessions.approval_timeout_s == 30.0


def test_gateway_config_names_the_file_when_no_path_is_given(
    write_config: WriteConfig,
) -> None:
    path = write_config("[server]\nport = 9002\n")
    assert load_settings(environ={"GATEWAY_CONFIG": str(path)}).server.port == 9002


def test_an_explicit_path_wins_over_gateway_config(
    write_config: WriteConfig, tmp_path: Path
) -> None:
    path = write_config("[server]\nport = 9003\n")
    elsewhere = tmp_path / "absent.toml"
    assert load_settings(path, environ={"GATEWAY_CONFIG": str(elsewhere)}).server.port == 9003


def test_environment_variables_override_the_file_with_double_underscore_nesting(
    write_config: WriteConfig, monkeypatch: pytest.MonkeyPatch, root: Path
) -> None:
    path = write_config(
        """
        log_level = "warning"
        [server]
        host = "192.0.2.1"
        port = 9001
        """
    )
    monkeypatch.setenv("GATEWAY_SERVER__PORT", "9100")
    monkeypatch.setenv("GATEWAY_LOG_LEVEL", "error")
    monkeypatch.setenv("GATEWAY_STORAGE__RETENTION_DAYS", "7")
    monkeypatch.setenv("GATEWAY_WORKSPACES__ROOTS", f'["{root}"]')
    monkeypatch.setenv("GATEWAY_RETRY__STRATEGIES__DEFAULT__DELAYS_S", "[1, 2, 3]")
    settings = load_settings(path)
    assert settings.server.port == 9100
    assert settings.server.host == "192.0.2.1"  # the file's value for a sibling survives
    assert settings.log_level == "error"
    assert settings.storage.retention_days == 7
    assert settings.workspaces.roots == [root]
    assert settings.retry.strategies["default"].delays_s == [1.0, 2.0, 3.0]


def test_provider_settings_merge_the_file_and_the_environment(
    write_config: WriteConfig, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = write_config(
        """
        [providers.claude_code]
        executable = "/opt/claude/bin/claude"
        model = "from-file"
        env = { ANTHROPIC_BASE_URL = "http://file:4000", https_proxy = "http://proxy:3128" }
        """
    )
    monkeypatch.setenv("GATEWAY_PROVIDERS__CLAUDE_CODE__MODEL", "from-env")
    monkeypatch.setenv("GATEWAY_PROVIDERS__CLAUDE_CODE__ENV__ANTHROPIC_BASE_URL", "http://env")
    monkeypatch.setenv("GATEWAY_PROVIDERS__CLAUDE_CODE__ENV__ANTHROPIC_API_KEY", "sk-env")
    monkeypatch.setenv("GATEWAY_PROVIDERS__CLAUDE_CODE__ENV__no_proxy", "localhost")
    provider = load_settings(path).providers["claude_code"]
    assert provider.executable == "/opt/claude/bin/claude"
    assert provider.model == "from-env"
    # Variable names reach the CLI exactly as written: ANTHROPIC_API_KEY, not anthropic_api_key.
    assert provider.env == {
        "ANTHROPIC_BASE_URL": "http://env",
        "ANTHROPIC_API_KEY": "sk-env",
        "https_proxy": "http://proxy:3128",
        "no_proxy": "localhost",
    }


def test_a_provider_env_overlay_given_as_json_merges_with_the_file(
    write_config: WriteConfig, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = write_config('[providers.claude_code]\nenv = { KEEP = "file" }\n')
    monkeypatch.setenv("GATEWAY_PROVIDERS__CLAUDE_CODE__ENV", '{"IS_SANDBOX": "1"}')
    assert load_settings(path).providers["claude_code"].env == {"KEEP": "file", "IS_SANDBOX": "1"}


def test_keyword_overrides_win_over_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GATEWAY_SERVER__PORT", "9100")
    assert load_settings(server={"port": 9200}).server.port == 9200


# --- defaults ---------------------------------------------------------------------------------


def test_defaults_without_a_file(clean_environment: Path) -> None:
    settings = load_settings()
    assert settings.server.host == "127.0.0.1"
    assert settings.server.port == 8765
    assert settings.server.token is None
    assert settings.server.allowed_origins == []
    assert settings.storage.retention_days == 30
    assert settings.storage.data_dir == clean_environment / ".local" / "share" / "agent-gateway"
    assert settings.storage.database_url == (
        f"sqlite+aiosqlite:///{clean_environment}/.local/share/agent-gateway/gateway.db"
    )
    assert settings.workspaces.roots == [clean_environment]
    assert settings.providers == {}  # the catalog adds every provider (test_catalog.py)
    assert settings.selection.default == "claude_code"
    assert list(settings.retry.strategies) == ["default"]
    assert settings.retry.strategies["default"].delays_s == [10.0, 20.0, 60.0]
    assert settings.sessions.approval_timeout_s == 600.0
    assert settings.sessions.default_approval_mode == "ask"
    assert "allow_all" not in settings.sessions.allowed_approval_modes
    assert settings.log_level == "info"


def test_data_dir_follows_xdg_data_home(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg"))
    assert load_settings().storage.data_dir == tmp_path / "xdg" / "agent-gateway"


@pytest.mark.parametrize(
    "url", ["sqlite+aiosqlite:////srv/gateway.db", "postgresql+asyncpg://gateway@db:5432/gateway"]
)
def test_an_explicit_storage_url_replaces_the_sqlite_default(url: str) -> None:
    assert load_settings(storage={"url": url}).storage.database_url == url


@pytest.mark.parametrize(
    "url", ["postgresql://gateway@db/gateway", "mysql+aiomysql://db/gateway", "/srv/gateway.db"]
)
def test_a_storage_url_of_another_engine_or_driver_is_refused_with_the_ones_that_work(
    url: str,
) -> None:
    with pytest.raises(ConfigError) as raised:
        load_settings(storage={"url": url})
    assert "sqlite+aiosqlite" in str(raised.value)
    assert "postgresql+asyncpg" in str(raised.value)


# --- errors -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("variable", "value", "setting"),
    [
        ("GATEWAY_SERVER__PORT", "not-a-port", "server.port"),
        ("GATEWAY_SERVER__PORT", "70000", "server.port"),
        ("GATEWAY_STORAGE__RETENTION_DAYS", "0", "storage.retention_days"),
        ("GATEWAY_SESSIONS__APPROVAL_TIMEOUT_S", "-1", "sessions.approval_timeout_s"),
        ("GATEWAY_LOG_LEVEL", "verbose", "log_level"),
    ],
)
def test_an_invalid_environment_value_names_the_setting_and_its_variable(
    monkeypatch: pytest.MonkeyPatch, variable: str, value: str, setting: str
) -> None:
    monkeypatch.setenv(variable, value)
    message = config_error()
    assert f"{setting}:" in message
    assert variable in message


def test_an_invalid_file_value_names_the_file_the_setting_and_its_variable(
    write_config: WriteConfig,
) -> None:
    path = write_config('[server]\nport = "eighty"\n')
    message = config_error(path)
    assert str(path) in message
    assert "server.port" in message
    assert "GATEWAY_SERVER__PORT" in message


def test_every_invalid_setting_is_reported_at_once(write_config: WriteConfig) -> None:
    path = write_config("[server]\nport = -1\nmax_body_bytes = 1\n")
    message = config_error(path)
    assert "server.port" in message
    assert "server.max_body_bytes" in message


def test_an_unknown_section_is_refused(write_config: WriteConfig) -> None:
    message = config_error(write_config("[serverr]\nport = 9000\n"))
    assert "serverr" in message


def test_an_unknown_key_in_a_section_is_refused(write_config: WriteConfig) -> None:
    message = config_error(write_config("[server]\nprot = 9000\n"))
    assert "server.prot" in message


@pytest.mark.parametrize("name", ["Gemini", "acp:", "-x", "a b", "acp:Gemini"])
def test_a_provider_key_that_is_no_provider_name_is_refused(
    write_config: WriteConfig, name: str
) -> None:
    message = config_error(write_config(f'[providers."{name}"]\nmodel = "m"\n'))
    assert f"{name!r} is not a provider name" in message


@pytest.mark.parametrize(
    "origin",
    ["*", "https://*.example.com", "localhost:5173", "http://localhost:5173/"],
)
def test_a_wildcard_or_malformed_origin_is_refused(origin: str) -> None:
    message = config_error(server={"allowed_origins": [origin]})
    assert "server.allowed_origins" in message
    assert repr(origin) in message


def test_a_retry_section_without_a_default_strategy_is_refused(write_config: WriteConfig) -> None:
    path = write_config("[retry.strategies]\nquick = { delays_s = [1] }\n")
    assert "'default' strategy" in config_error(path)


def test_a_missing_config_file_is_refused(tmp_path: Path) -> None:
    missing = tmp_path / "nope.toml"
    message = config_error(missing)
    assert str(missing) in message
    assert "does not exist" in message


def test_a_missing_file_named_by_gateway_config_is_refused(tmp_path: Path) -> None:
    missing = tmp_path / "nope.toml"
    with pytest.raises(ConfigError, match="does not exist"):
        load_settings(environ={"GATEWAY_CONFIG": str(missing)})


def test_malformed_toml_is_refused_naming_the_file(write_config: WriteConfig) -> None:
    path = write_config("[server\nport = 1\n")
    message = config_error(path)
    assert f"cannot read configuration file {path}" in message


def test_a_workspace_root_that_does_not_exist_is_refused(tmp_path: Path) -> None:
    missing = tmp_path / "no-such-dir"
    message = config_error(workspaces={"roots": [str(missing)]})
    assert "workspaces.roots" in message
    assert str(missing) in message


def test_a_workspace_root_that_is_a_file_is_refused(tmp_path: Path) -> None:
    file = tmp_path / "file"
    file.write_text("")
    assert "not an existing directory" in config_error(workspaces={"roots": [str(file)]})


def test_a_relative_workspace_root_is_refused(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    (tmp_path / "src").mkdir()
    monkeypatch.chdir(tmp_path)  # the relative root exists from here, and is refused anyway
    message = config_error(workspaces={"roots": ["src"]})
    assert "workspaces.roots" in message
    assert "absolute" in message


def test_an_empty_root_list_is_refused() -> None:
    assert "workspaces.roots is empty" in config_error(workspaces={"roots": []})


def test_a_default_approval_mode_that_is_not_allowed_is_refused(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("GATEWAY_SESSIONS__DEFAULT_APPROVAL_MODE", "allow_all")
    message = config_error()
    assert "sessions.default_approval_mode 'allow_all'" in message
    assert "sessions.allowed_approval_modes" in message


def test_allow_all_is_accepted_once_the_operator_lists_it() -> None:
    sessions = {
        "allowed_approval_modes": ["ask", "allow_all"],
        "default_approval_mode": "allow_all",
    }
    assert load_settings(sessions=sessions).sessions.default_approval_mode == "allow_all"


def test_an_unknown_approval_mode_is_refused() -> None:
    message = config_error(sessions={"allowed_approval_modes": ["ask", "yolo"]})
    assert "sessions.allowed_approval_modes" in message


# --- cluster ------------------------------------------------------------------------------------

POSTGRES = {"url": "postgresql+asyncpg://gateway@db:5432/gateway"}
SECRET = "0123456789abcdef" * 4


def test_a_cluster_on_postgresql_takes_the_documented_names() -> None:
    settings = load_settings(
        storage=POSTGRES,
        cluster={"redis_url": "redis://redis:6379/0", "replica_id": "gw-1", "secret": SECRET},
    )
    assert settings.cluster.redis_url == "redis://redis:6379/0"
    assert settings.cluster.replica_id == "gw-1"
    assert settings.cluster.lease_ttl_s == 15


def test_without_a_cluster_the_replica_id_defaults_to_host_and_pid() -> None:
    settings = load_settings()
    assert settings.cluster.redis_url is None
    assert settings.cluster.replica_id.endswith(f"-{os.getpid()}")


def test_a_cluster_on_a_sqlite_file_is_refused_saying_what_to_configure() -> None:
    with pytest.raises(ConfigError) as raised:
        load_settings(cluster={"redis_url": "redis://redis:6379/0", "secret": SECRET})
    assert "cluster.redis_url" in str(raised.value)
    assert "postgresql+asyncpg://" in str(raised.value)


@pytest.mark.parametrize(
    ("cluster", "named"),
    [
        ({"redis_url": "http://redis:6379", "secret": SECRET}, "redis_url"),
        ({"redis_url": "redis://r", "replica_id": "gw 1", "secret": SECRET}, "replica_id"),
        ({"redis_url": "redis://r", "lease_ttl_s": 0.5, "secret": SECRET}, "lease_ttl_s"),
    ],
)
def test_bad_cluster_settings_are_refused_by_name(cluster: dict[str, object], named: str) -> None:
    with pytest.raises(ConfigError, match=named):
        load_settings(storage=POSTGRES, cluster=cluster)


def test_routing_strategies_are_read_per_scenario_and_an_unknown_one_is_refused(
    write_config: WriteConfig,
) -> None:
    path = write_config(
        '[selection]\nstrategy = "least_loaded"\n'
        'strategies = { code_analysis = "lowest_latency" }\n'
        "weights = { failure_rate = 3 }\n"
    )
    selection = load_settings(path).selection
    assert selection.strategy == "least_loaded"
    assert selection.strategies == {"code_analysis": "lowest_latency"}
    assert (selection.weights.latency, selection.weights.failure_rate) == (1.0, 3.0)
    message = config_error(write_config('[selection]\nstrategies = { debugging = "fastest" }\n'))
    assert "selection.strategies.debugging" in message
    assert "'lowest_latency'" in message  # what it could be instead


def test_the_worktrees_root_defaults_into_the_data_directory_and_must_be_absolute(
    tmp_path: Path,
) -> None:
    settings = load_settings(storage={"data_dir": tmp_path / "data"})
    assert settings.worktrees_root == tmp_path / "data" / "worktrees"
    chosen = load_settings(workspaces={"roots": [tmp_path], "worktrees_root": tmp_path / "t"})
    assert chosen.worktrees_root == tmp_path / "t"

    said = config_error(workspaces={"roots": [tmp_path], "worktrees_root": "relative/trees"})

    assert "workspaces.worktrees_root" in said
    assert "absolute" in said
