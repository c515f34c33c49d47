"""Sandbox settings from the environment: the warm pool, egress and registry forwarding."""

from __future__ import annotations

import pytest

from sandbox.settings import SandboxSettings


def test_defaults_pool_every_template_and_forward_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("KILN_WARM_POOL_TEMPLATES", "KILN_NPM_REGISTRY", "npm_config_registry"):
        monkeypatch.delenv(name, raising=False)
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY"):
        monkeypatch.delenv(name, raising=False)
        monkeypatch.delenv(name.lower(), raising=False)
    settings = SandboxSettings.from_env()
    assert settings.warm_pool_templates == ("vite-react", "vanilla", "nextjs")
    assert (settings.npm_registry, settings.proxy_env) == (None, {})


def test_the_environment_sets_pool_networks_cache_registry_and_proxies(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("KILN_WARM_POOL_TEMPLATES", " vanilla, ,vite-react ")
    monkeypatch.setenv("KILN_WARM_POOL_SIZE", "3")
    monkeypatch.setenv("KILN_SANDBOX_MAX_LIFETIME", "7200")
    monkeypatch.setenv("KILN_REAP_INTERVAL", "15")
    monkeypatch.setenv("KILN_EGRESS_NETWORK", "egress-x")
    monkeypatch.setenv("KILN_NPM_CACHE_VOLUME", "cache-x")
    monkeypatch.setenv("npm_config_registry", "https://npm.internal/")
    monkeypatch.setenv("https_proxy", "http://proxy:3128")
    monkeypatch.setenv("NO_PROXY", "localhost")
    monkeypatch.delenv("HTTPS_PROXY", raising=False)
    monkeypatch.delenv("KILN_NPM_REGISTRY", raising=False)
    settings = SandboxSettings.from_env()
    assert settings.warm_pool_templates == ("vanilla", "vite-react")
    assert settings.warm_pool_size == 3
    assert (settings.max_lifetime_seconds, settings.reap_interval_seconds) == (7200.0, 15.0)
    assert (settings.egress_network, settings.npm_cache_volume) == ("egress-x", "cache-x")
    assert settings.npm_registry == "https://npm.internal/"
    assert settings.proxy_env["HTTPS_PROXY"] == "http://proxy:3128"
    assert settings.proxy_env["NO_PROXY"] == "localhost"


def test_kiln_npm_registry_wins_over_npm_config_registry(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("npm_config_registry", "https://a/")
    monkeypatch.setenv("KILN_NPM_REGISTRY", "https://b/")
    assert SandboxSettings.from_env().npm_registry == "https://b/"


def test_a_ca_bundle_that_is_not_a_file_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KILN_SANDBOX_CA_BUNDLE", "/no/such/bundle.pem")
    with pytest.raises(ValueError, match=r"'/no/such/bundle\.pem'"):
        SandboxSettings.from_env()
