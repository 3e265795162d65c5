"""app/config.py: each variable's text is read as its setting's type, an empty one keeps
the default, overrides win over the environment, and a refused value names its variable."""

from pathlib import Path

import pytest

from app.config import load_settings


def _load(tmp_path: Path, env: dict[str, str], **overrides):
    return load_settings({"instance_path": tmp_path, **overrides}, env=env)


def test_each_variable_is_read_as_its_type(tmp_path):
    settings = _load(
        tmp_path,
        {
            "PORT": " 8080 ",
            "HEARTBEAT_SECONDS": "2.5",
            "OPEN_SIGNUP": "off",
            "RUN_LOGS": "Yes",
            "SESSION_COOKIE_SECURE": "true",
            "FETCH_ALLOW_HOSTS": "a.test, b.test,",
            "CORS_ORIGINS": "https://App.example.com,http://localhost:3000",
            "MODEL_CREDIT_WEIGHTS": "claude-haiku-5-5=1, claude-sonnet-5-5=3",
            "PUBLIC_URL": " https://chat.example.com/ ",
            "INSTANCE_PATH": "/ignored/because/overridden",
            "RUN_EXECUTOR": "dramatiq",
        },
    )
    assert settings.port == 8080
    assert settings.heartbeat_seconds == 2.5
    assert (settings.open_signup, settings.run_logs, settings.session_cookie_secure) == (
        False,
        True,
        True,
    )
    assert settings.fetch_allow_hosts == ("a.test", "b.test")
    assert settings.cors_origins == ("https://app.example.com", "http://localhost:3000")
    assert settings.model_credit_weights == {"claude-haiku-5-5": 1, "claude-sonnet-5-5": 3}
    assert settings.public_url == "https://chat.example.com"
    assert settings.instance_path == tmp_path
    assert settings.run_executor == "dramatiq"


def test_an_empty_variable_keeps_the_default_and_defaults_are_derived(tmp_path):
    settings = _load(tmp_path, {"PORT": "", "SESSION_COOKIE_SECURE": "", "DATABASE_URL": ""})
    assert (settings.port, settings.session_cookie_secure) == (5000, None)
    assert settings.database_url == f"sqlite:///{tmp_path / 'loopdesk.db'}"
    assert settings.secret_key == (tmp_path / "secret_key").read_text().strip()
    assert settings.model_provider == "demo"


def test_the_provider_follows_a_key_unless_it_is_named(tmp_path):
    assert _load(tmp_path, {"ANTHROPIC_API_KEY": "k"}).model_provider == "anthropic"
    named = {"ANTHROPIC_API_KEY": "k", "MODEL_PROVIDER": "demo"}
    assert _load(tmp_path, named).model_provider == "demo"
    assert _load(tmp_path, {}, anthropic_base_url="http://m").model_provider == "anthropic"


def test_overrides_win_over_the_environment(tmp_path):
    env = {"PORT": "1", "SECRET_KEY": "from-env", "CHAT_TITLES": "true"}
    settings = _load(tmp_path, env, port=2, secret_key="override", chat_titles=False)
    assert (settings.port, settings.secret_key, settings.chat_titles) == (2, "override", False)


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({"PORT": "http"}, "setting PORT must be a whole number, got 'http'"),
        ({"STALE_SECONDS": "1m"}, "setting STALE_SECONDS must be a number of seconds, got '1m'"),
        ({"RUN_EXECUTOR": "celery"}, "setting RUN_EXECUTOR must be 'thread' or 'dramatiq'"),
        ({"SESSION_LIFETIME_DAYS": "0"}, "setting SESSION_LIFETIME_DAYS must be greater than"),
        ({"TRUSTED_PROXIES": "-1"}, "setting TRUSTED_PROXIES must be greater than or equal to 0"),
        ({"PUBLIC_URL": "chat.example.com"}, "setting PUBLIC_URL must be like https://"),
        ({"CORS_ORIGINS": "*"}, "setting CORS_ORIGINS must be origins like https://"),
        ({"MODEL_CREDIT_WEIGHTS": "a=b"}, "setting MODEL_CREDIT_WEIGHTS must be model="),
    ],
)
def test_a_refused_value_names_its_variable(tmp_path, env, message):
    with pytest.raises(ValueError) as refused:
        _load(tmp_path, env)
    assert str(refused.value).startswith(message)


def test_an_unknown_override_is_refused(tmp_path):
    with pytest.raises(ValueError, match="setting prot: Extra inputs are not permitted"):
        _load(tmp_path, {}, prot=1)
