"""``kiln doctor``'s npm cache check: this instance's cache and the host's budget."""

from __future__ import annotations

import pytest

from app.cli.doctor_npm_cache import MIB, ProxyCache, cache_result

OWN = "kiln-npm-proxy-a"


def _cache(name: str, used_mib: int | None, bound_mib: int | None) -> ProxyCache:
    return ProxyCache(
        name,
        None if used_mib is None else used_mib * MIB,
        None if bound_mib is None else bound_mib * MIB,
    )


def test_the_instances_and_the_hosts_use_are_shown() -> None:
    caches = [_cache(OWN, 100, 2048), _cache("kiln-npm-proxy-b", 50, 2048)]
    result = cache_result(OWN, caches, 100_000 * MIB)
    assert result.ok
    assert result.detail.startswith("this instance: 100 MiB of 2048 MiB; 2 proxies on this host")
    assert "150 MiB used, bounds 4096 MiB in all, 100000 MiB free" in result.detail


@pytest.mark.parametrize(
    ("caches", "free_mib", "says"),
    [
        pytest.param([_cache(OWN, 10, 2048)], 1000, "over what the disk can give", id="budget"),
        pytest.param([_cache(OWN, None, None)], 10**6, "did not say", id="own-silent"),
        pytest.param([_cache("kiln-npm-proxy-b", 1, 64)], 10**6, "did not say", id="own-absent"),
    ],
)
def test_a_budget_over_the_disk_or_a_silent_proxy_fails(
    caches: list[ProxyCache], free_mib: int, says: str
) -> None:
    result = cache_result(OWN, caches, free_mib * MIB)
    assert not result.ok
    assert says in result.detail


def test_an_older_proxy_that_does_not_answer_is_named_not_counted() -> None:
    caches = [_cache(OWN, 1, 64), _cache("kiln-npm-proxy-old", None, None)]
    result = cache_result(OWN, caches, None)
    assert result.ok
    assert "1 more did not answer" in result.detail
    assert "not visible from here" in result.detail
