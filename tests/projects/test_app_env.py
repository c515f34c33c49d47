"""The app environment's rules: names, reserved names, sizes, public and secret variables."""

from __future__ import annotations

import pytest

from app.projects import app_env
from app.projects.errors import AppEnvRefused
from app.store import AppVariable
from prompts.compose import EnvName, system_prompt
from sandbox.images.templates import TEMPLATES

SECRET = "sk_live_never-in-a-message"


@pytest.mark.parametrize(
    "name",
    [
        pytest.param("API_URL", id="upper"),
        pytest.param("_private", id="underscore"),
        pytest.param("VITE_MAP_KEY", id="public"),
        pytest.param("a1", id="digit-after-letter"),
    ],
)
def test_posix_names_are_kept(name: str) -> None:
    assert app_env.check_variable(name, "x", secret=False).name == name


@pytest.mark.parametrize(
    ("name", "words"),
    [
        pytest.param("1ABC", "not an environment variable name", id="leading-digit"),
        pytest.param("MY-KEY", "not an environment variable name", id="dash"),
        pytest.param("", "not an environment variable name", id="empty"),
        pytest.param("A" * 129, "at most 128", id="too-long"),
        pytest.param("PATH", "reserved", id="path"),
        pytest.param("HOME", "reserved", id="home"),
        pytest.param("NODE_OPTIONS", "reserved", id="node-options"),
        pytest.param("npm_config_registry", "reserved", id="npm-config"),
        pytest.param("KILN_SECRET_KEY", "reserved", id="kiln"),
        pytest.param("LD_PRELOAD", "reserved", id="ld-preload"),
        pytest.param("IFS", "reserved", id="shell-ifs"),
    ],
)
def test_bad_and_reserved_names_are_refused_in_words(name: str, words: str) -> None:
    with pytest.raises(AppEnvRefused, match=words) as caught:
        app_env.check_variable(name, "x", secret=False)
    assert caught.value.field == "name"
    assert caught.value.code == "app_env_refused"


@pytest.mark.parametrize(
    "name",
    [
        pytest.param("VITE_STRIPE_SECRET", id="vite"),
        pytest.param("NEXT_PUBLIC_STRIPE_SECRET", id="nextjs"),
    ],
)
def test_a_public_secret_is_refused_without_quoting_it(name: str) -> None:
    with pytest.raises(AppEnvRefused, match=f"{name!r} cannot be a secret") as caught:
        app_env.check_variable(name, SECRET, secret=True)
    assert caught.value.field == "secret"
    assert SECRET not in str(caught.value)


@pytest.mark.parametrize(
    ("name", "public"),
    [
        pytest.param("VITE_MAP_KEY", True, id="vite"),
        pytest.param("NEXT_PUBLIC_MAP_KEY", True, id="nextjs"),
        pytest.param("NEXT_MAP_KEY", False, id="next-without-public"),
        pytest.param("MAP_KEY", False, id="plain"),
    ],
)
def test_public_names_are_both_bundlers_prefixes(name: str, public: bool) -> None:
    assert app_env.is_public(name) is public
    assert app_env.check_variable(name, "x", secret=not public).public is public


@pytest.mark.parametrize("template", [pytest.param(name, id=name) for name in TEMPLATES])
def test_every_templates_public_prefix_is_a_public_name(template: str) -> None:
    prefix = TEMPLATES[template].public_env_prefix
    assert not prefix or app_env.is_public(f"{prefix}NAME")


@pytest.mark.parametrize(
    "value",
    [
        pytest.param("x" * (app_env.MAX_VALUE_BYTES + 1), id="too-long"),
        pytest.param("é" * (app_env.MAX_VALUE_BYTES // 2 + 1), id="too-many-bytes"),
        pytest.param("a\x00b", id="nul"),
    ],
)
def test_bad_values_are_refused_without_quoting_them(value: str) -> None:
    with pytest.raises(AppEnvRefused) as caught:
        app_env.check_variable("TOKEN", value, secret=True)
    assert caught.value.field == "value"
    assert value not in str(caught.value)


def test_a_chat_is_bounded_in_count_and_size() -> None:
    many = [AppVariable(f"V{index}", "x") for index in range(app_env.MAX_VARIABLES + 1)]
    with pytest.raises(AppEnvRefused, match=f"at most {app_env.MAX_VARIABLES}"):
        app_env.check_totals(many)
    big = [AppVariable(f"V{index}", "x" * app_env.MAX_VALUE_BYTES) for index in range(9)]
    with pytest.raises(AppEnvRefused, match="bytes"):
        app_env.check_totals(big)
    app_env.check_totals(many[:-1])


class Variables:
    """A chat's variables, as the store gives them."""

    def __init__(self, *variables: AppVariable) -> None:
        self.variables = list(variables)

    def app_variables(self, chat_id: str) -> list[AppVariable]:
        return self.variables


def test_the_build_gets_public_variables_only() -> None:
    source = Variables(
        AppVariable("VITE_API_URL", "https://api.example.test"),
        AppVariable("DATABASE_URL", "postgres://x"),
        AppVariable("STRIPE_KEY", SECRET, secret=True),
    )
    assert app_env.build_environment(source, "c1") == {"VITE_API_URL": "https://api.example.test"}


def test_the_sandbox_gets_every_value_and_knows_the_secrets() -> None:
    source = Variables(AppVariable("MODE", "demo"), AppVariable("TOKEN", SECRET, secret=True))
    env = app_env.app_environment(source, "c1")
    assert env.values == {"MODE": "demo", "TOKEN": SECRET}
    assert env.secrets == (SECRET,)
    assert SECRET not in repr(env)


def test_the_model_is_told_names_never_values() -> None:
    names = app_env.env_names(
        [AppVariable("VITE_MAP_KEY", "pk_public"), AppVariable("TOKEN", SECRET, secret=True)]
    )
    assert names == (
        EnvName("VITE_MAP_KEY", public=True, secret=False),
        EnvName("TOKEN", public=False, secret=True),
    )
    prompt = system_prompt("vite-react", app_env=names)
    assert SECRET not in prompt
    assert "pk_public" not in prompt
